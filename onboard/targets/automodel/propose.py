"""Rank AutoModel's classes by how much generated code each would need, and say what the
generator cannot express.

Generated AutoModel code does not inherit from another AutoModel model: it subclasses the HF
modules of the architecture itself (as 0.7.0's ``qwen3`` does). The closest registered class is
still worth naming: its conventions are the ones the generated module follows, and the features
it lacks are what a reviewer should read first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onboard.analysis.features import Value, feature_values
from onboard.block_specs import KindAttention
from onboard.spec import ArchitectureSpec
from onboard.targets.automodel.design import distinct_ropes, layout_blocker
from onboard.targets.automodel.hf_facts import cite
from onboard.targets.automodel.kept_base import keeps_base, kept_base_blockers
from onboard.targets.automodel.moe_design import router_location
from onboard.targets.automodel.recurrence import recurrence_blockers
from onboard.targets.automodel.vision import text_view, vision_blockers
from onboard.targets.base import Candidate, Delta, Library, Proposal, Variant

# Model kinds the generator writes. A hybrid keeps HF's own recurrent mixer modules (their torch
# paths run where fla, causal_conv1d or mamba_ssm are missing); a pure state-space model has no
# attention or MLP for the generated code to own, so AutoModel's HF fallback already covers it.
# A VLM keeps HF's tower and projector around a generated text backbone (see vision.py).
GENERATED_KINDS = frozenset({"dense", "moe", "hybrid", "hybrid_moe", "vlm"})

# RoPE types whose tables NeMo's LlamaRotaryEmbedding computes once, as HF does. ``dynamic`` and
# ``longrope`` recompute with the sequence length in HF and would be silently wrong here.
SUPPORTED_ROPE = frozenset({"default", "linear", "llama3", "yarn"})


@dataclass(frozen=True)
class ClassProfile:
    """What one AutoModel 0.7.0 class computes, in the shared feature catalogue's terms."""

    arch: str
    can: dict[str, frozenset[Value]]


def _can(overrides: dict[str, set[Value]]) -> dict[str, frozenset[Value]]:
    """A profile's capabilities: the catalogue features a candidate is compared on."""
    base: dict[str, set[Value]] = {
        "attention.kind": {"standard"},
        "attention.qk_norm": {"none"},
        "attention.qk_norm_after_rope": {False},
        "attention.qkv_bias": {False},
        "attention.o_bias": {False},
        "attention.scale": {"head_dim"},
        "attention.softcap": {False},
        "attention.sliding_window": {"none"},
        "mlp.kind": {"gated"},
        "mlp.bias": {False},
        "norm.kind": {"rms"},
        "norm.placement": {"pre"},
        "embedding.scale": {"none"},
        "logits.final_softcap": {False},
        "rope.per_layer_theta": {False},
        "moe.router": {"none"},
        "moe.shared_experts": {"none"},
        "layers.mixers": {"none"},
        "rope.partial": {False},
        "attention.output_gate_proj": {"none"},
        "attention.sub_norm": {False},
        "mlp.sub_norm": {False},
    }
    return {k: frozenset(v) for k, v in {**base, **overrides}.items()}


_ANY_BIAS = {False, True}  # read from config.attention_bias / config.mlp_bias
_ANY_WINDOW = {"none", "uniform", "per_layer"}

# components/models/{qwen3,qwen2,llama,mistral3,qwen3_moe}/model.py in nemo-automodel 0.7.0.
PROFILES = {
    p.arch: p
    for p in (
        ClassProfile(
            "Qwen3ForCausalLM",
            _can(
                {
                    "attention.qk_norm": {"per_head"},
                    "attention.qkv_bias": _ANY_BIAS,
                    "attention.o_bias": _ANY_BIAS,
                    "attention.sliding_window": _ANY_WINDOW,
                }
            ),
        ),
        ClassProfile(
            "Qwen2ForCausalLM",
            _can(
                {
                    "attention.qkv_bias": {True},
                    "attention.sliding_window": _ANY_WINDOW,
                    "mlp.bias": _ANY_BIAS,
                }
            ),
        ),
        ClassProfile(
            "LlamaForCausalLM",
            _can(
                {
                    "attention.qkv_bias": _ANY_BIAS,
                    "attention.o_bias": _ANY_BIAS,
                    "mlp.bias": _ANY_BIAS,
                }
            ),
        ),
        ClassProfile(
            "Ministral3ForCausalLM", _can({"attention.sliding_window": {"none", "uniform"}})
        ),
        ClassProfile(
            "Qwen3MoeForCausalLM",
            _can(
                {
                    "attention.qk_norm": {"per_head"},
                    "attention.qkv_bias": _ANY_BIAS,
                    "attention.o_bias": _ANY_BIAS,
                    "moe.router": {"softmax_then_topk"},
                }
            ),
        ),
    )
}


