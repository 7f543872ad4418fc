"""Models whose sliding layers rotate differently from their full layers, for both targets.

HF's Mellum builds one RoPE table per layer kind from ``rope_parameters[kind]`` (theta, type,
scaling and ``partial_rotary_factor``, modeling_mellum.py ``compute_default_rope_parameters``),
but its ``apply_rotary_pos_emb`` rotates whole heads, so a partial share fails in HF itself.
Laguna's ``apply_rotary_pos_emb`` rotates the first ``cos.shape[-1]`` dims and passes the rest:
Mellum's layers with Laguna's rotation are Laguna's RoPE without Laguna's gated attention
output (a feature of its own), the laguna-like reference these tests run against.
"""

from __future__ import annotations

import json
from pathlib import Path

# Laguna's default rope_parameters (configuration_laguna.py): full layers rotate half of each head
LAGUNA_ROPE = {
    "full_attention": {
        "rope_type": "default",
        "rope_theta": 500000.0,
        "partial_rotary_factor": 0.5,
    },
    "sliding_attention": {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 1.0,
    },
}
# Sliding layers with a scaled RoPE of their own beside full layers' plain one
SCALED_ROPE = {
    "full_attention": {"rope_type": "default", "rope_theta": 500000.0},
    "sliding_attention": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
}
# Installs Laguna's rotation into HF's Mellum in a process that imports it (parity subprocesses)
SITECUSTOMIZE = """\
import transformers.models.mellum.modeling_mellum as mellum
from transformers.models.laguna.modeling_laguna import apply_rotary_pos_emb

mellum.apply_rotary_pos_emb = apply_rotary_pos_emb
"""


def mellum_dir(root: Path, rope: dict) -> Path:
    """Mellum's default config with three of every four layers sliding and ``rope`` as its
    per-kind ``rope_parameters``."""
    from transformers import MellumConfig

    config = MellumConfig().to_dict()
    layers = config["num_hidden_layers"]
    config["layer_types"] = [
        "full_attention" if i % 4 == 3 else "sliding_attention" for i in range(layers)
    ]
    config["rope_parameters"] = rope
    config["architectures"] = ["MellumForCausalLM"]
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config, indent=2))
    return root


def laguna_rotation(monkeypatch, scratch: Path) -> None:
    """Mellum rotates as Laguna does, in this process and in the subprocesses it starts."""
    import os

    import transformers.models.mellum.modeling_mellum as mellum
    from transformers.models.laguna.modeling_laguna import apply_rotary_pos_emb

    monkeypatch.setattr(mellum, "apply_rotary_pos_emb", apply_rotary_pos_emb)
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "sitecustomize.py").write_text(SITECUSTOMIZE)
    paths = (str(scratch), os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
