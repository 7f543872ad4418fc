"""The feature catalogue: a flat, comparable view of an ``ArchitectureSpec``.

``inspect`` lists these with their evidence, ``diff`` compares two models on them, and the
labelled table in the tests checks them against hand-read HF source. Each entry is one small
function of the spec, so adding a feature is adding one line to ``CATALOGUE``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from onboard.analysis.vision.features import VISION_CATALOGUE
from onboard.block_specs import AttentionSpec, MLPSpec
from onboard.spec import ArchitectureSpec, Evidence

Value = str | bool | int | float | None


@dataclass(frozen=True)
class Feature:
    name: str
    value: Value
    evidence: tuple[Evidence, ...]
    confidence: float  # 1.0 measured or read; lower when the value is a default nothing confirmed


def _of_attention(read: Callable[[AttentionSpec], Value]) -> Callable[[ArchitectureSpec], Value]:
    """An attention feature; None (absent) in a model without attention (a pure SSM)."""
    return lambda s: None if s.text.attention is None else read(s.text.attention)


def _of_mlp(read: Callable[[MLPSpec], Value]) -> Callable[[ArchitectureSpec], Value]:
    """An MLP feature; None (absent) in a model whose layers do not mix channels (Mamba)."""
    return lambda s: None if s.text.mlp is None else read(s.text.mlp)


def _output_gate_proj(attention: AttentionSpec) -> Value:
    """An output gate with a projection of its own: ``none``, else its squashing, ``+per_head``
    when it gives one value per head (Laguna), so a flag switching either is seen."""
    if attention.output_gate_proj is None:
        return "none"
    return attention.output_gate_activation + "+per_head" * attention.output_gate_per_head


def _per_kind(attention: AttentionSpec) -> Value:
    """What layer kinds change of the attention: ``none``, or per kind its key/value heads'
    factor and sinks (``sliding_attention:2x kv+sinks``)."""
    if not attention.kinds:
        return "none"
    parts = []
    for kind in attention.kinds:
        changes = [f"{kind.kv_heads_factor}x kv"] if kind.kv_heads_factor != 1 else []
        changes += ["sinks"] if kind.sinks else []
        parts.append(f"{kind.kind}:{'+'.join(changes)}")
    return ",".join(parts)


def _indexer(attention: AttentionSpec) -> Value:
    """DeepSeek Sparse Attention's lightning indexer: ``none``, or how it turns its RoPE part
    (``halves``: DeepSeek V3.2, ``pairs``: GLM-MoE-DSA), ``+shared`` when some layers reuse
    the last selection."""
    indexer = attention.indexer
    if indexer is None:
        return "none"
    turn = "pairs" if indexer.rope_interleaved else "halves"
    return turn + ("+shared" if indexer.layers_key else "")


def _attention_kind(s: ArchitectureSpec) -> Value:
    """``mla``, ``dynamic_mask`` (Doge), ``differential`` (DiffLlama), ``standard`` or
    ``none`` (a pure state-space model)."""
    attention = s.text.attention
    if attention is None:
        return "none"
    if attention.mla is not None:
        return "mla"
    if attention.dynamic_mask is not None:
        return "dynamic_mask"
    return "differential" if attention.differential is not None else "standard"


def _window(s: ArchitectureSpec) -> Value:
    kinds = s.text.distinct_layer_types
    if "sliding_attention" not in kinds or not s.text.sliding_window:
        return "none"
    return "uniform" if len(kinds) == 1 else "per_layer"


def _scale(attention: AttentionSpec) -> Value:
    if attention.scale_key:
        return attention.scale_key
    if attention.mla is not None:
        return "qk_head_dim_yarn" if attention.yarn_mscale else "qk_head_dim"
    return "head_dim"


def _norm(s: ArchitectureSpec) -> Value:
    return s.text.norm.kind + ("+1" if s.text.norm.weight_offset else "")


def _affine(s: ArchitectureSpec) -> Value:
    """What the norms learn: ``weight``, ``weight+bias`` (LayerNorm) or ``none`` (OLMo)."""
    norm = s.text.norm
    if not norm.weight:
        return "none"
    return "weight+bias" if norm.kind == "layer" and norm.bias else "weight"


def _rope_type(s: ArchitectureSpec) -> Value:
    types = {r.rope_type or "none" for _, r in s.text.rope}
    return "/".join(sorted(types)) or "none"  # no layer attends: nothing rotates


def _partial_rotary(s: ArchitectureSpec) -> Value:
    return any(r.partial_rotary_factor < 1.0 for _, r in s.text.rope)


def _per_layer_theta(s: ArchitectureSpec) -> Value:
    return len({r.theta for _, r in s.text.rope}) > 1


def _positions(s: ArchitectureSpec) -> Value:
    """How positions enter: ``rope``, a ``learned`` or ``sinusoidal`` table (``+offset``: OPT,
    XGLM), ``alibi`` biases (BLOOM, MPT), or ``none``."""
    table = s.text.positions
    if table is not None:
        return table.kind + ("+offset" if table.offset else "")
    if s.text.attention is not None and s.text.attention.alibi:
        return "alibi"
    return "rope" if any(r.rope_type for _, r in s.text.rope) else "none"


def _router(s: ArchitectureSpec) -> Value:
    moe = s.text.moe
    if moe is None:
        return "none"
    r = moe.router
    if r.order == "sparsemixer":
        return "sparsemixer"
    if r.order == "topk_softmax":
        return "topk_then_softmax"
    name = f"{r.scoring}_then_topk"
    if r.correction_bias:
        name += "+bias"
    if r.n_group > 1:
        name += "+groups"
    if r.shared_logits:
        name += "+shared"
    return name


def _shared(s: ArchitectureSpec) -> Value:
    moe = s.text.moe
    if moe is None or moe.shared is None:
        return "none"
    if moe.shared.stacked:
        return "router_weighted"
    return "gated" if moe.shared.gated else "ungated"


def _clamped_glu(s: ArchitectureSpec) -> Value:
    """The experts' clamped GLU (GPT-OSS, MiniMax-M3): how gate and up share the fused
    projection and the offset on up, or ``none``."""
    glu = s.text.moe.block_glu if s.text.moe else None
    return f"{glu.layout}, up + {glu.up_offset:g}" if glu else "none"


def _norm_gate(s: ArchitectureSpec) -> Value:
    """Gated norms (AXK2): ``none``, else each gated role with the layer kinds it is gated in
    (``attn_in:dense/moe,mlp_in:moe``), ``; gate of x`` when the gate reads the norm's input."""
    gate = s.text.norm.gate
    if gate is None:
        return "none"
    roles = ",".join(f"{role}:{'/'.join(kinds)}" for role, kinds in gate.roles)
    return roles + ("; gate of x" if gate.reads == "input" else "")


