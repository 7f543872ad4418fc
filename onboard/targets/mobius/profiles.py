"""What each mobius class computes for a dense decoder, as facts about mobius 0.1.0.

The generator subclasses the closest class and writes code only for the features it lacks, so it
must know, per class, which values of each structural feature the class can compute (through its
config or by construction). Values a class gets wrong are left out of its capabilities, with the
bug named in ``bugs``: the generator then overrides that feature instead of inheriting the bug.
Each entry was read from the 0.1.0 source and is checked by ``tests/targets/mobius/test_profiles``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onboard.block_specs import AttentionSpec, MLPSpec
from onboard.spec import ArchitectureSpec, MoESpec, PositionsSpec, RouterSpec
from onboard.targets.mobius.rope import unrounded_yarn

# Structural features (not config flags) and how a spec asks for them.
FEATURES = (
    # rms, rms+1 (Gemma's 1 + w), layer, layer+1, layer/no-bias (Cohere), <kind>/weight-free
    "norm",
    "placement",  # pre, sandwich, post, parallel, post_residual
    "embedding_scale",  # none, sqrt_hidden
    "layer_dispatch",  # uniform, layer_types
    "sliding_window",  # none, uniform, per_layer
    "per_kind_rope",  # no, yes (a different theta for sliding layers)
    "nope_kinds",  # none, or the layer kinds that skip RoPE while others rotate (Cohere 2)
    "rope_layers",  # all, or config_list: a config list says which layers rotate (SmolLM3)
    "attention_scale",  # head_dim, query_pre_attn_scalar, attention_multiplier, unscaled
    "final_softcap",  # no, yes
    "scales",  # none, or the sites config multipliers scale: embedding+logits+residual
    # gated, fused_gate_up, plain (up -> act -> down); /xielu: a learned activation; none;
    # +sub_norm: a norm before down_proj (BitNet)
    "mlp",
    "experts",  # none, routed; +post_norm: a norm of the block's output (A.X-K1)
    "router",  # none, softmax_topk, topk_softmax, sigmoid_topk, custom (correction bias, groups)
    "shared_experts",  # none, gated, ungated, router_weighted (Inkling's, stacked)
    "dense_layers",  # all, none, first_k_dense_replace, mlp_only_layers
    # standard, mla, mla+indexer (DeepSeek V3.2), dynamic_mask (Doge), differential
    # (DiffLlama), sinks (GPT-OSS), none (a pure SSM); +out_gate: a gate projection before
    # o_proj (AFMoE), +sub_norm: a norm before o_proj (BitNet); +per_kind, +v_head_dim,
    # +value_scale: layer kinds that differ, values of their own width or scale (MiMo-V2-Flash)
    "attention_kind",
    "residual_gates",  # none, learned (Doge: x = g * x + sub_block(x), g learned per channel)
    # rope, learned (a table added to the embeddings), sinusoidal (+offset: OPT, XGLM), alibi
    "positions",
    "embedding_norm",  # no, yes (BLOOM normalises the embeddings)
    "rope_reversed",  # no, yes (NanoChat turns q and k the other way: sin negated)
    "yarn_range",  # rounded, unrounded (YaRN with truncate False: GPT-OSS)
    "rope_order",  # standard, reordered (Cohere Compass' pre-rotated M-RoPE frequencies)
    "qk_norm_order",  # before_rope, after_rope (HunYuan)
    "qk_norm_weights",  # shared by the heads, or each_head: a row per head (Cohere)
    "final_norm",  # yes, no (OpenAI GPT's last layer feeds the head)
    "head_transform",  # no, yes (ModernBERT: dense, activation, norm before the head)
    "first_layer_without",  # none, or the norm roles layer 0 lacks (ModernBERT: attn_in)
    "token_mixers",  # none, or the recurrent mixers of a hybrid's other layers: short_conv
)


@dataclass(frozen=True)
class ClassProfile:
    class_name: str
    module: str
    config_class: str
    config_module: str
    can: dict[str, frozenset[str]]
    bugs: tuple[str, ...] = ()  # known bug ids (see bugs.py) behind missing capabilities
    # Config fields the class's own __init__ reads even when a generated text model replaces its
    # text model (built without layers), with the expression the generated config falls back to.
    init_needs: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())
    # Where the class's preprocess_weights puts MoE weights: "mlp" (mobius' MoELayer names, as a
    # generated MoE layer uses), or its own sub-module, which a generated layer does not have.
    moe_weights_under: str = "mlp"
    # Whether its preprocess_weights splits experts saved fused ([E, 2I, H] gate then up,
    # [E, H, I]) into one module per expert under moe_weights_under.
    splits_fused_experts: bool = False


def _can(**overrides: set[str]) -> dict[str, frozenset[str]]:
    base = {
        "norm": {"rms"},
        "placement": {"pre"},
        "embedding_scale": {"none"},
        "layer_dispatch": {"uniform"},
        "sliding_window": {"none"},
        "per_kind_rope": {"no"},
        "nope_kinds": {"none"},
        "rope_layers": {"all"},
        "attention_scale": {"head_dim"},
        "final_softcap": {"no"},
        "scales": {"none"},
        "mlp": {"gated"},
        "experts": {"none"},
        "router": {"none"},
        "shared_experts": {"none"},
        "dense_layers": {"all"},
        "attention_kind": {"standard"},
        "residual_gates": {"none"},
        "positions": {"rope"},
        "embedding_norm": {"no"},
        "rope_reversed": {"no"},
        "yarn_range": {"rounded"},
        "rope_order": {"standard"},
        "qk_norm_order": {"before_rope"},
        "qk_norm_weights": {"shared"},
        "final_norm": {"yes"},
        "head_transform": {"no"},
        "first_layer_without": {"none"},
        "token_mixers": {"none"},
    }
    base.update(overrides)
    return {k: frozenset(v) for k, v in base.items()}


_BASE = "mobius.models.base"
_CONFIGS = "mobius._configs"

PROFILES: dict[str, ClassProfile] = {
    p.class_name: p
    for p in (
        ClassProfile(
            "CausalLMModel",
            _BASE,
            "CausalLMConfig",
            _CONFIGS,
            # TextModel builds a padding-only mask on the default EP (T9); the GQA path of the
            # cpu EP applies one uniform window, so windows are not a capability.
            _can(),
            bugs=("T9",),
        ),
        ClassProfile("QwenCausalLMModel", "mobius.models.qwen", "CausalLMConfig", _CONFIGS, _can()),
        ClassProfile(
            "Qwen3CausalLMModel", "mobius.models.qwen", "CausalLMConfig", _CONFIGS, _can()
        ),
        ClassProfile(
            "LayerNormCausalLMModel", _BASE, "CausalLMConfig", _CONFIGS, _can(norm={"layer"})
        ),
        ClassProfile(
            "FusedGateUpCausalLMModel",
            _BASE,
            "CausalLMConfig",
            _CONFIGS,
            _can(mlp={"fused_gate_up"}),
        ),
        ClassProfile(
            "GemmaCausalLMModel",
            "mobius.models.gemma",
            "CausalLMConfig",
            _CONFIGS,
            # embed scale is round(sqrt(hidden), 2), not sqrt(hidden) (M2)
            _can(norm={"rms+1"}),
            bugs=("M2",),
        ),
        ClassProfile(
            "Gemma2CausalLMModel",
            "mobius.models.gemma",
            "Gemma2Config",
            _CONFIGS,
            # layers slide by index parity, not config.layer_types (T7); embed scale rounded (M2)
            _can(
                norm={"rms+1"},
                placement={"sandwich"},
                attention_scale={"head_dim", "query_pre_attn_scalar"},
                final_softcap={"no", "yes"},
            ),
            bugs=("T7", "M2"),
        ),
        ClassProfile(
            "Gemma3CausalLMModel",
            "mobius.models.gemma3_text",
            "CausalLMConfig",
            _CONFIGS,
            # embed scale rounded to float16 (M2); query_pre_attn_scalar ignored (M1)
            _can(
                norm={"rms+1"},
                placement={"sandwich"},
                layer_dispatch={"uniform", "layer_types"},
                sliding_window={"none", "uniform", "per_layer"},
                per_kind_rope={"no", "yes"},
            ),
            bugs=("M1", "M2"),
            # (a theta even without RoPE: its __init__ builds the local tables regardless)
            init_needs=(
                (
                    "rope_local_base_freq",
                    "base.rope_local_base_freq or base.rope_theta or 10000.0",
                ),
            ),
        ),
        ClassProfile(
            "MoECausalLMModel",
            "mobius.models.moe",
            "CausalLMConfig",
            _CONFIGS,
            # MoETextModel: SoftmaxTopKGate (norm_topk_prob from the config) in every layer.
            _can(
                experts={"routed"},
                router={"softmax_topk"},
                dense_layers={"none"},
            ),
            splits_fused_experts=True,  # _rename_moe_expert_weights
        ),
        ClassProfile(
            "Qwen2MoECausalLMModel",
            "mobius.models.moe",
            "CausalLMConfig",
            _CONFIGS,
            _can(
                experts={"routed"},
                router={"softmax_topk"},
                shared_experts={"gated"},
                dense_layers={"none"},
            ),
            splits_fused_experts=True,  # _rename_moe_expert_weights
        ),
        ClassProfile(
            "DeepSeekV3CausalLMModel",
            "mobius.models.deepseek",
            "CausalLMConfig",
            _CONFIGS,
            # preprocess_weights only splits the fused in-memory experts: a checkpoint's
            # per-expert tensors are never applied (M4), so routed experts are not a capability.
            _can(
                experts={"none"},
                router={"custom"},
                shared_experts={"ungated"},
                dense_layers={"first_k_dense_replace"},
                attention_kind={"standard", "mla"},
            ),
            bugs=("M4",),
            moe_weights_under="mlp.moe",  # renames mlp.gate -> mlp.moe.gate, experts likewise
            splits_fused_experts=True,
        ),
        ClassProfile(
            "OLMo2CausalLMModel",
            "mobius.models.olmo",
            "CausalLMConfig",
            _CONFIGS,
            _can(placement={"post"}),
        ),
    )
}


def requirements(spec: ArchitectureSpec) -> dict[str, str]:
    """The value of every structural feature that ``spec`` needs."""
    text = spec.text
    norm = text.norm.kind + ("+1" if text.norm.weight_offset else "")
    if not text.norm.weight:
        norm += "/weight-free"
    elif text.norm.kind == "layer" and not text.norm.bias:
        norm += "/no-bias"
    kinds = text.distinct_layer_types
    if "sliding_attention" not in kinds or not text.sliding_window:
        window = "none"
    else:
        window = "uniform" if len(kinds) == 1 else "per_layer"
    thetas = {
        (r.rope_type, r.theta, r.partial_rotary_factor, r.scaling)
        for _, r in text.rope
        if r.rope_type is not None
    }
    moe = text.moe
    attention = text.attention
    return {
        "experts": ("routed" + "+post_norm" * bool(moe.post_norm)) if moe else "none",
        "router": router_kind(moe.router) if moe else "none",
        "shared_experts": _shared_experts(moe),
        "dense_layers": moe.dense_rule if moe else "all",
        "attention_kind": _attention_kind(text.attention),
        "residual_gates": "learned" if text.residual_gates else "none",
        "norm": norm,
        "placement": text.norm.placement,
        "embedding_scale": text.embedding_scale,
        "layer_dispatch": "layer_types" if len(kinds) > 1 else "uniform",
        "sliding_window": window,
        "per_kind_rope": "yes" if len(thetas) > 1 else "no",
        "rope_layers": "config_list" if text.rope_layers_key else "all",
        "nope_kinds": "+".join(k for k, r in text.rope if r.rope_type is None) or "none",
        "positions": "alibi" if attention and attention.alibi else _positions(text.positions),
        "embedding_norm": "yes" if text.embedding_norm else "no",
        "rope_reversed": "yes" if any(r.reversed for _, r in text.rope) else "no",
        "yarn_range": "unrounded" if unrounded_yarn(spec) else "rounded",
        "rope_order": "reordered" if spec.text.reordered_rope() else "standard",
        "qk_norm_order": "after_rope"
        if attention and attention.qk_norm_after_rope
        else "before_rope",
        "qk_norm_weights": "each_head" if attention and attention.qk_norm_each_head else "shared",
        "final_norm": "yes" if text.final_norm else "no",
        "head_transform": "yes" if text.head_transform else "no",
        "first_layer_without": "+".join(text.first_layer_without) or "none",
        "attention_scale": _attention_scale(attention),
        "final_softcap": "yes" if text.final_logit_softcap else "no",
        "scales": "+".join(sorted(s.site for s in text.scales)) or "none",
        "mlp": _mlp(text.mlp),
        "token_mixers": "+".join(text.mixers.in_use()) or "none",
    }


def _attention_kind(attention: AttentionSpec | None) -> str:
    if attention is None:  # a pure state-space model
        return "none"
    # What acts on the heads' output before o_proj: a gate projection (AFMoE), a norm (BitNet)
    inner = "+out_gate" * bool(attention.output_gate_proj) + "+sub_norm" * bool(attention.sub_norm)
    # Layer kinds that differ (MiMo-V2-Flash: heads, sinks), values of their own width or scale
    inner += "+per_kind" * bool(attention.kinds) + "+v_head_dim" * bool(attention.v_head_dim)
    inner += "+value_scale" * (attention.value_scale is not None)
    return _attention_variant(attention) + inner


def _attention_variant(attention: AttentionSpec) -> str:
    if attention.mla:
        return "mla+indexer" if attention.indexer else "mla"
    if attention.dynamic_mask:
        return "dynamic_mask"
    if attention.differential:
        return "differential"
    return "sinks" if attention.sinks else "standard"


def _attention_scale(attention: AttentionSpec | None) -> str:
    if attention is None:  # nothing to scale: the default any class has
        return "head_dim"
    return "unscaled" if attention.unscaled else (attention.scale_key or "head_dim")


def _mlp(mlp: MLPSpec | None) -> str:
    if mlp is None:  # no layer mixes channels (Mamba)
        return "none"
    activation = f"/{mlp.activation}" if mlp.learned_activation else ""
    return mlp.kind + activation + ("+sub_norm" if mlp.sub_norm else "")


def _positions(positions: PositionsSpec | None) -> str:
    if positions is None:
        return "rope"
    return positions.kind + ("+offset" if positions.offset else "")


def _shared_experts(moe: MoESpec | None) -> str:
    if moe is None or moe.shared is None:
        return "none"
    if moe.shared.stacked:
        return "router_weighted"
    return "gated" if moe.shared.gated else "ungated"


def router_kind(router: RouterSpec) -> str:
    """Which stock mobius gate computes ``router`` (custom: none does; generate one)."""
    if router.correction_bias or router.n_group > 1 or router.bias:
        return "custom"
    if router.shared_logits or router.learned_scale:
        return "custom"
    if router.order == "sparsemixer":
        return "custom"
    if router.order == "topk_softmax":
        return "topk_softmax" if router.routed_scaling_factor == 1.0 else "custom"
    if router.scoring == "sigmoid":
        return "sigmoid_topk"
    return "softmax_topk" if router.routed_scaling_factor == 1.0 else "custom"


def missing_features(profile: ClassProfile, needed: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """(feature, wanted value) for every feature the class cannot compute."""
    return tuple((f, needed[f]) for f in FEATURES if needed[f] not in profile.can[f])
