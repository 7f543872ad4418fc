"""Tiny configs of hybrids whose config class derives the layer kinds from keys other than a list.

Each must build, keep every real layer signature, put an attention layer first where the real
model has one, and pass the analysis's own check that the tiny layers are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from onboard.analysis import _refuse_derived_pattern, _tiny_keeps_layers
from onboard.analysis.layers import layer_signatures
from onboard.classify import Classification, Kind
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.tiny import ATTENTION_LABELS, TinyConfig, multiplier_defaults, shrink_config
from onboard.tiny_model import build_tiny_model
from tests.hub_cache import FIXTURES
from tests.new_types import default_config_dir

# Granite-4.0-H-style: an attention layer among Mamba2 layers (the default config has none)
_GRANITE_KINDS = ["linear_attention"] * 5 + ["full_attention"] + ["linear_attention"] * 4

# (test id, model_type or fixture path, overrides of transformers' default config)
CASES = [
    ("bamba", "bamba", {"attn_layer_indices": [9, 18, 27]}),  # Bamba-9B's; the default has none
    ("jamba", "jamba", {}),
    ("jamba-1.5-mini", "ai21labs/AI21-Jamba-1.5-Mini/config.json", {}),
    ("nemotron_h", "nemotron_h", {}),
    ("nemotron-nano-9b-v2", "nvidia/NVIDIA-Nemotron-Nano-9B-v2/config.partial.json", {}),
    ("falcon_h1", "falcon_h1", {}),
    ("granitemoehybrid", "granitemoehybrid", {"layer_types": _GRANITE_KINDS}),
    ("zamba2", "zamba2", {}),
    ("recurrent_gemma", "recurrent_gemma", {}),
    ("qwen3-next", "Qwen/Qwen3-Next-80B-A3B-Instruct/config.json", {}),
]


def _config(source: str, tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    if source.endswith(".json"):
        return {**json.loads((FIXTURES / source).read_text()), **overrides}
    if "layer_types" in overrides:
        overrides.setdefault("num_hidden_layers", len(overrides["layer_types"]))
    folder = default_config_dir(source, tmp_path, **overrides)
    return json.loads((folder / "config.json").read_text())


def _shrink(config: dict[str, Any]) -> tuple[TinyConfig, Any, list[str], list[str]]:
    """As the analysis shrinks it: the tiny config, its HF config, the real layer signatures
    and the real layer kinds."""
    hf_config = make_hf_config(config)
    real = layer_signatures(hf_config)
    kinds = getattr(hf_config, "layer_types", None) or hf_config.layers_block_type
    layer_types = getattr(hf_config, "layer_types", None)
    tiny = shrink_config(
        {**multiplier_defaults(hf_config), **config},
        [str(k) for k in layer_types] if layer_types else None,
        real,
    )
    return tiny, make_hf_config(tiny.config), real, [str(k) for k in kinds]


@pytest.mark.parametrize(("source", "overrides"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tiny_hybrid_keeps_every_layer_kind_attention_first(
    source: str, overrides: dict[str, Any], tmp_path: Path
) -> None:
    tiny, tiny_config, real, kinds = _shrink(_config(source, tmp_path, **overrides))
    build_tiny_model(tiny_config)
    assert _tiny_keeps_layers(tiny_config, tiny, real) == ()
    assert set(layer_signatures(tiny_config)) == set(real)
    if any(k in ATTENTION_LABELS for k in kinds):
        assert kinds[tiny.layer_indices[0]] in ATTENTION_LABELS


def test_bamba_attention_layers_move_to_their_new_indices(tmp_path: Path) -> None:
    tiny, _, _, _ = _shrink(_config("bamba", tmp_path, attn_layer_indices=[9, 18, 27]))
    assert tiny.layer_indices == (9, 0)
    assert tiny.config["attn_layer_indices"] == [0]
    assert "layer_types" not in tiny.config  # BambaConfig cannot take it


def test_jamba_gets_the_smallest_period_and_offset(tmp_path: Path) -> None:
    tiny, _, _, _ = _shrink(_config("ai21labs/AI21-Jamba-1.5-Mini/config.json", tmp_path))
    assert tiny.layer_indices == (4, 0, 1)  # attention; mamba + MLP; mamba + MoE
    period_offset = ("attn_layer_period", "attn_layer_offset")
    period_offset += ("expert_layer_period", "expert_layer_offset")
    assert [tiny.config[k] for k in period_offset] == [3, 0, 3, 2]


def test_jamba_refuses_kept_layers_no_period_can_mark(tmp_path: Path) -> None:
    """Attention at odd layers, MoE at 2, 5: kept as (1, 0, 2, 5), the MoE ones are the last two."""
    config = _config(
        "jamba", tmp_path, num_hidden_layers=6, attn_layer_period=2, attn_layer_offset=1,
        expert_layer_period=3, expert_layer_offset=2,
    )  # fmt: skip
    with pytest.raises(UnsupportedFeatureError, match=r"no expert_layer_period and"):
        _shrink(config)


def test_nemotron_h_pattern_is_rewritten(tmp_path: Path) -> None:
    source = "nvidia/NVIDIA-Nemotron-Nano-9B-v2/config.partial.json"
    tiny, tiny_config, _, _ = _shrink(_config(source, tmp_path))
    assert tiny.config["hybrid_override_pattern"] == "*M-"
    assert tiny_config.num_hidden_layers == 3


def test_lfm2_moe_keeps_its_dense_layers_first(tmp_path: Path) -> None:
    kinds = ["full_attention", "conv", "full_attention", "conv"]
    tiny, tiny_config, real, _ = _shrink(
        _config("lfm2_moe", tmp_path, layer_types=kinds, num_dense_layers=1)
    )
    assert tiny.config["num_dense_layers"] == 1
    assert _tiny_keeps_layers(tiny_config, tiny, real) == ()


def test_lfm2_moe_refuses_a_dense_layer_behind_the_attention_layer(tmp_path: Path) -> None:
    """LFM2-8B-A1B's shape: its first attention layer (2) is MoE, layers 0 and 1 are dense."""
    kinds = ["conv", "conv", "full_attention", "conv"]
    config = _config("lfm2_moe", tmp_path, layer_types=kinds, num_dense_layers=2)
    with pytest.raises(UnsupportedFeatureError, match="num_dense_layers can make only"):
        _shrink(config)