def _query_gate(attention: AttentionSpec) -> Value:
    """Latent attention's queries and output gate from one projection of both q latents
    (AXK2): ``none``, else the latents in the order it reads them (``normed+raw``)."""
    gate = attention.mla.query_gate if attention.mla else None
    return "+".join(gate.inputs) if gate else "none"


def _mixers(s: ArchitectureSpec) -> Value:
    """The recurrent token mixers beside attention (``short_conv``), or ``none``."""
    return "+".join(s.text.mixers.in_use()) or "none"


def _recurrence(s: ArchitectureSpec) -> Value:
    """Stacks run in cycles (HRM): ``L_module x L_cycles + H_module, x H_cycles``, or ``none``."""
    r = s.text.recurrence
    if r is None:
        return "none"
    low, high = r.stacks
    return f"{low} x {r.inner_key} + {high}, x {r.outer_key}"


def _scales(s: ArchitectureSpec) -> Value:
    """``site=factor`` per config multiplier, e.g. ``logits=1.0 / config.logits_scaling``."""
    found = sorted(f"{scale.site}={scale.expression()}" for scale in s.text.scales)
    return "; ".join(found) or "none"


CATALOGUE: tuple[tuple[str, str, Callable[[ArchitectureSpec], Value]], ...] = (
    # name, evidence path in the spec, value
    ("attention.kind", "text.attention.kind", _attention_kind),
    ("attention.qk_norm", "text.attention.qk_norm", _of_attention(lambda a: a.qk_norm)),
    (
        "attention.qk_norm_each_head",
        "text.attention.qk_norm_each_head",
        _of_attention(lambda a: a.qk_norm_each_head),
    ),
    (
        "attention.fused_qkv",
        "text.attention.fused_qkv",
        _of_attention(lambda a: a.fused_qkv_layout if a.fused_qkv else "none"),
    ),
    (
        "attention.qk_norm_after_rope",
        "text.attention.qk_norm_after_rope",
        _of_attention(lambda a: a.qk_norm_after_rope),
    ),
    ("attention.qkv_bias", "text.attention.q_bias", _of_attention(lambda a: a.q_bias)),
    ("attention.o_bias", "text.attention.o_bias", _of_attention(lambda a: a.o_bias)),
    ("attention.scale", "text.attention.scale", _of_attention(_scale)),
    (
        "attention.softcap",
        "text.attention.softcap",
        _of_attention(lambda a: a.softcap is not None),
    ),
    (
        "attention.position_scale",
        "text.attention.position_scale",
        _of_attention(lambda a: a.position_scale),
    ),
    ("attention.sinks", "text.attention.sinks", _of_attention(lambda a: a.sinks is not None)),
    ("attention.indexer", "text.attention.indexer", _of_attention(_indexer)),
    (
        "attention.latent_query_gate",
        "text.attention.mla.query_gate",
        _of_attention(_query_gate),
    ),
    ("attention.per_kind", "text.attention.kinds", _of_attention(_per_kind)),
    (
        "attention.v_head_dim",
        "text.attention.v_head_dim",
        _of_attention(lambda a: a.v_head_dim_key or "head_dim"),
    ),
    (
        "attention.value_scale",
        "text.attention.value_scale",
        _of_attention(lambda a: a.value_scale_key or "none"),
    ),
    (
        "attention.output_gate_proj",
        "text.attention.output_gate_proj",
        _of_attention(_output_gate_proj),
    ),
    (
        "attention.sub_norm",
        "text.attention.sub_norm",
        _of_attention(lambda a: a.sub_norm is not None),
    ),
    ("attention.sliding_window", "text.sliding_window", _window),
    ("layers.mixers", "text.mixers", _mixers),
    ("layers.recurrence", "text.recurrence", _recurrence),
    ("mlp.kind", "text.mlp.kind", lambda s: s.text.mlp.kind if s.text.mlp else "none"),
    ("mlp.activation", "text.mlp.activation", _of_mlp(lambda m: m.activation)),
    ("mlp.bias", "text.mlp.bias", _of_mlp(lambda m: m.bias)),
    ("mlp.sub_norm", "text.mlp.sub_norm", _of_mlp(lambda m: m.sub_norm is not None)),
    ("norm.kind", "text.norm.weight_offset", _norm),
    ("norm.affine", "text.norm.kind", _affine),
    ("norm.placement", "text.norm.placement", lambda s: s.text.norm.placement),
    ("norm.gated", "text.norm.gate", _norm_gate),
    ("residual.gates", "text.residual_gates", lambda s: bool(s.text.residual_gates)),
    ("norm.final", "text.final_norm", lambda s: s.text.final_norm),
    (
        "norm.first_layer_without",
        "text.first_layer_without",
        lambda s: "+".join(s.text.first_layer_without) or "none",
    ),
    ("head.transform", "text.head_transform", lambda s: s.text.head_transform is not None),
    ("embedding.scale", "text.embedding_scale", lambda s: s.text.embedding_scale),
    ("embedding.norm", "text.embedding_norm", lambda s: s.text.embedding_norm),
    (
        "logits.final_softcap",
        "text.final_logit_softcap",
        lambda s: s.text.final_logit_softcap is not None,
    ),
    ("scales", "text.scales", _scales),
    ("positions", "text.positions", _positions),
    ("rope.type", "text.rope", _rope_type),
    ("rope.partial", "text.rope", _partial_rotary),
    ("rope.per_layer_theta", "text.rope", _per_layer_theta),
    ("rope.interleaved", "text.rope", lambda s: any(r.interleaved for _, r in s.text.rope)),
    ("rope.reversed", "text.rope", lambda s: any(r.reversed for _, r in s.text.rope)),
    ("rope.reordered", "text.rope", lambda s: any(r.order is not None for _, r in s.text.rope)),
    ("rope.layers", "text.rope_layers_key", lambda s: s.text.rope_layers_key or "all"),
    ("embeddings.tied", "text.tie_word_embeddings", lambda s: s.text.tie_word_embeddings),
    ("logits.bias", "text.lm_head_bias", lambda s: s.text.lm_head_bias),
    ("moe.router", "text.moe.router", _router),
    (
        "moe.renormalize",
        "text.moe.router",
        lambda s: bool(s.text.moe and s.text.moe.router.renormalize),
    ),
    (
        "moe.routed_scaling",
        "text.moe.router",
        lambda s: bool(s.text.moe and s.text.moe.router.routed_scaling_factor != 1.0),
    ),
    ("moe.shared_experts", "text.moe.shared", _shared),
    ("moe.clamped_glu", "text.moe.glu", _clamped_glu),
    (
        "moe.post_norm",
        "text.moe.post_norm",
        lambda s: bool(s.text.moe and s.text.moe.post_norm),
    ),
    (
        "moe.dense_layers",
        "text.mlp_kinds",
        lambda s: s.text.moe.dense_rule if s.text.moe else "all",
    ),
)


