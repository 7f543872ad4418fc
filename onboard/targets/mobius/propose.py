"""Rank mobius' known classes by how much generated code each would need for a spec."""

from __future__ import annotations

from collections import Counter

from onboard.block_specs import AttentionSpec
from onboard.spec import ArchitectureSpec, TextDecoderSpec
from onboard.targets.base import Candidate, Delta, Library, Proposal, Variant
from onboard.targets.mobius.clamped_glu import glu_blockers
from onboard.targets.mobius.design import NORM_CLASSES
from onboard.targets.mobius.mixers import MOBIUS_LABELS, mamba_width_blockers
from onboard.targets.mobius.profiles import PROFILES, missing_features, requirements
from onboard.targets.mobius.rope import rope_blockers
from onboard.targets.mobius.vision import vision_blockers

TEXT_TASKS = (None, "text-generation")
SUPPORTED_ROPE = frozenset({"default", "linear", "dynamic", "llama3", "longrope", "yarn"})


def propose(spec: ArchitectureSpec, library: Library, *, treat_as_new: bool) -> Proposal:
    own = library.variant(spec.model_type)
    hidden: tuple[str, ...] = ()
    if treat_as_new and own is not None:
        hidden = tuple(v.key for v in library.variants if v.class_name == own.class_name)
    visible = [v for v in library.variants if v.key not in hidden]
    needed = requirements(spec)
    usage = Counter(v.class_name for v in visible)
    by_class: dict[str, list[Variant]] = {}
    for variant in visible:
        if variant.class_name in PROFILES and variant.task in TEXT_TASKS:
            by_class.setdefault(variant.class_name, []).append(variant)
    candidates = []
    for class_name, variants in by_class.items():
        variant = _representative(variants)
        profile = PROFILES[class_name]
        missing = missing_features(profile, needed)
        deltas = tuple(
            Delta(feature, wanted, "/".join(sorted(profile.can[feature])))
            for feature, wanted in missing
        )
        bug_notes = tuple(
            f"known bug {b} avoided" for b in profile.bugs if _bug_touches(b, missing)
        )
        candidates.append(Candidate(variant, deltas, notes=bug_notes))
    candidates.sort(
        key=lambda c: (len(c.deltas), -usage[c.variant.class_name], c.variant.class_name)
    )
    return Proposal(
        model_type=spec.model_type,
        candidates=tuple(candidates),
        hidden=hidden,
        already_supported=None if treat_as_new else own,
        blockers=blockers(spec),
        by_role=tuple(
            (role, variant)
            for role, variant in _by_role(spec.model_type, visible)
            if role != "moe" or spec.text.moe is not None
        ),
    )


def _by_role(model_type: str, visible: list[Variant]) -> tuple[tuple[str, Variant], ...]:
    from onboard.analysis.ancestry import closest_per_role

    variants = {v.key: v for v in visible}
    try:
        roles = closest_per_role(model_type, frozenset(variants))
    except Exception:  # model types transformers does not know have no ancestry
        return ()
    return tuple((role, variants[key]) for role, key in roles.items())


def _representative(variants: list[Variant]) -> Variant:
    """The registry key to name a class by: llama when the class serves it (it is the root of
    most of transformers' causal-LM ancestry chains), else the first key."""
    return next((v for v in variants if v.key == "llama"), variants[0])


def _bug_touches(bug: str, missing: tuple[tuple[str, str], ...]) -> bool:
    features = {f for f, _ in missing}
    return {
        "T7": "layer_dispatch" in features or "sliding_window" in features,
        "T9": "sliding_window" in features,
        "M1": "attention_scale" in features,
        "M2": "embedding_scale" in features,
    }.get(bug, False)


def per_kind_blockers(attention: AttentionSpec | None) -> list[str]:
    """The generated attention of their own (per layer kind, values of their own width or
    scale) is a plain one: refused beside the attention variants it does not also compute."""
    if attention is None or not (attention.kinds or attention.v_head_dim or attention.value_scale):
        return []
    others = {
        "latent attention": attention.mla is not None,
        "sinks in every layer": attention.sinks is not None,
        "a dynamic mask": attention.dynamic_mask is not None,
        "differential attention": attention.differential is not None,
        "an output gate": attention.output_gate or attention.output_gate_proj is not None,
        "a norm of the heads' output": attention.sub_norm is not None,
        "q/k norms after RoPE": attention.qk_norm_after_rope,
        "a lightning indexer": attention.indexer is not None,
    }
    found = [name for name, present in others.items() if present]
    if not found:
        return []
    return [
        f"attention that differs by layer kind or in its values, with {', '.join(found)} "
        "(text.attention.kinds, v_head_dim, value_scale): the generated attention for those "
        "is a plain one"
    ]


