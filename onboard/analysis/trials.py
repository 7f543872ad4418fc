"""Readings of the attention that no config key announces, tried one at a time.

Nothing in a config says that GLM rotates interleaved pairs, that GPT-Neo leaves q.k unscaled or
that BLOOM adds ALiBi biases. Each trial names one such reading, when it can apply, and how the
spec reads under it. The analysis keeps a reading only when every attention module of the tiny
model then computes what HF computes (``spec_check.check_attention``), and cites that
observation and, where it finds one, the HF line that does it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from onboard.spec import TextDecoderSpec


@dataclass(frozen=True)
class Trial:
    path: str  # the spec field it decides, for the evidence
    observation: str  # what the tiny model showed when the reading was kept
    source: str  # a regex for the HF line that does it ("" when none is worth citing)
    readings: Callable[[TextDecoderSpec], tuple[TextDecoderSpec, ...]]  # () when it cannot apply
    # What the reading changes: a kept reading cites every trial whose field it changed
    field: Callable[[TextDecoderSpec], object]


def changed_by(before: TextDecoderSpec, after: TextDecoderSpec) -> tuple[Trial, ...]:
    """The trials whose field differs between two readings (one per field, first wins)."""
    found: dict[str, Trial] = {}
    for trial in TRIALS:
        if trial.field(before) != trial.field(after):
            found.setdefault(f"{trial.path}:{trial.observation}", trial)
    return tuple(found.values())


def _rotates(text: TextDecoderSpec) -> bool:
    return any(r.rope_type is not None for _, r in text.rope)


def _with_rope(text: TextDecoderSpec, **change: bool) -> TextDecoderSpec:
    """Every rotating kind changed alike (kinds without RoPE stay as they are)."""
    rope = tuple(
        (kind, dataclasses.replace(r, **change) if r.rope_type is not None else r)
        for kind, r in text.rope
    )
    return dataclasses.replace(text, rope=rope)


def _with_attention(text: TextDecoderSpec, **change: object) -> TextDecoderSpec:
    return dataclasses.replace(text, attention=dataclasses.replace(text.attention, **change))


def _per_head_qkv(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """Persimmon, GPT-NeoX: a fused projection's rows run (head, q/k/v, head_dim)."""
    attention = text.attention
    if not attention.fused_qkv or attention.num_kv_heads != attention.num_heads:
        return ()
    return (_with_attention(text, fused_qkv_layout="per_head"),)