def features(spec: ArchitectureSpec) -> tuple[Feature, ...]:
    found = []
    read_only = 0.8 if spec.source.remote_files else 1.0  # remote code is read, never run
    catalogue = CATALOGUE + (VISION_CATALOGUE if spec.vision is not None else ())
    for name, path, read in catalogue:
        evidence = _evidence(spec, path)
        found.append(Feature(name, read(spec), evidence, read_only if evidence else 0.5))
    return tuple(found)


def feature_values(spec: ArchitectureSpec) -> dict[str, Value]:
    return {f.name: f.value for f in features(spec)}


# Where to look when a feature is absent and so has no evidence of its own: what the analysis
# read to find it absent.
_ABSENT_EVIDENCE = {
    "text.attention.kind": (
        "text.attention.mla",
        "text.attention.dynamic_mask",
        "text.attention.differential",
        "text.attention.head_dim",  # what was read of a standard attention
    ),
    "text.residual_gates": ("text.norm.placement",),
    "text.norm.gate": ("text.norm.placement",),
    "text.attention.mla.query_gate": ("text.attention.mla", "text.attention.head_dim"),
    "text.positions": ("text.attention.alibi", "text.rope"),
    "text.attention.position_scale": ("text.rope",),
    "text.attention.sinks": ("text.attention.head_dim",),  # what was read of the attention
    "text.attention.indexer": ("text.attention.head_dim", "text.attention.mla"),  # likewise
    "text.attention.kinds": ("text.attention.head_dim",),  # likewise
    "text.attention.v_head_dim": ("text.attention.head_dim",),  # likewise
    "text.attention.value_scale": ("text.attention.head_dim",),  # likewise
    "text.attention.output_gate_proj": ("text.attention.head_dim",),  # likewise
    "text.attention.sub_norm": ("text.attention.head_dim",),  # likewise
    "text.mlp.sub_norm": ("text.mlp.kind",),  # what was read of the MLP
    "text.moe.post_norm": ("text.moe.experts",),  # what was read of the MoE block
    "text.moe.glu": ("text.moe.experts",),  # likewise
    "text.attention.qk_norm_after_rope": ("text.attention.qk_norm",),
    "text.attention.qk_norm_each_head": ("text.attention.qk_norm",),
    "text.embedding_norm": ("text.norm.kind",),
    "text.final_norm": ("text.norm.kind",),
    "text.first_layer_without": ("text.norm.placement",),
    "text.head_transform": ("text.tie_word_embeddings",),  # what was read of the head
    # what was read of the layers: their kinds, else the attention every layer holds
    "text.mixers": ("text.layer_types", "text.attention.kind"),
    "text.recurrence": ("text.mixers",),  # likewise: one stack of the layers read
}


def _evidence(spec: ArchitectureSpec, path: str) -> tuple[Evidence, ...]:
    if path in ("text.rope", "text.scales", "text.mixers"):
        found = tuple(e for key, items in spec.evidence if key.startswith(path) for e in items)
    else:
        found = spec.evidence_for(path)
    for fallback in _ABSENT_EVIDENCE.get(path, ()):
        found = found or _evidence(spec, fallback)
    return found