def blockers(spec: ArchitectureSpec) -> tuple[str, ...]:
    """What the mobius generator cannot express for this spec, each with where it was seen."""
    text = spec.text
    found = [
        f"{d.what} at {d.where}" + (f" ({d.detail})" if d.detail else "") for d in spec.unresolved
    ]
    attention = text.attention
    if attention is not None and len({attention.q_bias, attention.k_bias, attention.v_bias}) > 1:
        found.append(
            "q/k/v projections differ in bias "
            f"(q={attention.q_bias}, k={attention.k_bias}, v={attention.v_bias}); "
            "mobius Attention has one attn_qkv_bias flag"
        )
    found += _mixer_blockers(text)
    found += mamba_width_blockers(spec)
    found += _output_gate_blockers(text)
    found += _inner_part_blockers(text)
    if attention is not None and attention.sinks and (attention.mla or attention.output_gate):
        found.append(
            "attention sinks with latent attention or an output gate (text.attention.sinks): "
            "the generated attention with sinks is a plain one"
        )
    found += per_kind_blockers(attention)
    if (
        attention is not None
        and attention.indexer
        and (attention.mla is None or attention.mla.q_lora_rank is None or attention.output_gate)
    ):
        found.append(
            "a lightning indexer outside low-rank latent attention (text.attention.indexer): "
            "the generated indexed attention is DeepSeek's MLA with q_lora_rank"
        )
    found += vision_blockers(spec)
    norm = requirements(spec)["norm"]
    if not norm.endswith("/weight-free") and norm not in NORM_CLASSES:
        found.append(f"norm kind {norm} (text.norm): mobius has no such norm component")
    found += _mlp_blockers(text)
    for kind, rope in text.rope:
        if rope.rope_type is not None and rope.rope_type not in SUPPORTED_ROPE:
            found.append(
                f"RoPE type {rope.rope_type!r} for {kind} layers (config.json:rope_parameters)"
            )
    found += rope_blockers(spec)
    found += glu_blockers(spec)
    return tuple(found)


def _mlp_blockers(text: TextDecoderSpec) -> list[str]:
    mlp = text.mlp
    if mlp is None:
        return []
    found = []
    if mlp.kind == "plain" and len(mlp.projections) != 2:
        found.append(f"non-gated MLP ({', '.join(mlp.projections)}) at model.layers.*.mlp")
    if mlp.learned_activation and (mlp.kind != "plain" or text.moe is not None):
        found.append(
            f"{mlp.activation} activation (learned) in a {mlp.kind} MLP "
            "(text.mlp.activation): the generated MLP learns it only without a gate"
        )
    return found


def _output_gate_blockers(text: TextDecoderSpec) -> list[str]:
    """A gated attention is mobius' Qwen35Attention, which norms q and k per head with (1 + w)
    and has no q/k/v bias apart from the output's."""
    attention = text.attention
    if attention is None or not attention.output_gate:
        return []
    found = []
    if attention.qk_norm != "per_head" or text.norm.weight_offset != 1.0:
        found.append(
            "attention output gate without per-head (1 + w) q/k norms "
            "(text.attention.output_gate): mobius' Qwen35Attention has them"
        )
    if attention.fused_qkv or attention.mla or attention.differential or attention.dynamic_mask:
        found.append(
            "attention output gate with another attention variant (text.attention): mobius' "
            "Qwen35Attention is a plain gated attention"
        )
    return found


def _inner_part_blockers(text: TextDecoderSpec) -> list[str]:
    """A norm before o_proj or a gate projection lives in the generated plain attention, a
    norm before down_proj in a generated gated MLP, a norm of the MoE block's output in a
    generated MoE layer without router-weighted shared experts."""
    attention, mlp = text.attention, text.mlp
    found = []
    if (
        attention is not None
        and (attention.sub_norm or attention.output_gate_proj)
        and (
            attention.mla
            or attention.output_gate
            or attention.differential
            or attention.dynamic_mask
            or attention.sinks
        )
    ):
        found.append(
            "a norm or gate before the attention's output projection with another attention "
            "variant (text.attention.sub_norm, output_gate_proj): the generated attention "
            "computes them in a plain attention"
        )
    if mlp is not None and mlp.sub_norm and mlp.kind != "gated":
        found.append(
            f"a norm before the down projection of a {mlp.kind} MLP (text.mlp.sub_norm): the "
            "generated MLP with it is a gated one"
        )
    moe = text.moe
    if moe is not None and moe.post_norm and moe.shared is not None and moe.shared.stacked:
        found.append(
            "a norm of the MoE block's output with shared experts the router weighs "
            "(text.moe.post_norm): the generated MoE layer with it adds one shared expert"
        )
    return found


def _mixer_blockers(text: TextDecoderSpec) -> list[str]:
    """The generated mixer layers are pre-norm layers with the attention layers' feed-forward
    block, added as they are."""
    mixers = text.mixers.in_use()
    if not mixers:
        return []
    unrendered = [
        f"{kind} layers (text.mixers.{kind}): the mobius generator has no component for this "
        "mixer yet"
        for kind in mixers
        if kind not in MOBIUS_LABELS
    ]
    unrendered += [
        f"{kind} layers with a {taps}-tap convolution (text.mixers.{kind}): the generated "
        "component carries the last taps - 1 inputs as state and needs at least one"
        for kind in mixers
        if (taps := text.mixers.of(kind).conv_kernel) < 2
    ]
    around = []
    if text.norm.placement != "pre":
        around.append(f"{text.norm.placement} norms")
    if text.scales or text.residual_gates or text.first_layer_without:
        around.append("residual or embedding scales, gates or a missing first-layer norm")
    return unrendered + [
        f"{'+'.join(mixers)} layers with {what} (text.mixers): the generated mixer layer is a "
        "pre-norm layer with the attention layers' feed-forward block"
        for what in around
    ]