def propose(spec: ArchitectureSpec, library: Library, *, treat_as_new: bool) -> Proposal:
    arch = spec.source.architecture
    own = library.variant(arch)
    hidden: tuple[str, ...] = ()
    if treat_as_new and own is not None:
        hidden = tuple(v.key for v in library.variants if v.class_name == own.class_name)
    visible = [v for v in library.variants if v.key not in hidden and v.key in PROFILES]
    wanted = feature_values(spec)
    candidates = sorted(
        (_candidate(v, wanted) for v in visible),
        key=lambda c: (len(c.deltas), c.variant.key),
    )
    return Proposal(
        model_type=spec.model_type,
        candidates=tuple(candidates),
        hidden=hidden,
        already_supported=None if treat_as_new else own,
        blockers=blockers(spec),
    )


def _candidate(variant: Variant, wanted: dict[str, Value]) -> Candidate:
    can = PROFILES[variant.key].can
    deltas = tuple(
        Delta(feature, str(wanted[feature]), "/".join(sorted(map(str, can[feature]))))
        for feature in can
        if wanted[feature] not in can[feature]
    )
    return Candidate(variant, deltas)


# Computations the generator does not write yet, each refused by name with where it was seen:
# (spec path, applies to the text spec, what, why not, citation when the spec has none).
_NOT_GENERATED: tuple[tuple[str, Callable[[Any], bool], Callable[[Any], str], str, str], ...] = (
    (
        "text.rope.reversed",
        lambda t: any(r.reversed for _, r in t.rope),
        lambda t: "RoPE turning the other way",
        ": the generated attention rotates as Llama does",
        "probe",
    ),
    (
        "text.attention.qk_norm_after_rope",
        lambda t: t.attention.qk_norm_after_rope and t.attention.qk_norm != "per_head",
        lambda t: f"{t.attention.qk_norm} q/k norms after RoPE",
        ": the generated attention norms each head after RoPE, nothing wider",
        "probe",
    ),
    (
        "text.attention.qk_norm_each_head",
        lambda t: t.attention.qk_norm_each_head,
        lambda t: "q/k norms with a weight per head",
        ": the generated attention's q/k norms share one weight across the heads",
        "probe",
    ),
    (
        "text.attention.position_scale",
        lambda t: t.attention.position_scale,
        lambda t: "a position-dependent query scale",
        ": the generated attention does not scale q by position",
        "rope_parameters",
    ),
    (
        "text.attention.alibi",
        lambda t: t.attention.alibi,
        lambda t: "ALiBi attention biases",
        "",
        "probe",
    ),
    (
        "text.head_transform",
        lambda t: t.head_transform is not None,
        lambda t: "a dense layer, activation and norm before the head",
        ": the generated model has none",
        "probe",
    ),
    (
        "text.first_layer_without",
        lambda t: bool(t.first_layer_without),
        lambda t: f"layer 0 without the {', '.join(t.first_layer_without)} norm",
        ": the generated layers all have it",
        "probe",
    ),
    (
        "text.final_norm",
        lambda t: not t.final_norm,
        lambda t: "no final norm",
        ": the generated model normalises the last layer's output",
        "probe",
    ),
    (
        "text.attention.last_layer_o_bias",
        lambda t: t.attention.last_layer_o_bias is not None,
        lambda t: "an attention output bias in the last layer only",
        ": the state-dict adapter does not move it yet",
        "probe",
    ),
    (
        "text.mlp.activation",
        lambda t: t.mlp.learned_activation is not None,
        lambda t: f"{t.mlp.activation} activation with learned parameters",
        ": the generated MLP's activation learns nothing",
        "probe",
    ),
    (
        "text.attention.dynamic_mask",
        lambda t: t.attention.dynamic_mask is not None,
        lambda t: "a dynamic attention mask computed from the values",
        ": the generated attention masks causally only",
        "probe",
    ),
    (
        "text.attention.differential",
        lambda t: t.attention.differential is not None,
        lambda t: "differential attention",
        ": the generated attention has one softmax map per head",
        "probe",
    ),
    (
        "text.attention.sinks",
        lambda t: t.attention.sinks is not None,
        lambda t: "attention sinks (a learned logit per head in the softmax)",
        ": the generated attention runs AutoModel's attention backends, which take no sinks",
        "probe",
    ),
    (
        "text.attention.kinds",
        lambda t: bool(t.attention.kinds),
        lambda t: (
            "attention that differs by layer kind ("
            + "; ".join(_kind_attention(k) for k in t.attention.kinds)
            + ")"
        ),
        ": the generated attention is one for every layer",
        "probe",
    ),
    (
        "text.attention.v_head_dim",
        lambda t: t.attention.v_head_dim is not None,
        lambda t: (
            f"value heads of another width than the query/key heads "
            f"(config.{t.attention.v_head_dim_key})"
        ),
        ": the generated attention's values are as wide as its keys",
        "probe",
    ),
    (
        "text.attention.value_scale",
        lambda t: t.attention.value_scale is not None,
        lambda t: f"the values scaled by config.{t.attention.value_scale_key} after v_proj",
        ": the generated attention uses the values as v_proj gives them",
        "probe",
    ),
    (
        "text.attention.indexer",
        lambda t: t.attention.indexer is not None,
        lambda t: "DeepSeek Sparse Attention's lightning indexer (top-k keys per query)",
        ": the generated attention attends to every key AutoModel's backends are given",
        "probe",
    ),
    (
        "text.attention.output_gate_proj",
        lambda t: t.attention.output_gate_proj is not None,
        lambda t: (
            f"the heads' output scaled by {t.attention.output_gate_activation} of a gate "
            f"projection ({t.attention.output_gate_proj}"
            f"{', one value per head' if t.attention.output_gate_per_head else ''}) before o_proj"
        ),
        ": the generated attention has no gate projection",
        "probe",
    ),
    (
        "text.attention.mla.query_gate",
        lambda t: t.attention.mla is not None and t.attention.mla.query_gate is not None,
        lambda t: (
            f"latent attention whose queries and output gate come from one projection of both "
            f"q latents ({t.attention.mla.query_gate.proj})"
        ),
        ": the generated latent attention projects queries with q_b_proj and has no gate",
        "probe",
    ),
    (
        "text.norm.gate",
        lambda t: t.norm.gate is not None,
        lambda t: (
            "gated norms (y * sigmoid(up(act(down(y)))), "
            + ", ".join(f"{role} in {'/'.join(kinds)} layers" for role, kinds in t.norm.gate.roles)
            + ")"
        ),
        ": the generated layers' norms are plain",
        "probe",
    ),
    (
        "text.moe.post_norm",
        lambda t: getattr(t, "moe", None) is not None and t.moe.post_norm is not None,
        lambda t: f"a norm of the MoE block's output ({t.moe.post_norm})",
        ": AutoModel's MoE returns the routed plus shared experts as they are",
        "probe",
    ),
    (
        "text.residual_gates",
        lambda t: bool(t.residual_gates),
        lambda t: "learned per-channel scales of the residual",
        ": the generated layers add the residual as it is",
        "probe",
    ),
)