def _grouped_qkv(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """CodeGen: the fused rows run in groups of heads, each q, v, k; its RoPE on pairs."""
    attention = text.attention
    if not attention.fused_qkv or attention.num_kv_heads != attention.num_heads:
        return ()
    groups = (g for g in (2, 4, 8) if attention.num_heads % g == 0)
    readings = []
    for count in groups:
        grouped = _with_attention(text, fused_qkv_layout="grouped", fused_qkv_groups=count)
        readings += [grouped, *_interleaved(grouped)]
    return tuple(readings)


def _kv_grouped_qkv(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """InternLM2: per key/value head, its query heads' rows, then its k, then its v."""
    attention = text.attention
    if not attention.fused_qkv or not 0 < attention.num_kv_heads < attention.num_heads:
        return ()
    return (_with_attention(text, fused_qkv_layout="kv_grouped"),)


def _interleaved(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """GLM, Helium, ERNIE rotate (x0, x1), (x2, x3) ... pairs."""
    rotating = [r for _, r in text.rope if r.rope_type is not None]
    if not rotating or any(r.interleaved for r in rotating):
        return ()
    return (_with_rope(text, interleaved=True),)


def _indexer_interleaved(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """GLM-MoE-DSA's lightning indexer rotates (x0, x1) pairs (DeepSeek V3.2's halves), as its
    latent attention does, which no config key says either: both readings are tried."""
    indexer = text.attention.indexer
    if indexer is None or indexer.rope_interleaved:
        return ()
    turned = _with_attention(text, indexer=dataclasses.replace(indexer, rope_interleaved=True))
    return (turned, *_interleaved(turned))


def _query_gate_raw_first(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """A latent query gate (AXK2) whose projection reads the raw q latent before the normed."""
    mla = text.attention.mla
    if mla is None or mla.query_gate is None or mla.query_gate.inputs != ("normed", "raw"):
        return ()
    gate = dataclasses.replace(mla.query_gate, inputs=("raw", "normed"))
    return (_with_attention(text, mla=dataclasses.replace(mla, query_gate=gate)),)


def _reversed(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """NanoChat's rotate_half flips the signs: q and k turn the other way."""
    return (_with_rope(text, reversed=True),) if _rotates(text) else ()


def _qk_norm_after_rope(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """HunYuan normalises q and k after RoPE; with learned weights the order matters."""
    if text.attention.qk_norm != "per_head" or not _rotates(text):
        return ()
    return (_with_attention(text, qk_norm_after_rope=True),)


def _unscaled(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """GPT-Neo never scales q.k."""
    attention = text.attention
    if attention.scale_key or attention.mla is not None:
        return ()
    return (_with_attention(text, unscaled=True, scale=1.0),)


def _alibi(text: TextDecoderSpec) -> tuple[TextDecoderSpec, ...]:
    """BLOOM, MPT: ALiBi and no RoPE, a fused projection read either way."""
    attention = text.attention
    if _rotates(text) or attention.mla is not None:
        return ()
    layouts = ["concatenated"] + (["per_head"] if attention.fused_qkv else [])
    return tuple(_with_attention(text, alibi=True, fused_qkv_layout=lay) for lay in layouts)


TRIALS = (
    Trial(
        "text.attention.fused_qkv",
        "matches HF only with its rows read as (head, q/k/v, head_dim)",
        "",
        _per_head_qkv,
        lambda t: t.attention.fused_qkv_layout == "per_head",
    ),
    Trial(
        "text.attention.fused_qkv",
        "matches HF only with its rows read in groups of heads, each q, v, k",
        r"query, value, key = ",
        _grouped_qkv,
        lambda t: t.attention.fused_qkv_groups if t.attention.fused_qkv_layout == "grouped" else 0,
    ),
    Trial(
        "text.attention.fused_qkv",
        "matches HF only with its rows read per key/value head: its query heads, k, v",
        r"\[\.\.\., *-2, *:\]",
        _kv_grouped_qkv,
        lambda t: t.attention.fused_qkv_layout == "kv_grouped",
    ),
    Trial(
        "text.rope.interleaved",
        "matches HF only with RoPE on interleaved pairs (no config key says so)",
        r"\[\.\.\., *(0)?::2\]|repeat_interleave",
        _interleaved,
        lambda t: any(r.interleaved for _, r in t.rope),
    ),
    Trial(
        "text.attention.indexer",
        "matches HF only with the indexer's RoPE on interleaved pairs",
        r"apply_rotary_pos_emb_interleave\(q_rot, k_rot, cos, sin, unsqueeze_dim=2\)",
        _indexer_interleaved,
        lambda t: t.attention.indexer is not None and t.attention.indexer.rope_interleaved,
    ),
    Trial(
        "text.attention.mla.query_gate",
        "matches HF only with the raw q latent before the normed one",
        r"torch\.cat\(\[q_compressed, q_resid\]",
        _query_gate_raw_first,
        lambda t: t.attention.mla and t.attention.mla.query_gate,
    ),
    Trial(
        "text.rope.reversed",
        "matches HF only with sin negated",
        r"torch\.cat\(\(x2, -x1\)",
        _reversed,
        lambda t: any(r.reversed for _, r in t.rope),
    ),
    Trial(
        "text.attention.qk_norm_after_rope",
        "matches HF only with q/k normed after RoPE",
        r"query_states = self\.\w+\(query_states\)",
        _qk_norm_after_rope,
        lambda t: t.attention.qk_norm_after_rope,
    ),
    Trial(
        "text.attention.scale",
        "matches HF only with q.k left unscaled",
        r"softmax_scale=1\.0|scale=1\.0",
        _unscaled,
        lambda t: t.attention.unscaled,
    ),
    Trial(
        "text.attention.alibi",
        "matches HF only with ALiBi slopes added by key position",
        r"def (build_)?\w*alibi\w*\(",
        _alibi,
        lambda t: t.attention.alibi,
    ),
)