@pytest.mark.parametrize("model_type", ["bamba", "falcon_h1", "mamba", "mamba2"])
def test_patterns_the_tiny_config_restates_pass(model_type: str) -> None:
    """Bamba's attn_layer_indices and FalconH1's are rewritten for the kept layers; a pure
    Mamba model has one kind in every layer, which the layer count alone restates."""
    from transformers import CONFIG_MAPPING

    source = SimpleNamespace(model_type=model_type)
    hybrid = Classification(Kind.HYBRID, ("a test",))
    _refuse_derived_pattern(CONFIG_MAPPING[model_type](), source, hybrid)


class _DerivedKinds:
    """A config class that derives its layer kinds read-only from keys onboard cannot name."""

    @property
    def layer_types(self) -> list[str]:
        return ["mamba", "attention"]


def test_a_pattern_the_tiny_config_cannot_restate_is_refused() -> None:
    source = SimpleNamespace(model_type="future_hybrid")
    hybrid = Classification(Kind.HYBRID, ("a test",))
    with pytest.raises(UnsupportedFeatureError, match=r"_DerivedKinds\.layer_types is derived"):
        _refuse_derived_pattern(_DerivedKinds(), source, hybrid)


@pytest.mark.parametrize(
    ("source", "key", "real"),
    [
        ("LiquidAI/LFM2-1.2B/config.json", "conv_L_cache", 3),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct/config.json", "linear_conv_kernel_dim", 4),
    ],
)
def test_a_convolution_no_checkpoint_has_is_bounded_a_real_one_kept(
    source: str, key: str, real: int, tmp_path: Path
) -> None:
    """The fuzz's LFM2 with conv_L_cache=3000000 kept the probe busy for hours."""
    assert _shrink(_config(source, tmp_path))[0].config[key] == real
    bounded, tiny_config, _, _ = _shrink(_config(source, tmp_path, **{key: 3_000_000}))
    assert bounded.config[key] == 16
    build_tiny_model(tiny_config)


def test_an_aliased_expert_count_is_shrunk_under_both_names(tmp_path: Path) -> None:
    """MiniMax-M2 stores num_local_experts, which its config class also answers as num_experts:
    the unshrunk alias was written back over the shrunk key, leaving 256 tiny experts."""
    from onboard.tiny import TINY_EXPERTS

    config = _config("minimax_m2", tmp_path)
    aliases = dict(type(make_hf_config(config)).attribute_map)
    assert aliases["num_experts"] == "num_local_experts"
    tiny = shrink_config(config, None, aliases=aliases).config
    assert tiny["num_local_experts"] == tiny["num_experts"] == TINY_EXPERTS
    assert make_hf_config(tiny).num_local_experts == TINY_EXPERTS


def test_a_tiny_model_that_is_not_tiny_is_refused_before_it_is_built() -> None:
    """A size no shrink reaches (the 1,000-case fuzz run was killed at 23 GB) is named."""
    from transformers import Qwen3Config

    config = Qwen3Config(
        hidden_size=96, num_attention_heads=6, num_key_value_heads=2, head_dim=16,
        num_hidden_layers=2, vocab_size=256, intermediate_size=1_000_000,
    )  # fmt: skip
    with pytest.raises(UnsupportedFeatureError, match=r"would hold [\d,]+ values \(largest: .*mlp"):
        build_tiny_model(config)
    build_tiny_model(Qwen3Config(**{**config.to_dict(), "intermediate_size": 128}))
