"""Attention parts that differ between layer kinds (``AttentionSpec.kinds``).

MiMo-V2-Flash gives its sliding layers sinks and twice the key/value heads of its full layers.
Each such difference becomes a ``KindAttention`` of the kind that has it, with the HF line that
makes it; a difference of another shape (a bare parameter that is not one logit per head, a
key/value head count that is no whole multiple of the config's) stays a delta that names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from onboard.analysis.source_lines import init_assignment
from onboard.block_specs import KindAttention
from onboard.source import SourceFile
from onboard.spec import Delta, Evidence


@dataclass(frozen=True)
class KindParts:
    """The per-kind attentions read, their evidence, the deltas left, and the layer parameters
    they account for (``self_attn.sinks``), which the parameter check then does not report again
    as having no role."""

    kinds: tuple[KindAttention, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    deltas: tuple[Delta, ...] = ()
    parameters: tuple[str, ...] = field(default=())


def kind_parts(
    model: Any,
    tiny: Any,
    head_dim: int,
    files: Sequence[SourceFile],
    explained: Sequence[str] = (),
) -> KindParts:
    """The differences between the tiny model's attentions (heads of ``head_dim``) of the
    kinds its config's layer_types give. ``explained``: bare parameters the spec reads in some
    layers only (GPT-NeoX Japanese's last-layer bias)."""
    from onboard.analysis.layout import hf_module

    kinds = getattr(tiny, "layer_types", None) or ()
    attentions = [hf_module(getattr(layer, "self_attn", None)) for layer in model.model.layers]
    if len(attentions) != len(kinds) or not attentions or any(a is None for a in attentions):
        return KindParts()
    heads = tiny.num_attention_heads
    cls = type(attentions[0]).__name__
    found: dict[str, KindAttention] = {}
    evidence, deltas, parameters = [], [], []
    for name in (n for n in _partial_bare(attentions) if n not in explained):
        having = [(k, a) for k, a in zip(kinds, attentions, strict=True) if _bare(a, name)]
        kinds_having = sorted({k for k, _ in having})
        shape = tuple(getattr(having[0][1], name).shape)
        line = init_assignment(files, cls, name)
        parameters.append(f"self_attn.{name}")
        if shape == (heads,) and _whole_kinds(kinds, attentions, name):
            for kind in kinds_having:
                found[kind] = replace(found.get(kind, KindAttention(kind)), sinks=name)
            detail = f"shape ({heads},), in {', '.join(kinds_having)} layers only"
            evidence.append(Evidence("probe", f"model.layers.*.self_attn.{name}", detail))
            evidence += [line.evidence] if line else []
            continue
        where = line.evidence.where if line else f"model.layers.*.self_attn.{name}"
        detail = f"model.layers.*.self_attn.{name} {shape}, the other layers have none"
        detail += f": {line.evidence.detail}" if line else ""
        deltas.append(Delta(f"attention parameter {name} only in some layers", where, detail))
    kv_heads = _kv_heads_by_kind(attentions, kinds, head_dim)
    base = getattr(tiny, "num_key_value_heads", None) or heads
    if len(set(kv_heads.values())) > 1:
        line = init_assignment(files, cls, "k_proj")
        where = line.evidence.where if line else "model.layers.*.self_attn.k_proj"
        counts = ", ".join(f"{k} {n}" for k, n in sorted(kv_heads.items()))
        if all(n % base == 0 for n in kv_heads.values()) and base in kv_heads.values():
            for kind, count in kv_heads.items():
                if count != base:
                    own = found.get(kind, KindAttention(kind))
                    found[kind] = replace(own, kv_heads_factor=count // base)
            evidence.append(Evidence("probe", "model.layers.*.self_attn.k_proj", counts))
            evidence += [line.evidence] if line else []
        else:
            deltas.append(Delta("key/value heads that differ by layer kind", where, counts))
    kinds_read = tuple(found[k] for k in sorted(found))
    return KindParts(kinds_read, tuple(evidence), tuple(deltas), tuple(parameters))


def _bare(attention: Any, name: str) -> bool:
    return getattr(attention, name, None) is not None


def _whole_kinds(kinds: Sequence[str], attentions: Sequence[Any], name: str) -> bool:
    """Every layer of a kind has the parameter or none does: the kind decides it."""
    having: dict[str, set[bool]] = {}
    for kind, attention in zip(kinds, attentions, strict=True):
        having.setdefault(kind, set()).add(_bare(attention, name))
    return all(len(v) == 1 for v in having.values())


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
