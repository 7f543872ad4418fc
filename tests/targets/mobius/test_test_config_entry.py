"""The generated entry of mobius' tests/_test_configs.py builds the model in mobius' own harness.

mobius' build and weight-alignment tests make each entry's config as ``_base_config`` does (its
tiny sizes, then the entry's overrides, into the entry's ``_config_cls``) and construct the
registered class from it. An entry that lacks a field the generated class reads fails them all,
though parity (which converts the HF config) passes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius import TARGET, _import_file
from onboard.targets.mobius import plan as mobius_plan
from tests.new_types import default_config_dir

# mobius' tiny test sizes (tests/_test_configs.py, TINY_* and _base_config's defaults)
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "rope_type": "default",
    "rope_theta": 10_000.0,
    "pad_token_id": 0,
}


def test_a_per_layer_moe_list_is_in_the_entry(tmp_path: Path) -> None:
    """Cohere 2 MoE says which layers are MoE in ``mlp_layer_types``, one word per layer."""
    folder = default_config_dir("cohere2_moe", tmp_path / "models")
    result = onboard_new(NewOptions(model=str(folder), out=tmp_path / "out", parity=False))
    module = _import_file(result.root / result.plan.model_file)
    design = TARGET.design(result.analysis.spec, result.proposal)
    entry = mobius_plan.test_config_entry(design, result.analysis.spec)
    assert '"mlp_layer_types": ["dense", "sparse"]' in entry
    model_type, overrides, _ = eval(entry, vars(module))  # the entry as the harness reads it
    config_class = overrides.pop("_config_cls")
    fields = {f.name for f in dataclasses.fields(config_class)}
    config = config_class(**{k: v for k, v in (TINY | overrides).items() if k in fields})
    getattr(module, result.plan.model_class)(config)  # raises IndexError without the list
    assert model_type == "cohere2_moe"
