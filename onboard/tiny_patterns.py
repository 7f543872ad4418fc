"""Hybrid layer patterns in the keys their config classes read, for the kept tiny layers.

Most configs list each layer's kind (``layer_types``), and the tiny config keeps the kept layers'
entries. Some hybrids' config classes derive the kinds from other keys and cannot take a list
(Bamba: ``attn_layer_indices``; Jamba: periods and offsets; NemotronH:
``hybrid_override_pattern``): ``restate_pattern`` writes those keys for the kept layers, one
function a model type, or refuses in one line when no value of the key can say it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from onboard.errors import UnsupportedFeatureError


def block_types(config: Mapping[str, Any], num_layers: int) -> list[str] | None:
    """RecurrentGemma's layer kinds, which its config class has no layer_types for: block_types
    repeated over the layers."""
    blocks = config.get("block_types")
    if config.get("model_type") != "recurrent_gemma" or not isinstance(blocks, list) or not blocks:
        return None
    return [str(blocks[i % len(blocks)]) for i in range(num_layers)]


# Restates the kept layers in the keys a config class derives them from:
# (tiny config, real config, kept real indices, kept layer kinds or None).
_Restate = Callable[[dict[str, Any], Mapping[str, Any], tuple[int, ...], list[Any] | None], None]
# The layer lists a config class derives and cannot take (read-only properties).
_DERIVED_LISTS = ("layer_types", "layers_block_type")


def _bamba_layers(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """Bamba's attention layers are attn_layer_indices: the kept ones, at their new indices."""
    real = config.get("attn_layer_indices") or ()
    tiny["attn_layer_indices"] = [new for new, old in enumerate(indices) if old in real] or None
    _drop_derived_lists(tiny)


def _jamba_layers(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """Jamba's attention layers, and likewise its MoE layers, are every period-th layer from an
    offset: the smallest period and offset that mark the kept layers as the real ones are."""
    _drop_derived_lists(tiny)
    for prefix, kind in (("attn_layer", "attention"), ("expert_layer", "MoE")):
        period, offset = config.get(f"{prefix}_period"), config.get(f"{prefix}_offset")
        if _count(period) == 0 or not isinstance(offset, int):
            continue  # the class default, in the real and the tiny model alike
        marked = [old % period == offset for old in indices]
        pair = _period_offset(marked)
        if pair is None:
            raise UnsupportedFeatureError(
                f"jamba: the tiny model keeps real layers {list(indices)} (an attention layer "
                f"first), and no {prefix}_period and {prefix}_offset make exactly its layers "
                f"{[i for i, m in enumerate(marked) if m]} {kind} layers, as the real ones are"
            )
        tiny[f"{prefix}_period"], tiny[f"{prefix}_offset"] = pair


def _period_offset(marked: list[bool]) -> tuple[int, int] | None:
    """The smallest ``(period, offset)`` with ``i % period == offset`` exactly where marked.
    Periods past the layer count mark one layer or none, so trying up to it tries every
    pattern a pair can make."""
    for period in range(1, len(marked) + 2):
        for offset in range(period):
            if all((i % period == offset) == m for i, m in enumerate(marked)):
                return period, offset
    return None


# NemotronH's hybrid_override_pattern: one character per layer kind (configuration_nemotron_h.py)
_NEMOTRON_H_CHARS = {"linear_attention": "M", "full_attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_h_layers(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """NemotronH reads hybrid_override_pattern when no layer list is given, and derives the
    layer count from it: the kept kinds in the key the real config.json uses (a stored
    layers_block_type is subsampled like any per-layer list)."""
    if kinds is None or "hybrid_override_pattern" not in config:
        return
    tiny["hybrid_override_pattern"] = "".join(_NEMOTRON_H_CHARS[str(k)] for k in kinds)
    _drop_derived_lists(tiny)


def _falcon_h1_layers(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """FalconH1's layers are all hybrid (attention beside Mamba2): the layer count says it all."""
    _drop_derived_lists(tiny)


def _recurrent_gemma_layers(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """RecurrentGemma cycles block_types over its layers: the kept kinds, once."""
    if kinds is not None:
        tiny["block_types"] = list(kinds)
    _drop_derived_lists(tiny)


# Zamba's widths derived from hidden_size and the heads; Zamba2 derives them in __post_init__
# and a stored value overrides them. The tiny config leaves them to be derived again.
_ZAMBA_DERIVED_WIDTHS = (
    "attention_hidden_size",
    "attention_head_dim",
    "mamba_headdim",
    "kv_channels",
    "num_query_groups",
)


def _zamba_layers(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """Zamba2 lists its hybrid layers twice, in layers_block_type and in hybrid_layer_ids (which
    overrides what its config class derives from the first): both for the kept layers."""
    for key in _ZAMBA_DERIVED_WIDTHS:
        tiny.pop(key, None)
    if "hybrid_layer_ids" in tiny and kinds is not None:
        tiny["hybrid_layer_ids"] = [i for i, kind in enumerate(kinds) if kind == "hybrid"]


def _lfm2_moe_layers(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """LFM2-MoE's first num_dense_layers layers are dense, the rest MoE: the kept dense layers
    must still come first."""
    dense = [old < _count(config.get("num_dense_layers")) for old in indices]
    count = sum(dense)
    if dense != [True] * count + [False] * (len(dense) - count):
        raise UnsupportedFeatureError(
            f"lfm2_moe: the tiny model keeps real layers {list(indices)} (an attention layer "
            f"first), and num_dense_layers can make only its first layers dense, not its layers "
            f"{[i for i, d in enumerate(dense) if d]} (the real layers below "
            f"num_dense_layers = {config.get('num_dense_layers')})"
        )
    if "num_dense_layers" in tiny:
        tiny["num_dense_layers"] = count


def _one_kind_layers(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """A pure state-space model (Mamba, Mamba-2) has one kind in every layer, which its config
    class derives from the count: the count alone restates it."""
    _drop_derived_lists(tiny)


def _drop_derived_lists(tiny: dict[str, Any]) -> None:
    for key in _DERIVED_LISTS:
        tiny.pop(key, None)


# By model_type (transformers 5.18): the hybrids whose config class derives the layer kinds, or
# values that follow from them (hybrid_layer_ids, dense layers), from keys other than a per-layer
# list.
_RESTATED_KEYS: dict[str, _Restate] = {
    "bamba": _bamba_layers,
    "jamba": _jamba_layers,
    "nemotron_h": _nemotron_h_layers,
    "falcon_h1": _falcon_h1_layers,
    "recurrent_gemma": _recurrent_gemma_layers,
    "zamba": _zamba_layers,
    "zamba2": _zamba_layers,
    "lfm2_moe": _lfm2_moe_layers,
    "mamba": _one_kind_layers,
    "mamba2": _one_kind_layers,
    "falcon_mamba": _one_kind_layers,
}
# The model types whose derived (read-only) layer kinds shrink_config restates.
RESTATED_LAYER_PATTERNS = frozenset(_RESTATED_KEYS)


def restate_pattern(
    tiny: dict[str, Any], config: Mapping[str, Any], indices: tuple[int, ...], kinds: Any
) -> None:
    """Write the kept layers' kinds into the keys ``config``'s class reads (nothing for the
    model types that take a plain list)."""
    restate = _RESTATED_KEYS.get(str(config.get("model_type")))
    if restate is not None:
        restate(tiny, config, indices, kinds)


def _count(value: Any) -> int:
    """A positive int config value, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