def _kind_attention(kind: KindAttention) -> str:
    parts = [f"{kind.kv_heads_factor}x the key/value heads"] if kind.kv_heads_factor != 1 else []
    parts += ["attention sinks"] if kind.sinks else []
    return f"{kind.kind} layers: {', '.join(parts)}"


def blockers(spec: ArchitectureSpec) -> tuple[str, ...]:
    """What the AutoModel generator cannot express for ``spec``, each with where it was seen.

    A VLM's text backbone is held to the rules of a causal LM of its own type."""
    if spec.vision is not None:
        text_spec = text_view(spec, spec.source.architecture)
        return (*vision_blockers(spec), *blockers(text_spec))
    if keeps_base(spec):  # HF's base model kept whole: only the causal LM around it is written
        return kept_base_blockers(spec)
    text = spec.text
    found = [
        f"{d.what} at {d.where}" + (f" ({d.detail})" if d.detail else "") for d in spec.unresolved
    ]
    if spec.source.remote_files:
        modeling = next((n for n, _ in spec.source.remote_files if n.startswith("modeling_")), "")
        found.append(
            f"{spec.model_type} exists only as Hub remote code ({modeling or 'auto_map'}): "
            "generated AutoModel code subclasses the architecture's modules from "
            f"transformers.models.{spec.model_type}, which transformers "
            f"{spec.source.transformers_version} does not have"
        )
    if spec.kind not in GENERATED_KINDS:
        found.append(
            f"{spec.kind} model ({spec.source.architecture}): the AutoModel generator writes "
            "dense, MoE and hybrid decoders and LLaVA-shaped VLMs only"
        )
    if text.attention is None or text.mlp is None:  # a pure state-space model: nothing to add
        return tuple(found)
    found += recurrence_blockers(text)
    if (tree := layout_blocker(spec)) is not None:
        found.append(tree)
    for split in spec.weights.splits:
        found.append(
            f"checkpoint tensor {split.fused} cut into {', '.join(split.parts)} on load "
            f"({split.where}): the generated state-dict adapter does not cut tensors yet"
        )
    if text.blocks is not None and text.moe is not None:
        found.append(
            f"one-block layers ({text.blocks.block} after {text.blocks.norm}) holding experts: "
            "the generated one-block layers keep HF's MLPs, AutoModel's MoE is generated for "
            "Llama-style layers only"
        )
    if getattr(text, "moe", None) is not None:
        found += moe_blockers(spec)
    elif spec.kind == "moe":
        found.append(f"MoE model ({spec.source.architecture}) without an MoE block in its spec")
    if getattr(text, "rope_layers_key", None):
        found.append(
            f"RoPE applied only in the layers config.{text.rope_layers_key} marks "
            "(config.json): the generated attention rotates in every layer"
        )
    attention = text.attention
    fused_ok = attention.fused_qkv_layout == "concatenated" and attention.qk_norm == "none"
    fused_ok |= attention.fused_qkv_layout == "per_head" and attention.qk_norm != "full_width"
    fused_ok |= attention.fused_qkv_layout == "kv_grouped" and attention.qk_norm == "none"
    if attention.fused_qkv and (not fused_ok or attention.output_gate):
        found.append(
            f"one fused {attention.fused_qkv} for q, k and v ({attention.fused_qkv_layout}, "
            f"q/k norm {attention.qk_norm}) (model.layers.*.self_attn.{attention.fused_qkv}): "
            "the generated attention splits concatenated rows without q/k norms, or head-by-head "
            "rows with per-head norms"
        )
    if getattr(text.attention, "multi_query", False):
        found.append(
            "multi-query attention set by config.multi_query (config.json): the generated "
            "attention reads num_key_value_heads"
        )
    for path, applies, what, why, fallback in _NOT_GENERATED:
        if applies(text):
            found.append(f"{what(text)} ({cite(spec, path) or fallback}){why}")
    if (reordered_rope := text.reordered_rope()) is not None:
        reordered, _ = reordered_rope
        found.append(
            f"RoPE frequencies reordered in {reordered} layers "
            f"({cite(spec, f'text.rope.{reordered}') or 'probe'}): the generated RoPE tables "
            "keep the standard order"
        )
    if getattr(text, "embedding_norm", False):
        found.append("a norm of the embeddings (model.embed_norm): the generated model has none")
    if getattr(text, "positions", None) is not None:
        found.append(
            f"{text.positions.kind} absolute positions "
            f"({cite(spec, 'text.positions') or 'text.positions'}): the generated model has no "
            "position table"
        )
    if getattr(text, "transposed_linears", ()):
        found.append(
            f"linears stored (in, out) ({', '.join(text.transposed_linears)}): the state-dict "
            "adapter does not transpose weights yet"
        )
    if not text.norm.weight:
        found.append(
            f"norms without a learnable weight ({cite(spec, 'text.norm.weight') or 'text.norm'}): "
            "the generated norms are AutoModel's RMSNorm / LayerNorm, which learn one"
        )
    # HF's latent attention, kept whole, scales by the mscale itself (DeepSeek-V3)
    if getattr(text.attention, "yarn_mscale", False) and text.attention.mla is None:
        found.append("attention scale multiplied by the YaRN mscale (config.json:rope_parameters)")
    ropes = distinct_ropes(text)
    positional = sorted(kind for kind, rope in text.rope if rope.rope_type is not None)
    for kind, rope in text.rope:
        where = f"for {kind} layers (config.json:rope_parameters)"
        if rope.rope_type is None and len(ropes) > 1:  # beside one RoPE: generated (Cohere2)
            found.append(
                f"layers without RoPE {where} beside layers of {len(ropes)} RoPEs "
                f"({', '.join(positional)}): the generated model skips RoPE beside one table"
            )
        elif rope.rope_type is None:
            continue
        elif rope.rope_type not in SUPPORTED_ROPE:
            found.append(
                f"RoPE type {rope.rope_type!r} {where}: NeMo's rotary tables are computed once, "
                "HF recomputes them with the sequence length"
            )
    return tuple(found)


