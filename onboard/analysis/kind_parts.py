"""Attention parts that differ between layer kinds, which the spec cannot hold.

``AttentionSpec`` describes one attention for every layer: its sinks, head counts and widths.
MiMo-V2-Flash gives its sliding layers sinks and twice the key/value heads of its full layers,
and value heads narrower than its query/key heads. Each such difference is reported as a delta
with the HF line that makes it, so the refusal names the feature, not a parameter without a
role.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.source_lines import init_assignment
from onboard.source import SourceFile
from onboard.spec import Delta


@dataclass(frozen=True)
class KindParts:
    """The deltas, and the layer parameters they account for (``self_attn.sinks``), which the
    parameter check then does not report again as having no role."""

    deltas: tuple[Delta, ...]
    parameters: tuple[str, ...]


def kind_parts(
    model: Any,
    tiny: Any,
    head_dim: int,
    real_config: Any,
    files: Sequence[SourceFile],
    explained: Sequence[str] = (),
) -> KindParts:
    """The differences between the tiny model's attentions (heads of ``head_dim``) of the
    kinds its config's layer_types give, and the value width the real config gives where the
    tiny one hides it. ``explained``: bare parameters the spec reads in some layers only
    (GPT-NeoX Japanese's last-layer bias)."""
    from onboard.analysis.layout import hf_module

    kinds = getattr(tiny, "layer_types", None) or ()
    attentions = [hf_module(getattr(layer, "self_attn", None)) for layer in model.model.layers]
    if len(attentions) != len(kinds) or not attentions or any(a is None for a in attentions):
        return KindParts((), ())
    heads = tiny.num_attention_heads
    deltas, parameters = [], []
    cls = type(attentions[0]).__name__
    for name in (n for n in _partial_bare(attentions) if n not in explained):
        having = [(k, a) for k, a in zip(kinds, attentions, strict=True) if _bare(a, name)]
        kinds_having = sorted({k for k, _ in having})
        shape = tuple(getattr(having[0][1], name).shape)
        part = "attention sinks" if shape == (heads,) else f"attention parameter {name}"
        line = init_assignment(files, cls, name)
        where = line.evidence.where if line else f"model.layers.*.self_attn.{name}"
        detail = f"model.layers.*.self_attn.{name} {shape}, the other layers have none"
        detail += f": {line.evidence.detail}" if line else ""
        deltas.append(Delta(f"{part} only in {', '.join(kinds_having)} layers", where, detail))
        parameters.append(f"self_attn.{name}")
    kv_heads = _kv_heads_by_kind(attentions, kinds, head_dim)
    if len(set(kv_heads.values())) > 1:
        line = init_assignment(files, cls, "k_proj")
        where = line.evidence.where if line else "model.layers.*.self_attn.k_proj"
        counts = ", ".join(f"{k} {n}" for k, n in sorted(kv_heads.items()))
        deltas.append(Delta("key/value heads that differ by layer kind", where, counts))
    delta = _narrower_values(cls, real_config, files)
    if delta is not None:
        deltas.append(delta)
    return KindParts(tuple(deltas), tuple(parameters))


def _bare(attention: Any, name: str) -> bool:
    return getattr(attention, name, None) is not None


def _partial_bare(attentions: Sequence[Any]) -> list[str]:
    """Bare parameters (not in a child module) some attentions have and others lack."""
    names = [{n for n, _ in a.named_parameters(recurse=False)} for a in attentions]
    every, some = set.intersection(*names), set.union(*names)
    return sorted(some - every)


def _kv_heads_by_kind(attentions: Sequence[Any], kinds: Sequence[str], head_dim: int) -> dict:
    """Each kind's key heads, from its k_proj's width (none without a k_proj)."""
    found = {}
    for kind, attention in zip(kinds, attentions, strict=True):
        k_proj = getattr(attention, "k_proj", None)
        if k_proj is not None and hasattr(k_proj, "out_features"):
            found[kind] = k_proj.out_features // head_dim
    return found


def _narrower_values(cls: str, config: Any, files: Sequence[SourceFile]) -> Delta | None:
    """v_proj sized by ``config.v_head_dim`` where the real config makes it differ from
    head_dim (MiMo-V2-Flash: 128 against 192); the tiny config gives both one width, so
    only the source and the real config show it."""
    line = init_assignment(files, cls, "v_proj")
    if line is None or "v_head_dim" not in line.evidence.detail:
        return None
    value, key = getattr(config, "v_head_dim", None), getattr(config, "head_dim", None)
    if value is None or key is None or value == key:
        return None
    what = "value heads of another width than the query/key heads"
    return Delta(what, line.evidence.where, f"v_head_dim {value}, head_dim {key}")