def moe_blockers(spec: ArchitectureSpec) -> list[str]:
    """What of the spec's MoE block AutoModel's ``Gate`` / ``GroupedExperts`` would not compute
    as HF does, each with the HF router's source line (or the probe that measured it).

    The generator maps routers that score with a softmax (top k of the softmax, optionally
    renormalised, or a softmax over the top-k logits) onto ``MoEConfig``; the other router
    variants AutoModel has (sigmoid, correction bias, groups, scaling) are refused until a
    model with them is proven end to end.
    """
    moe = spec.text.moe
    assert moe is not None
    router = moe.router
    at = router_location(spec)
    found = []
    # A sigmoid router maps onto AutoModel's Gate with its correction bias, groups and scale.
    if router.scoring == "sigmoid" and router.order != "softmax_topk":
        found.append(f"sigmoid router scores over the top-k logits at {at}: not generated")
    if router.scoring == "softmax" and router.correction_bias:
        found.append(
            f"expert-choice correction bias (e_score_correction_bias) beside softmax scores at "
            f"{at}: not generated"
        )
    if router.scoring == "softmax" and router.n_group > 1:
        found.append(
            f"group-limited routing (n_group={router.n_group}, topk_group={router.topk_group}) "
            f"at {at}: generated for sigmoid routers only"
        )
    if router.scoring == "softmax" and router.routed_scaling_factor != 1.0:
        found.append(
            f"routed weights scaled by {router.routed_scaling_factor:g} at {at}: generated for "
            "sigmoid routers only"
        )
    if router.bias:
        found.append(f"router linear with a bias at {at}: not generated")
    if router.shared_logits:
        found.append(
            f"shared experts weighted by the router ({router.shared_logits} extra router rows, "
            f"renormalised with the chosen experts) at {at}: AutoModel's Gate scores routed "
            "experts only"
        )
    if router.learned_scale:
        found.append(
            f"learned scale of the routing weights ({router.learned_scale}) at {at}: "
            "AutoModel's Gate has none"
        )
    if router.order == "sparsemixer":
        found.append(
            f"sparsemixer routing (two experts, each within a margin) at {at}: not generated"
        )
    if moe.dense_rule == "moe_layer_interval":
        found.append(
            "MoE layers chosen by config.moe_layer_interval / moe_layer_start_index / "
            "moe_layer_end_index (config.json): not generated"
        )
    if moe.shared is not None and moe.shared.plain:
        found.append(
            f"shared expert without a gate projection (model.layers.*.{moe.block_name}."
            f"{moe.shared.name}): AutoModel's shared MLP is generated for swiglu experts only"
        )
    glu = moe.block_glu
    if glu is not None:
        evidence = spec.evidence_for(moe.block_glu_path)
        at = (
            f"{evidence[0].detail.partition(':')[0]} at {evidence[0].where}"
            if evidence
            else moe.block_glu_path
        )
        found.append(
            f"experts computing a clamped GLU (gate and up clamped at a limit, "
            f"(up + {glu.up_offset:g}) * gate * sigmoid(alpha * gate)) ({at}): AutoModel's "
            "experts compute act(gate) * up"
        )
    if moe.activation != "silu":
        found.append(
            f"expert activation {moe.activation!r} (config.json:hidden_act): AutoModel's swiglu "
            "experts compute silu(gate) * up"
        )
    return found
