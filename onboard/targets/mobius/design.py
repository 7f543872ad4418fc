"""Decide the generated mobius module: what the config sets, which parts are overridden.

The design is plain data for the template. Every config setting and every override carries the
evidence behind it (an HF source line, a config key or a probe observation), which the template
writes as a comment next to the code it justifies.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from onboard.block_specs import (
    AttentionSpec,
    BlockLayout,
    DifferentialSpec,
    DynamicMaskSpec,
    IndexerSpec,
    KindAttention,
    LatentQueryGateSpec,
    MLPSpec,
)
from onboard.errors import UnsupportedFeatureError
from onboard.flag_guards import FlagGuard, guarded_flags
from onboard.naming import class_prefix, module_name, spelled_as
from onboard.spec import (
    LEADING_DENSE_KEYS,
    ArchitectureSpec,
    ClampedGluSpec,
    ConfigFlag,
    FlagSpecs,
    HeadTransformSpec,
    PositionsSpec,
    RouterSpec,
    SharedExpertSpec,
    StackRecurrenceSpec,
    TextDecoderSpec,
    WeightSplit,
)
from onboard.targets.base import Candidate
from onboard.targets.mobius.blocks import block_names
from onboard.targets.mobius.clamped_glu import glu_reason, glu_settings, model_glu
from onboard.targets.mobius.flag_settings import settings_reading_flags
from onboard.targets.mobius.gated_norm import (
    NormGateDesign,
    gate_reason,
    gate_settings,
    norm_gate_design,
)
from onboard.targets.mobius.mixers import (
    HYBRID_TASK,
    MOBIUS_LABELS,
    MixerDesign,
    mixer_designs,
    mixer_settings,
)
from onboard.targets.mobius.placement_switch import PlacementSwitch, placement_switch
from onboard.targets.mobius.profiles import PROFILES, ClassProfile, requirements, router_kind
from onboard.targets.mobius.rope import (
    SlidingRope,
    reordered_rope_settings,
    rope_settings,
    sliding_rope,
    sliding_rope_settings,
)
from onboard.targets.mobius.settings import ExtraField, Setting
from onboard.targets.mobius.settings import why as _why
from onboard.targets.mobius.splits import load_splits
from onboard.targets.mobius.stacks import recurrence_reason, recurrence_renames, recurrence_settings
from onboard.targets.mobius.vision import VisionDesign, design_vision
from onboard.token_mixers import is_attention, is_feed_forward

TEXT_FEATURES = frozenset(
    {
        "norm",
        "placement",
        "embedding_scale",
        "layer_dispatch",
        "sliding_window",
        "per_kind_rope",
        "nope_kinds",
        "rope_layers",
        "attention_scale",
        "mlp",
        "experts",
        "router",
        "shared_experts",
        "dense_layers",
        "attention_kind",
        "scales",
        "positions",
        "embedding_norm",
        "rope_reversed",
        "yarn_range",
        "rope_order",
        "qk_norm_order",
        "qk_norm_weights",
        "final_norm",
        "head_transform",
        "first_layer_without",
        "residual_gates",
        "token_mixers",
    }
)
_CORRECTION = "e_score_correction_bias"
# Fields of mobius' ArchitectureConfig that hold each config multiplier.
SCALE_FIELDS = {
    "embedding": "embedding_multiplier",
    "residual": "residual_multiplier",
    "logits": "logit_scale",
}
# mobius gates for the routers they compute (profiles.router_kind), and how to build them.
GATES = {
    "softmax_topk": (
        "SoftmaxTopKGate",
        "config.hidden_size, config.num_local_experts, config.num_experts_per_tok, "
        "norm_topk_prob=config.norm_topk_prob",
    ),
    "topk_softmax": (
        "TopKGate",
        "config.hidden_size, config.num_local_experts, config.num_experts_per_tok",
    ),
    "sigmoid_topk": (
        "SigmoidTopKGate",
        "config.hidden_size, config.num_local_experts, config.num_experts_per_tok, "
        "norm_topk_prob=config.norm_topk_prob, "
        "routed_scaling_factor=config.routed_scaling_factor",
    ),
}
NORM_CLASSES = {
    "rms": "RMSNorm",
    "rms+1": "OffsetRMSNorm",
    "layer": "LayerNorm",
    "layer+1": "OffsetLayerNorm",
    "layer/no-bias": "LayerNormNoBias",
}
QUERY_GATE = (
    "queries and an output gate from one projection of both q latents (normed, raw); the "
    "heads' output scaled by sigmoid(gate) before o_proj"
)

# Attribute names mobius' DecoderLayer gives its norms, per placement and role.
DECODER_LAYER_NORMS = {
    "pre": {"attn_in": "input_layernorm", "mlp_in": "post_attention_layernorm"},
    "post": {"attn_out": "post_attention_layernorm", "mlp_out": "post_feedforward_layernorm"},
}


@dataclass(frozen=True)
class MoEDesign:
    """How the generated layers build their MoE block."""

    gate_class: str  # a mobius gate, or the generated router
    gate_args: str  # constructor arguments (source), reading the mobius config
    generated_router: bool
    router: RouterSpec
    router_description: str
    shared: SharedExpertSpec | None
    dense_rule: str  # none, first_k_dense_replace, mlp_only_layers, moe_layer_interval
    flat_correction: bool = False  # the checkpoint's correction bias is reshaped to [experts]
    plain: bool = False  # experts without a gate: down(act(up(x))), generated as FCMLPs
    transposed: bool = False  # fused experts hold each expert (in, out) (Aria)
    post_norm: str | None = None  # the attribute of a norm of the block's output (A.X-K1)
    glu: ClampedGluSpec | None = None  # experts computing a clamped GLU (a generated MLP)
    glu_routed: bool = False  # the routed experts compute it (else the shared expert only)

    @property
    def generated_layer(self) -> bool:
        """mobius' MoELayer is subclassed (a shared expert, experts without a gate or with a
        clamped GLU, a norm of the output)."""
        return (
            self.shared is not None
            or self.plain
            or self.post_norm is not None
            or self.glu is not None
        )


@dataclass(frozen=True)
class TextDesign:
    norm_class: str
    placement: str
    weight_free_norm: str | None  # rms or layer: the generated norm class has nothing to learn
    norm_names: tuple[tuple[str, str], ...]  # role -> attribute, for the sandwich layer
    mlp_class: str
    embedding_scale: str | None  # the embeddings' factor (source), None when there is none
    attention_scale: str | None  # the q.k scale (source) when it is not head_dim ** -0.5
    residual_scale: bool  # sub-block outputs x config.residual_multiplier
    layer_kinds: tuple[str, ...]
    windowed: bool  # some layer slides: the forward builds per-kind masks
    uniform_window: bool  # every layer slides: the GroupQueryAttention path can keep its window
    per_kind_rope: bool  # sliding layers rotate by their own table (rotary_emb_local)
    nope_kinds: tuple[str, ...]  # layer kinds whose attention skips RoPE
    rope_layers_key: str | None  # config list: layer i rotates iff config.<key>[i]
    reasons: tuple[str, ...]  # one line per feature the text model changes
    moe: MoEDesign | None = None
    mla: bool = False
    glu: ClampedGluSpec | None = None  # the generated clamped-GLU MLP's (experts, dense layers)
    mla_norm_eps: float | None = None  # DeepSeekMLA reads rms_norm_eps; HF fixes this one
    # A learned position table added to the embeddings: row position + offset
    positions: PositionsSpec | None = None
    alibi: bool = False  # per-head linear biases by key position (BLOOM, MPT)
    embedding_norm: bool = False  # a norm of the embeddings (BLOOM)
    rope_reversed: bool = False  # q and k turn the other way: sin negated (NanoChat)
    unrounded_yarn: bool = False  # a generated YaRN table keeps HF's correction range unrounded
    reordered_rope: bool = False  # a generated default table with its frequencies reordered
    qk_norm_after_rope: bool = False  # a generated Attention norms q and k after RoPE (HunYuan)
    # the layer swaps the attention's q/k norms for generated ones with a weight per head, of
    # this kind (layer or rms)
    qk_norm_each_head: str | None = None
    qk_norm_head_modules: str | None = None  # saved one norm per head in this list: stacked
    # A VLM's token types widen the causal mask (vision.merge.token_blocks: each image's
    # tokens, Gemma 3, or a prefix, PaliGemma, see each other both ways): the masks carry the
    # blocks, and a generated Attention takes them as the whole mask (not causal again)
    token_blocks: str = ""  # the rule: "images" or "prefix"
    # A VLM's DeepStack (Qwen3-VL): the forward takes one addend per leading layer (image
    # features at the placeholders, zero elsewhere), added to that layer's output
    deepstack: bool = False
    learned_activation: bool = False  # the MLP's activation learns parameters (Apertus' xIELU)
    final_norm: bool = True  # False: a generated identity stands in for TextModel's norm
    head_transform: HeadTransformSpec | None = None  # generated, applied after the final norm
    # Attributes of layer 0's norms a generated identity replaces (HF has none there)
    first_layer_identity: tuple[str, ...] = ()
    dynamic_mask: DynamicMaskSpec | None = None  # a generated Attention adds Doge's mask
    differential: DifferentialSpec | None = None  # a generated differential Attention
    sinks: str | None = None  # a generated Attention with a sink logit per head (its attribute)
    # A generated Attention whose layer kinds differ (key/value heads, sinks), whose value heads
    # are config.v_head_dim wide, whose values are scaled after v_proj (MiMo-V2-Flash)
    kind_attention: tuple[KindAttention, ...] = ()
    value_head_dim: bool = False
    value_scale: bool = False
    residual_gates: tuple[tuple[str, str], ...] = ()  # sub-block -> learned residual scale
    # A hybrid's recurrent mixers: layers of these kinds hold a generated component, not
    # attention, and carry its state in mobius' hybrid task
    mixers: tuple[MixerDesign, ...] = ()
    # One residual block a layer (NemotronH): the generated layers keep HF's names for it, and
    # layers of these kinds (mobius' words) hold only an MLP
    blocks: BlockLayout | None = None
    feed_forward_words: tuple[str, ...] = ()
    block_names: tuple[tuple[str, str], ...] = ()  # mobius' word -> the layer's block attribute
    # q_proj gives queries and gates: mobius' Qwen35Attention (gated, (1 + w) q/k norms)
    output_gate: bool = False
    # A generated Attention scales the heads' output by sigmoid(<this projection>(x)) (AFMoE),
    # or by softplus, one value per head (Laguna)
    output_gate_proj: str | None = None
    output_gate_activation: str = "sigmoid"
    output_gate_per_head: bool = False
    # A generated Attention norms the heads' output before o_proj (BitNet: attn_sub_norm), a
    # generated MLP what enters down_proj (ffn_sub_norm); their attributes
    attention_sub_norm: str | None = None
    mlp_sub_norm: str | None = None
    # DeepSeek Sparse Attention: a generated latent attention over the keys a generated
    # lightning indexer keeps, and a task that caches the indexer's keys (parts/indexer.py.j2)
    indexer: IndexerSpec | None = None
    # The residual layout (sequential or parallel) follows a config flag
    placement_switch: PlacementSwitch | None = None
    sliding_rope: SlidingRope | None = None  # what the sliding layers' own table differs in
    norm_gate: NormGateDesign | None = None  # some layer norms are generated gated norms
    # The latent attention's queries and output gate from one projection of both q latents
    query_gate: LatentQueryGateSpec | None = None
    recurrence: StackRecurrenceSpec | None = None  # two stacks run in cycles (stacks.py)

    @property
    def shares_selection(self) -> bool:
        """Layers without an indexer reuse the last one's selection (GLM-MoE-DSA)."""
        return self.indexer is not None and self.indexer.layers_key is not None

    @property
    def layer_takes_index(self) -> bool:
        """The generated decoder layer is built with its index (the MoE or indexer rule)."""
        return self.moe is not None or self.shares_selection or bool(self.kind_attention)

    @property
    def one_layer_kind(self) -> bool:
        """Every layer holds the one recurrent mixer (a pure state-space model)."""
        return not self.layer_kinds and not self.feed_forward_words and len(self.mixers) == 1

    def block_attr(self, word: str) -> str:
        return dict(self.block_names)[word]

    @staticmethod
    def feed_forward_layer(word: str) -> str:
        """The generated one-block layer's class name part for a feed-forward kind."""
        return {"mlp": "MLP", "moe": "MoE"}[word]

    @property
    def generated_attention(self) -> bool:
        """Each layer's attention is the generated ``<prefix>Attention``."""
        return (
            self.qk_norm_after_rope
            or self.token_blocks
            or bool(self.dynamic_mask or self.differential or self.sinks)
            or bool(self.attention_sub_norm or self.output_gate_proj)
            or self.own_values
        )

    @property
    def own_values(self) -> bool:
        """The generated Attention attends itself, per layer kind, with values of their own
        width or scale (``parts/components.py.j2``)."""
        return bool(self.kind_attention) or self.value_head_dim or self.value_scale

    @property
    def kinds_with_sinks(self) -> tuple[str, ...]:
        return tuple(k.kind for k in self.kind_attention if k.sinks)

    @property
    def kind_sinks(self) -> str | None:
        """The attribute of the sink logit some layer kinds have (one name for all)."""
        return next((k.sinks for k in self.kind_attention if k.sinks), None)

    @property
    def kv_heads_factors(self) -> tuple[tuple[str, int], ...]:
        return tuple(
            (k.kind, k.kv_heads_factor) for k in self.kind_attention if k.kv_heads_factor != 1
        )

    def norm_attr(self, role: str) -> str:
        """The attribute the generated layers give the norm of ``role`` (mobius' DecoderLayer
        names its own; a generated layer keeps HF's)."""
        ours = {} if self.custom_layer else DECODER_LAYER_NORMS.get(self.placement, {})
        return ours.get(role, dict(self.norm_names).get(role, role))

    @property
    def no_norm(self) -> bool:
        """The generated NoNorm identity is used somewhere."""
        return not self.final_norm or bool(self.first_layer_identity)

    @property
    def overrides_forward(self) -> bool:
        # Latent attention cannot take TextModel's GroupQueryAttention context: always own masks.
        return (
            self.windowed
            or self.per_kind_rope
            or len(self.layer_kinds) > 1
            or self.mla
            or bool(self.nope_kinds)
            or bool(self.rope_layers_key)
            or self.positions is not None
            or self.alibi
            or self.embedding_norm
            or self.rope_reversed
            or self.head_transform is not None
            or self.generated_attention  # it takes masks, not GroupQueryAttention's
            or bool(self.mixers)  # mixer layers take the padding mask and their own states
            or self.deepstack  # image features join the first layers' outputs
            or self.recurrence is not None  # the stacks' cycles replace the layer loop
        )

    @property
    def windows_only(self) -> bool:
        """The forward is generated for sliding windows alone: mobius' own forward computes the
        rest, so a static cache (which mobius builds without windows, for its own windowed
        models too) can take it."""
        kinds = set(self.layer_kinds) <= {"full_attention", "sliding_attention"}
        return (
            self.windowed
            and kinds
            and not (
                self.per_kind_rope
                or self.mla
                or self.nope_kinds
                or self.rope_layers_key
                or self.positions is not None
                or self.alibi
                or self.embedding_norm
                or self.rope_reversed
                or self.head_transform is not None
                or self.generated_attention
                or self.mixers
                or self.deepstack
            )
        )

    @property
    def constants(self) -> bool:
        """Generated modules hold constants of their own (numpy arrays as ir tensors)."""
        sinusoidal = self.positions is not None and self.positions.kind == "sinusoidal"
        return bool(self.weight_free_norm or self.qk_norm_each_head) or sinusoidal or self.alibi

    @property
    def custom_layer(self) -> bool:
        if self.blocks is not None:  # one generated layer class a kind instead
            return False
        return (
            self.placement in ("sandwich", "parallel", "post_residual")
            or self.placement_switch is not None
            or bool(self.qk_norm_each_head)
            or self.moe is not None
            or self.mla
            or bool(self.residual_gates)
            or self.output_gate  # its attention is Qwen35Attention, not DecoderLayer's
            or bool(self.kind_attention)  # its attention is built for the layer's kind
            or self.norm_gate is not None  # some of its norms are gated
        )


@dataclass(frozen=True)
class ModelDesign:
    model_type: str
    module: str  # module name under mobius.models
    prefix: str  # class-name prefix, e.g. Qwen3
    base: ClassProfile
    base_key: str  # a registry key that uses the base class
    settings: tuple[Setting, ...]
    extra_fields: tuple[ExtraField, ...]
    text: TextDesign | None
    final_softcap: bool
    logits_scale: bool  # logits x config.logit_scale
    renames: tuple[tuple[str, str], ...]
    changes: tuple[str, ...]  # "same as <base> except" bullet lines
    architecture: str
    # The base's preprocess_weights moves MoE weights under a sub-module the generated MoE layer
    # does not have: the generated class then starts from CausalLMModel's instead.
    generic_preprocess: bool = False
    fused_qkv: str | None = None  # HF's one q/k/v projection, split for mobius' Attention
    fused_qkv_per_head: bool = False  # its rows run (head, q/k/v, head_dim)
    fused_qkv_kv_grouped: bool = False  # per key/value head: its query heads, k, v (InternLM2)
    fused_qkv_groups: int = 0  # its rows run (group, q/v/k, the group's heads) (CodeGen)
    # HF's base_model_prefix, added to names saved without it, and the checkpoint's other
    # top-level modules (the head), which keep their names
    base_prefix: str = ""
    top_level: tuple[str, ...] = ()
    # Weight-name suffixes (after renames) stored (in, out), transposed when loading (GPT-2)
    transposed: tuple[str, ...] = ()
    lm_head_bias: bool = False  # the generated class rebuilds lm_head with a bias
    # HF adds an output bias in the last layer only: every o_proj has one, zero but there
    zero_o_biases: bool = False
    # Statements over the HF config assigning ``width``: a generated _mlp_width(config) (LFM2)
    mlp_width_code: str | None = None
    task: str | None = None  # the class's default task when not text generation (hybrids)
    vision: VisionDesign | None = None  # a VLM: the vision-language parts around the text model
    # Flags whose other value the generated code does not compute: its config refuses that value
    guards: tuple[FlagGuard, ...] = ()
    # The config class's name where ``{prefix}Config`` is one of mobius' own (shadowing.py)
    config_name: str = ""
    # Saved tensors transformers cuts into equal chunks on load (HRM's attn.gqkv_proj), cut
    # the same way before the renames
    splits: tuple[WeightSplit, ...] = ()

    @property
    def preprocesses(self) -> bool:
        return bool(
            self.zero_o_biases
            or self.splits
            or self.renames
            or self.fused_qkv
            or self.transposed
            or self.base_prefix
            or (
                self.text
                and (
                    (self.text.moe and not self.parent_splits_experts)
                    or self.text.blocks
                    or self.text.qk_norm_head_modules
                )
            )
        )

    @property
    def parent_splits_experts(self) -> bool:
        """The base class's preprocess_weights splits experts saved fused, gate then up, into
        the generated layers' names: the generated module does not split them again."""
        moe = self.text.moe if self.text else None
        return bool(
            moe
            and self.base.splits_fused_experts
            and not self.generic_preprocess
            and not (moe.plain or moe.transposed or (moe.shared and moe.shared.stacked))
        )

    @property
    def config_class(self) -> str:
        return self.config_name or f"{self.prefix}Config"

    @property
    def model_class(self) -> str:
        """The class the registry names: the VLM's when there is a vision side."""
        return self.vision.model_class if self.vision else self.causal_lm_class

    @property
    def causal_lm_class(self) -> str:
        return f"{self.prefix}CausalLMModel"

    @property
    def text_model_class(self) -> str:
        return f"{self.prefix}TextModel"

    @property
    def decoder_layer_class(self) -> str:
        return f"{self.prefix}DecoderLayer"


def design_model(
    spec: ArchitectureSpec,
    chosen: Candidate,
    *,
    name: str | None = None,
    flagged_from: FlagSpecs | None = None,
) -> ModelDesign:
    """The design for ``spec``; with ``flagged_from``, ``spec`` is the flags-flipped variant:
    the settings read each flag (``flag_settings``), and the docstrings describe the analysed
    checkpoint plus one line per flag the code follows."""
    design = _design_model(spec, chosen, name=name, flagged_from=flagged_from)
    if flagged_from is None:
        return design
    described = _design_model(flagged_from.baseline, chosen, name=name)
    followed = tuple(_follows(f) for f in spec.flags if f.key in dict(flagged_from.single))
    text = design.text
    switch = placement_switch(spec, flagged_from)
    if switch is not None and text is None:
        raise UnsupportedFeatureError(
            f"config.{switch.key} changes the residual layout, and the {switch.when_set} "
            "layout needs no generated layer to switch in"
        )
    if text is not None:
        text = dataclasses.replace(
            text,
            reasons=(described.text.reasons if described.text else ()) + followed,
            placement_switch=switch,
        )
    settings, extra = design.settings, design.extra_fields
    if switch is not None:
        settings += (Setting(switch.key, f"bool(config.{switch.key})", "residual layout"),)
        if switch.key not in _architecture_fields():
            extra += (ExtraField(switch.key, "bool", "False"),)
    return dataclasses.replace(
        design,
        text=text,
        changes=described.changes + followed,
        settings=settings,
        extra_fields=extra,
    )


def _architecture_fields() -> frozenset[str]:
    """The fields of mobius' ArchitectureConfig (``parallel_attn`` is one): a generated config
    adds a field only where its base has none."""
    try:
        from mobius._configs import ArchitectureConfig
    except ImportError:
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(ArchitectureConfig))


def _follows(flag: ConfigFlag) -> str:
    switched = ", ".join(f"{name} {flipped}" for name, _, flipped in flag.switches)
    where = f" ({flag.evidence[0].where})" if flag.evidence else ""
    state = "unset" if flag.value else "set"
    return f"follows config.{flag.key} ({state}: {switched}){where}"


def _design_model(
    spec: ArchitectureSpec,
    chosen: Candidate,
    *,
    name: str | None = None,
    flagged_from: FlagSpecs | None = None,
) -> ModelDesign:
    profile = PROFILES[chosen.variant.class_name]
    needed = requirements(spec)
    missing = {d.feature for d in chosen.deltas}
    prefix = spelled_as(
        class_prefix(spec.source.architecture, spec.model_type)
        if name is None
        else class_prefix("", name),
        "mobius",
    )
    deepstack = spec.vision is not None and spec.vision.deepstack is not None
    # mobius' own text models' masks are causal: blocks of token types go to a generated one
    blocks = spec.vision is not None and bool(spec.vision.merge.token_blocks)
    text_design = (
        _text_design(spec, needed, missing, prefix)
        if missing & TEXT_FEATURES or deepstack or blocks
        else None
    )
    settings, extra = _settings(spec, profile, text_design)
    if flagged_from is not None:
        settings = settings_reading_flags(
            settings,
            flagged_from,
            lambda other: _settings(other, profile, text_design)[0],
            {f.key: f.value for f in spec.flags},
        )
    final_softcap = "final_softcap" in missing
    if final_softcap and not any(f.name == "final_logit_softcapping" for f in extra):
        extra = (*extra, ExtraField("final_logit_softcapping", "float", "0.0"))
    changes = tuple(text_design.reasons if text_design else ()) + _flag_changes(spec, settings)
    if spec.text.lm_head_bias:
        changes += (_why("lm_head adds a bias", spec, "text.lm_head_bias"),)
    attention = spec.text.attention
    if attention is not None and attention.fused_qkv:
        changes += (
            _why(
                f"one {attention.fused_qkv} for q, k and v, split when loading",
                spec,
                "text.attention.fused_qkv",
            ),
        )
    logits = spec.text.scale_at("logits")
    if logits is not None:
        changes += (_why(logits.describe(), spec, "text.scales.logits"),)
    if final_softcap:
        changes += ("final logits soft-capped: tanh(logits / cap) * cap",)
    if spec.text.transposed_linears:
        changes += (
            _why(
                "weights stored (in, out) (Conv1D), transposed when loading",
                spec,
                "text.transposed_linears",
            ),
        )
    module = module_name(name or spec.model_type)
    renames = _renames(spec, text_design)
    vision = design_vision(spec, prefix)
    if vision is not None and text_design is not None and text_design.mixers:
        vision = dataclasses.replace(vision, hybrid=True)
    changes += vision.changes if vision else ()
    return ModelDesign(
        model_type=spec.model_type,
        module=module,
        prefix=prefix,
        base=profile,
        base_key=chosen.variant.key,
        settings=settings,
        extra_fields=extra,
        text=text_design,
        final_softcap=final_softcap,
        logits_scale=logits is not None,
        renames=renames,
        changes=changes,
        architecture=spec.source.architecture,
        generic_preprocess=bool(text_design and text_design.moe)
        and profile.moe_weights_under != "mlp",
        **_fused_qkv(attention),
        lm_head_bias=spec.text.lm_head_bias,
        zero_o_biases=attention is not None and attention.last_layer_o_bias is not None,
        mlp_width_code=spec.text.mlp and spec.text.mlp.width_code,
        task=vision.task if vision else HYBRID_TASK if text_design and text_design.mixers else None,
        vision=vision,
        base_prefix=spec.weights.base_prefix,
        top_level=tuple(sorted({*spec.weights.top_level, "lm_head"})),
        transposed=tuple(
            renamed(f"model.layers.0.{name}.weight", renames).removeprefix("model.layers.0")
            for name in spec.text.transposed_linears
        ),
        guards=guarded_flags(spec, flagged_from),
        splits=load_splits(spec),
    )


def _fused_qkv(attention: AttentionSpec | None) -> dict[str, Any]:
    """HF's one q/k/v projection and its row order, for the design's fields."""
    if attention is None or not attention.fused_qkv:
        return {}
    return {
        "fused_qkv": attention.fused_qkv,
        "fused_qkv_per_head": attention.fused_qkv_layout == "per_head",
        "fused_qkv_kv_grouped": attention.fused_qkv_layout == "kv_grouped",
        "fused_qkv_groups": attention.fused_qkv_groups
        if attention.fused_qkv_layout == "grouped"
        else 0,
    }


def renamed(name: str, renames: tuple[tuple[str, str], ...]) -> str:
    """``name`` after mobius' ``rename_weight_keys`` (ordered substring replacements)."""
    for old, new in renames:
        name = name.replace(old, new)
    return name


def _text_design(
    spec: ArchitectureSpec, needed: dict[str, str], missing: set[str], prefix: str
) -> TextDesign:
    text = spec.text
    kinds = tuple(k for k in text.distinct_layer_types if is_attention(k))
    mixers = mixer_designs(spec, prefix)
    reasons = [m.reason for m in mixers]
    if spec.vision is not None and spec.vision.deepstack is not None:
        reasons.append(
            _why(
                "DeepStack: the first layers' outputs take image features at the placeholders",
                spec,
                "vision.deepstack",
            )
        )
    if text.blocks is not None:
        reasons.append(_why(_block_reason(text), spec, "text.blocks"))
    weight_free = text.norm.kind if needed["norm"].endswith("/weight-free") else None
    norm_class = f"{prefix}WeightFreeNorm" if weight_free else NORM_CLASSES[needed["norm"]]
    if weight_free:
        reasons.append(_why("norms without a learnable weight", spec, "text.norm.weight"))
    elif needed["norm"] == "rms+1":
        reasons.append(_why("norms scale by (1 + w)", spec, "text.norm.weight_offset"))
    elif needed["norm"].startswith("layer"):
        offset = " scaling by (1 + w)" if needed["norm"] == "layer+1" else ""
        offset += " without bias" if needed["norm"].endswith("/no-bias") else ""
        reasons.append(_why(f"LayerNorm (centred) norms{offset}", spec, "text.norm.kind"))
    if text.norm.placement == "sandwich":
        reasons.append(
            _why("norms before and after attention and the MLP", spec, "text.norm.placement")
        )
    elif text.norm.placement == "post":
        reasons.append(_why("norms after attention and the MLP", spec, "text.norm.placement"))
    elif text.norm.placement == "post_residual":
        reasons.append(
            _why("norms of the residual stream after each add", spec, "text.norm.placement")
        )
    elif text.norm.placement == "parallel":
        reasons.append(
            _why(
                "attention and MLP read the same normed input; both add to the residual",
                spec,
                "text.norm.placement",
            )
        )
    if text.embedding_scale == "sqrt_hidden":
        reasons.append(_why("embeddings x sqrt(hidden_size), exact", spec, "text.embedding_scale"))
    for site in ("embedding", "residual"):
        scale = text.scale_at(site)
        if scale is not None:
            reasons.append(_why(scale.describe(), spec, f"text.scales.{site}"))
    attention_scale = _attention_scale_expr(spec)
    if attention_scale:
        reasons.append(_why(f"q.k scaled by {attention_scale}", spec, "text.attention.scale"))
    windowed = needed["sliding_window"] != "none"
    if len(kinds) > 1:
        reasons.append(
            _why("attention kind per layer from config.layer_types", spec, "text.layer_types")
        )
    if windowed:
        reasons.append(
            _why("sliding-window mask on the default EP too", spec, "text.sliding_window")
        )
    nope_kinds = tuple(k for k in needed["nope_kinds"].split("+") if k != "none")
    positions = text.positions
    if positions is not None:
        row = f"position + {positions.offset}" if positions.offset else "position"
        reasons.append(
            _why(
                f"{positions.kind} positions (row {row}) added to the embeddings",
                spec,
                "text.positions",
            )
        )
    attention = text.attention
    alibi = attention is not None and attention.alibi
    if alibi:
        reasons.append(
            _why("ALiBi: each head biased by key position, no RoPE", spec, "text.attention.alibi")
        )
    if text.embedding_norm:
        reasons.append(_why("the embeddings are normalised", spec, "text.embedding_norm"))
    qk_norm_after_rope = needed["qk_norm_order"] == "after_rope"
    if qk_norm_after_rope:
        reasons.append(_why("q/k norms after RoPE", spec, "text.attention.qk_norm_after_rope"))
    qk_norm_each_head = text.norm.kind if needed["qk_norm_weights"] == "each_head" else None
    if qk_norm_each_head:
        reasons.append(
            _why("q/k norms with a weight per head", spec, "text.attention.qk_norm_each_head")
        )
    rope_reversed = needed["rope_reversed"] == "yes"
    if rope_reversed:
        reasons.append(_why("RoPE turns the other way (sin negated)", spec, "text.rope.reversed"))
    yarn = needed["yarn_range"] == "unrounded"
    if yarn:
        kind = next(k for k, r in text.rope if r.rope_type == "yarn")
        reasons.append(
            _why(
                "YaRN RoPE whose correction range is rounded only if rope_scaling asks "
                "(truncate); mobius' YarnRope always rounds it",
                spec,
                f"text.rope.{kind}",
            )
        )
    reordered = needed["rope_order"] == "reordered"
    if reordered:
        kind, _ = text.reordered_rope()
        reasons.append(
            _why(
                "RoPE frequencies reordered by config.rope_sections: those before its last "
                "section taken evens first, then odds",
                spec,
                f"text.rope.{kind}",
            )
        )
    if (positions is None and not alibi) or len(kinds) > 1:
        for kind in nope_kinds:
            reasons.append(_why(f"{kind} layers skip RoPE", spec, f"text.rope.{kind}"))
    if text.rope_layers_key:
        reasons.append(
            _why(
                f"layer i applies RoPE only if config.{text.rope_layers_key}[i]",
                spec,
                "text.rope_layers_key",
            )
        )
    local_rope = sliding_rope(spec) if needed["per_kind_rope"] == "yes" else None
    if local_rope is not None:
        own = (
            "theta"
            + ", type, scaling" * local_rope.scaled
            + ", rotated share" * (local_rope.partial)
        )
        reasons.append(
            _why(
                f"sliding layers use their own RoPE ({own})",
                spec,
                "text.rope.sliding_attention",
            )
        )
    if needed["mlp"] == "fused_gate_up":
        reasons.append(_why("fused gate_up_proj", spec, "text.mlp.kind"))
    elif needed["mlp"].startswith("plain"):
        reasons.append(_why("MLP without a gate (up, activation, down)", spec, "text.mlp.kind"))
    if text.head_transform is not None:
        reasons.append(
            _why(
                "the final hidden states pass a dense layer, an activation and a norm before the "
                "head",
                spec,
                "text.head_transform",
            )
        )
    if text.first_layer_without:
        reasons.append(
            _why("layer 0 has no attention-input norm", spec, "text.first_layer_without")
        )
    if not text.final_norm:
        reasons.append(
            _why("no final norm: the last layer feeds the head", spec, "text.final_norm")
        )
    mlp = text.mlp
    if mlp is not None and mlp.learned_activation:
        reasons.append(
            _why(
                f"{mlp.activation} activation with parameters learned in every layer",
                spec,
                "text.mlp.activation",
            )
        )
    if attention is not None:
        reasons += _attention_variant_reasons(spec, attention)
    if text.residual_gates:
        reasons.append(
            _why("learned per-channel scales of the residual", spec, "text.residual_gates")
        )
    if mlp is not None and mlp.sub_norm:
        reasons.append(
            _why("a norm of act(gate) x up before the MLP's down_proj", spec, "text.mlp.sub_norm")
        )
    moe = _moe_design(spec, prefix, reasons)
    if text.recurrence is not None:
        reasons.append(recurrence_reason(spec))
    if mlp is not None and mlp.glu and (moe is None or moe.glu is None):
        reasons.append(_why(f"dense {glu_reason(mlp.glu)}", spec, "text.mlp.glu"))
    if text.norm.gate is not None:
        reasons.append(_why(gate_reason(spec) or "", spec, "text.norm.gate"))
    if attention is not None and attention.mla and attention.mla.query_gate:
        reasons.append(_why(QUERY_GATE, spec, "text.attention.mla.query_gate"))
    mla = attention and attention.mla
    design = TextDesign(
        norm_class=norm_class,
        placement=text.norm.placement,
        weight_free_norm=weight_free,
        norm_names=text.norm.names,
        mlp_class=_mlp_class(mlp, prefix),
        embedding_scale=_embedding_scale_expr(spec),
        attention_scale=attention_scale,
        residual_scale=text.scale_at("residual") is not None,
        layer_kinds=kinds,
        windowed=windowed,
        uniform_window=needed["sliding_window"] == "uniform",
        per_kind_rope=local_rope is not None,
        sliding_rope=local_rope,
        nope_kinds=nope_kinds,
        rope_layers_key=text.rope_layers_key,
        reasons=tuple(reasons),
        moe=moe,
        mla=mla is not None,
        glu=model_glu(text),
        mla_norm_eps=mla.norm_eps if mla else None,
        norm_gate=norm_gate_design(spec),
        query_gate=mla.query_gate if mla else None,
        positions=positions,
        alibi=alibi,
        embedding_norm=text.embedding_norm,
        rope_reversed=rope_reversed,
        unrounded_yarn=yarn,
        reordered_rope=reordered,
        qk_norm_after_rope=qk_norm_after_rope,
        qk_norm_each_head=qk_norm_each_head,
        qk_norm_head_modules=attention.qk_norm_head_modules if qk_norm_each_head else None,
        token_blocks=spec.vision.merge.token_blocks if spec.vision is not None else "",
        deepstack=spec.vision is not None and spec.vision.deepstack is not None,
        learned_activation=mlp is not None and mlp.learned_activation is not None,
        final_norm=text.final_norm,
        head_transform=text.head_transform,
        dynamic_mask=attention and attention.dynamic_mask,
        differential=attention and attention.differential,
        sinks=attention and attention.sinks,
        kind_attention=attention.kinds if attention else (),
        value_head_dim=attention is not None and attention.v_head_dim is not None,
        value_scale=attention is not None and attention.value_scale is not None,
        residual_gates=text.residual_gates,
        mixers=mixers,
        blocks=text.blocks,
        feed_forward_words=tuple(k for k in text.distinct_layer_types if is_feed_forward(k)),
        block_names=block_names(text, MOBIUS_LABELS),
        output_gate=attention is not None and attention.output_gate,
        output_gate_proj=attention and attention.output_gate_proj,
        output_gate_activation=attention.output_gate_activation if attention else "sigmoid",
        output_gate_per_head=attention is not None and attention.output_gate_per_head,
        attention_sub_norm=attention and attention.sub_norm,
        mlp_sub_norm=mlp and mlp.sub_norm,
        indexer=attention and attention.indexer,
        recurrence=text.recurrence,
    )
    return dataclasses.replace(design, first_layer_identity=_first_layer_identity(text, design))


def _mlp_class(mlp: MLPSpec | None, prefix: str) -> str:
    """mobius' MLP for the spec's, or the generated one (no gate; a norm before down_proj)."""
    if mlp is not None and mlp.sub_norm:
        return f"{prefix}MLP"
    if mlp is not None and mlp.glu:
        return f"{prefix}ClampedGluMLP"
    return {"fused_gate_up": "FusedGateUpMLP", "plain": f"{prefix}MLP"}.get(
        mlp.kind if mlp else "", "MLP"
    )


def _block_reason(text: TextDecoderSpec) -> str:
    """The docstring line of a one-block layout, naming the kinds its layers hold."""
    kinds = text.distinct_layer_types
    held = [
        what
        for what, present in (
            ("attention", any(is_attention(k) for k in kinds)),
            ("a recurrent mixer", bool(text.mixers.in_use())),
            ("an MLP", any(is_feed_forward(k) for k in kinds)),
        )
        if present
    ]
    layout = f"each layer is one residual block ({text.blocks.block} after {text.blocks.norm})"
    if len(held) == 1:
        return f"{layout}: {held[0]}"
    return f"{layout}: {', '.join(held[:-1])} or {held[-1]}, by config.layer_types"


def _attention_variant_reasons(spec: ArchitectureSpec, attention: AttentionSpec) -> list[str]:
    """One line per attention variant the generated attention computes."""
    reasons = []
    if attention.dynamic_mask:
        reasons.append(
            _why(
                "a dynamic mask from the values added to the attention scores",
                spec,
                "text.attention.dynamic_mask",
            )
        )
    if attention.differential:
        reasons.append(
            _why(
                "differential attention (the first half of the heads minus lambda x the second)",
                spec,
                "text.attention.differential",
            )
        )
    if attention.sinks:
        reasons.append(
            _why(
                "a learned sink logit per head: one more softmax column no value is read for",
                spec,
                "text.attention.sinks",
            )
        )
    reasons += _own_values_reasons(spec, attention)
    mla = attention.mla
    if mla is not None:
        reasons.append(
            _why("multi-head latent attention (low-rank q and kv)", spec, "text.attention.mla")
        )
    indexer = attention.indexer
    if indexer is not None:
        shared = (
            f", in the layers config.{indexer.layers_key} marks {indexer.own!r} (the others "
            "reuse the last selection)"
            if indexer.layers_key
            else ""
        )
        pairs = "on (x0, x1) pairs" if indexer.rope_interleaved else "on halves"
        reasons.append(
            _why(
                f"DeepSeek Sparse Attention: a lightning indexer ({indexer.heads} heads of "
                f"{indexer.head_dim}, RoPE {pairs}) keeps each query's top {indexer.topk} keys, "
                f"its keys cached beside the KV cache{shared}",
                spec,
                "text.attention.indexer",
            )
        )
    if mla is not None and mla.norm_eps is not None:
        reasons.append(
            _why(
                f"latent norms with a fixed epsilon {mla.norm_eps:g}",
                spec,
                "text.attention.mla.norm_eps",
            )
        )
    if attention.output_gate_proj:
        each = ", one value per head" * attention.output_gate_per_head
        gate = f"{attention.output_gate_activation}({attention.output_gate_proj}(x))"
        reasons.append(
            _why(
                f"the heads' output scaled by {gate} before o_proj{each}",
                spec,
                "text.attention.output_gate_proj",
            )
        )
    if attention.sub_norm:
        reasons.append(
            _why("a norm of the heads' output before o_proj", spec, "text.attention.sub_norm")
        )
    if attention.output_gate:
        reasons.append(
            _why(
                "each head's output scaled by sigmoid of a gate q_proj gives beside its query "
                "(mobius' Qwen35Attention)",
                spec,
                "text.attention.output_gate",
            )
        )
    return reasons


def _first_layer_identity(text: TextDecoderSpec, design: TextDesign) -> tuple[str, ...]:
    """The attributes of the norms layer 0 lacks, as the generated layers name them (mobius'
    DecoderLayer its own names, a generated layer HF's)."""
    names = dict(text.norm.names)
    ours = {} if design.custom_layer else DECODER_LAYER_NORMS.get(design.placement, {})
    return tuple(ours.get(role, names[role]) for role in text.first_layer_without)


def _embedding_scale_expr(spec: ArchitectureSpec) -> str | None:
    factors = []
    if spec.text.embedding_scale == "sqrt_hidden":
        factors.append("config.hidden_size**0.5")
    if spec.text.scale_at("embedding") is not None:
        factors.append(f"config.{SCALE_FIELDS['embedding']}")
    return " * ".join(factors) or None


def _attention_scale_expr(spec: ArchitectureSpec) -> str | None:
    """The q.k scale as mobius config source: the generated config copies the HF key."""
    attention = spec.text.attention
    if attention is None:
        return None
    if attention.unscaled:
        return "1.0"
    if attention.scale_key == "query_pre_attn_scalar":
        return "config.query_pre_attn_scalar**-0.5"
    if attention.scale_key == "attention_multiplier":
        return "config.attention_multiplier"
    return None


def _scale_settings(spec: ArchitectureSpec) -> list[Setting]:
    """Copy each config multiplier into the mobius config field the generated code reads."""
    settings = []
    attention = spec.text.attention
    if attention is not None and attention.scale_key == "attention_multiplier":
        settings.append(
            Setting(
                "attention_multiplier",
                "config.attention_multiplier",
                _why("q.k scale", spec, "text.attention.scale"),
            )
        )
    for scale in spec.text.scales:
        settings.append(
            Setting(
                SCALE_FIELDS[scale.site],
                scale.expression(),
                _why(scale.describe(), spec, f"text.scales.{scale.site}"),
            )
        )
    return settings


def _moe_design(spec: ArchitectureSpec, prefix: str, reasons: list[str]) -> MoEDesign | None:
    from onboard.analysis.router import describe_router

    moe = spec.text.moe
    if moe is None:
        return None
    kind = router_kind(moe.router)
    gate_class, gate_args = GATES.get(kind, (f"{prefix}Router", "config"))
    description = describe_router(moe.router, values=False)
    reasons.append(
        _why(
            f"config.{moe.count_key} routed experts, config.{moe.top_k_key} per token: "
            f"{description}",
            spec,
            "text.moe.router",
        )
    )
    if moe.plain:
        reasons.append(_why("experts without a gate: down(act(up(x)))", spec, "text.moe.experts"))
    if moe.shared is not None and moe.shared.stacked:
        reasons.append(
            _why("shared experts, each scaled by its router weight", spec, "text.moe.shared")
        )
    elif moe.shared is not None:
        gated = "behind a sigmoid gate" if moe.shared.gated else "always added"
        plain = ", without a gate of its own" if moe.shared.plain else ""
        reasons.append(_why(f"a shared expert {gated}{plain}", spec, "text.moe.shared"))
    if moe.dense_rule != "none":
        reasons.append(
            _why(f"dense layers chosen by config.{moe.dense_rule}", spec, "text.mlp_kinds")
        )
    if moe.post_norm:
        reasons.append(_why("a norm of the MoE block's output", spec, "text.moe.post_norm"))
    glu = moe.block_glu
    if glu is not None:
        reasons.append(_why(glu_reason(glu), spec, moe.block_glu_path))
    return MoEDesign(
        gate_class=gate_class,
        gate_args=gate_args,
        generated_router=kind == "custom",
        router=moe.router,
        router_description=description,
        shared=moe.shared,
        dense_rule=moe.dense_rule,
        # one-block layers keep HF's names for the router, whose bias is then [experts] as is
        flat_correction=_correction_not_flat(spec) and spec.text.blocks is None,
        plain=moe.plain,
        transposed=moe.fused_transposed,
        post_norm=moe.post_norm,
        glu=glu,
        glu_routed=moe.glu is not None,
    )


def _correction_not_flat(spec: ArchitectureSpec) -> bool:
    """The checkpoint keeps the router's choice bias elsewhere in another shape than the
    router's [experts] (Ernie 4.5: [1, experts]; AFMoE's expert_bias is [experts] already)."""
    moe = spec.text.moe
    if moe is None or not moe.correction_names:
        return False
    shapes = dict(spec.weights.tensors)
    found = [
        shape
        for name, shape in shapes.items()
        if any(name.endswith(f".{c}") for c in moe.correction_names)
    ]
    return not found or any(len(shape) != 1 for shape in found)


def _bool_setting(
    spec: ArchitectureSpec, field: str, key: str | None, value: bool, path: str, what: str
) -> Setting:
    if key:
        return Setting(field, f"bool(config.{key})", _why(f"{what} from config.{key}", spec, path))
    state = "on" if value else "off"
    return Setting(field, repr(value), _why(f"{what} always {state}", spec, path))


def _settings(
    spec: ArchitectureSpec, profile: ClassProfile, text_design: TextDesign | None
) -> tuple[tuple[Setting, ...], tuple[ExtraField, ...]]:
    text = spec.text
    attention = text.attention
    settings = [
        *_attention_flags(spec),
        *_mlp_flags(spec),
        *_kv_heads(spec),
        *_mlp_width(spec),
        Setting(
            "rms_norm_eps",
            f"config.{text.norm.eps_key}" if text.norm.eps_key else repr(text.norm.eps),
            _why("norm epsilon", spec, "text.norm.eps"),
        ),
        Setting(
            "tie_word_embeddings",
            "bool(config.tie_word_embeddings)",
            _why("lm_head tied to the embeddings or not", spec, "text.tie_word_embeddings"),
        ),
    ]
    settings += _rope_pairing(spec)
    extra: list[ExtraField] = []
    kinds = text.distinct_layer_types
    if "sliding_attention" in kinds and text.sliding_window:
        settings.append(
            Setting(
                "sliding_window",
                f"config.{text.window_key}",
                _why("window of sliding layers", spec, "text.sliding_window"),
            )
        )
        if text.layer_types_key == "layer_types":
            layer_types = "list(config.layer_types)"
        elif text.layer_types_key == "attention_layers":  # GPT-Neo: global / local
            layer_types = (
                '["sliding_attention" if kind == "local" else "full_attention"'
                " for kind in config.attention_layers]"
            )
        else:
            layer_types = '["sliding_attention"] * config.num_hidden_layers'
        settings.append(
            Setting(
                "layer_types", layer_types, _why("which layers slide", spec, "text.layer_types")
            )
        )
    else:
        settings.append(Setting("sliding_window", "None", "no layer slides"))
    rope = dict(text.rope)
    settings += sliding_rope_settings(spec, extra)
    settings += reordered_rope_settings(spec, extra)
    if all(r.rope_type is None for r in rope.values()):
        settings.append(Setting("rope_type", "None", "no rotary embedding in the HF model (probe)"))
        settings.append(
            Setting(
                "partial_rotary_factor",
                "1.0",
                "unused: set because base classes build rotary tables in __init__",
            )
        )
    settings += rope_settings(spec)
    base_fields = _profile_config_fields(profile)
    softcap = attention and attention.softcap
    scale_key = attention and attention.scale_key
    if softcap:
        if "attn_logit_softcapping" not in base_fields:
            extra.append(ExtraField("attn_logit_softcapping", "float", "0.0"))
        settings.append(
            Setting(
                "attn_logit_softcapping",
                "config.attn_logit_softcapping",
                _why("attention logit soft-cap", spec, "text.attention.softcap"),
            )
        )
    if scale_key and "query_pre_attn_scalar" not in base_fields:
        extra.append(ExtraField("query_pre_attn_scalar", "float | None", "None"))
    if scale_key:
        settings.append(
            Setting(
                "query_pre_attn_scalar",
                f"config.{scale_key}",
                _why("q.k scale = query_pre_attn_scalar ** -0.5", spec, "text.attention.scale"),
            )
        )
    if text.final_logit_softcap:
        if "final_logit_softcapping" not in base_fields:
            extra.append(ExtraField("final_logit_softcapping", "float", "0.0"))
        settings.append(
            Setting(
                "final_logit_softcapping",
                "config.final_logit_softcapping",
                _why("final logit soft-cap", spec, "text.final_logit_softcap"),
            )
        )
    elif "final_logit_softcapping" in base_fields:
        settings.append(Setting("final_logit_softcapping", "0.0", "no final logit soft-capping"))
    settings += _scale_settings(spec)
    key = text.rope_layers_key
    if key:
        if key != "no_rope_layers":  # mobius' ArchitectureConfig has no_rope_layers already
            extra.append(ExtraField(key, "list[int] | None", "None"))
        settings.append(
            Setting(
                key,
                f"list(config.{key})",
                _why("which layers rotate", spec, "text.rope_layers_key"),
            )
        )
    settings += _moe_settings(spec, extra)
    settings += glu_settings(spec, extra)
    settings += gate_settings(spec, extra)
    settings += _mla_settings(spec, extra)
    settings += _head_transform_settings(spec, extra)
    mixer_fields, mixer_extra = mixer_settings(spec, text_design.mixers if text_design else ())
    settings += mixer_fields
    extra += mixer_extra
    settings += _attention_variant_settings(spec, extra)
    stack_settings, stack_extra = recurrence_settings(spec)
    settings += stack_settings
    extra += stack_extra
    set_fields = {s.field for s in settings}
    for field, expr in profile.init_needs:
        if field not in set_fields:
            reason = f"read by {profile.class_name}.__init__ (not by the generated layers)"
            settings.append(Setting(field, expr, reason))
    return tuple(settings), tuple(extra)


def _attention_flags(spec: ArchitectureSpec) -> list[Setting]:
    """The attention's flags, each from the config key HF reads or fixed as HF fixes it."""
    attention = spec.text.attention
    if attention is None:
        return []
    qk = {
        "none": "no q_norm / k_norm",
        "per_head": "q_norm / k_norm on each head",
        "full_width": "q_norm / k_norm on the full projection width",
    }[attention.qk_norm]
    return [
        Setting(
            "attn_qk_norm",
            repr(attention.qk_norm != "none"),
            _why(qk, spec, "text.attention.qk_norm"),
        ),
        Setting(
            "attn_qk_norm_full",
            repr(attention.qk_norm == "full_width"),
            _why(qk, spec, "text.attention.qk_norm"),
        ),
        _bool_setting(
            spec,
            "attn_qkv_bias",
            attention.bias_key("q"),
            attention.q_bias,
            "text.attention.q_bias",
            "q/k/v bias",
        ),
        _bool_setting(
            spec,
            "attn_o_bias",
            attention.bias_key("o"),
            attention.o_bias,
            "text.attention.o_bias",
            "o_proj bias",
        )
        if not attention.last_layer_o_bias
        else Setting(
            "attn_o_bias",
            "True",
            _why(
                "o_proj bias: HF adds one in the last layer only, the others are zeros",
                spec,
                "text.attention.last_layer_o_bias",
            ),
        ),
    ]


def _mlp_flags(spec: ArchitectureSpec) -> list[Setting]:
    """The MLP's bias and activation as HF's MLP reads them."""
    mlp = spec.text.mlp
    if mlp is None:
        return []
    return [
        _bool_setting(spec, "mlp_bias", mlp.bias_key, mlp.bias, "text.mlp.bias", "MLP bias"),
        Setting(
            "hidden_act",
            f"config.{mlp.activation_key}" if mlp.activation_key else repr(mlp.activation),
            _why("MLP activation", spec, "text.mlp.activation"),
        ),
    ]


def _kv_heads(spec: ArchitectureSpec) -> list[Setting]:
    attention = spec.text.attention
    if attention is None or not attention.kv_heads_expr:
        return []
    why = _why("k/v heads: one when multi_query", spec, "text.attention.multi_query")
    return [Setting("num_key_value_heads", attention.kv_heads_expr, why)]


def _mlp_width(spec: ArchitectureSpec) -> list[Setting]:
    mlp = spec.text.mlp
    if mlp is None or (mlp.width_expr == "config.intermediate_size" and not mlp.width_code):
        return []
    width = "cls._mlp_width(config)" if mlp.width_code else mlp.width_expr
    why = _why("MLP width", spec, "text.mlp.intermediate_size")
    return [Setting("intermediate_size", width, why)]


def _moe_settings(spec: ArchitectureSpec, extra: list[ExtraField]) -> list[Setting]:
    moe = spec.text.moe
    if moe is None:
        return []
    router = moe.router
    settings = [
        Setting(
            "num_local_experts",
            f"config.{moe.count_key}",
            _why("routed experts", spec, "text.moe.experts"),
        ),
        Setting("num_experts_per_tok", f"config.{moe.top_k_key}", "experts per token"),
        Setting(
            "moe_intermediate_size",
            f"config.{moe.width_key}",
            _why("width of each expert", spec, "text.moe.experts"),
        ),
        _bool_setting(
            spec,
            "norm_topk_prob",
            router.renormalize_key,
            router.renormalize,
            "text.moe.router",
            "renormalise the top-k weights",
        ),
    ]
    if router.routed_scaling_factor != 1.0:
        settings.append(
            Setting(
                "routed_scaling_factor",
                f"config.{router.scale_key}",
                _why("routing weights scale", spec, "text.moe.router"),
            )
        )
    if router.shared_logits:
        settings.append(
            Setting(
                "n_shared_experts",
                f"config.{router.shared_logits_key}",
                _why("shared experts the router scores", spec, "text.moe.router"),
            )
        )
    if router.jitter_key is not None:
        extra.append(ExtraField("router_jitter_noise", "float", "0.0"))
        why = _why("sparsemixer's relative margin", spec, "text.moe.router")
        settings.append(Setting("router_jitter_noise", f"config.{router.jitter_key}", why))
    if router.n_group > 1:
        settings.append(
            Setting("n_group", "config.n_group", _why("expert groups", spec, "text.moe.router"))
        )
        settings.append(
            Setting(
                "topk_group",
                "config.topk_group",
                _why("groups kept per token", spec, "text.moe.router"),
            )
        )
    if moe.shared is not None:
        width = " * ".join(f"config.{part.strip()}" for part in moe.shared.width_expr.split("*"))
        settings.append(
            Setting(
                "shared_expert_intermediate_size",
                width,
                _why("shared expert width", spec, "text.moe.shared"),
            )
        )
    if moe.dense_rule in LEADING_DENSE_KEYS:
        if moe.dense_rule == "num_dense_layers":  # mobius' config has first_k_dense_replace
            extra.append(ExtraField("num_dense_layers", "int", "0"))
        settings.append(
            Setting(
                moe.dense_rule,
                f"config.{moe.dense_rule}",
                _why("leading dense layers", spec, "text.mlp_kinds"),
            )
        )
    elif moe.dense_rule == "mlp_layer_types":
        extra.append(
            ExtraField("mlp_layer_types", "list[str]", "dataclasses.field(default_factory=list)")
        )
        settings.append(
            Setting(
                "mlp_layer_types",
                "list(config.mlp_layer_types)",
                _why("MoE layers: those listed as sparse", spec, "text.mlp_kinds"),
            )
        )
    elif moe.dense_rule == "moe_layer_interval":
        for key, default in (("interval", "1"), ("start_index", "0"), ("end_index", "-1")):
            extra.append(ExtraField(f"moe_layer_{key}", "int", default))
            settings.append(
                Setting(
                    f"moe_layer_{key}",
                    f"config.moe_layer_{key}",
                    _why("MoE layers: every interval-th from start to end", spec, "text.mlp_kinds"),
                )
            )
    elif moe.dense_rule == "expert_layer_period":
        for key, default in (("period", "1"), ("offset", "0")):
            extra.append(ExtraField(f"expert_layer_{key}", "int", default))
            settings.append(
                Setting(
                    f"expert_layer_{key}",
                    f"config.expert_layer_{key}",
                    _why(
                        "MoE layers: those at expert_layer_offset modulo the period",
                        spec,
                        "text.mlp_kinds",
                    ),
                )
            )
    elif moe.dense_rule == "mlp_only_layers":
        extra.append(
            ExtraField("mlp_only_layers", "list[int]", "dataclasses.field(default_factory=list)")
        )
        extra.append(ExtraField("decoder_sparse_step", "int", "1"))
        settings.append(
            Setting(
                "mlp_only_layers",
                "list(config.mlp_only_layers or [])",
                _why("layers kept dense", spec, "text.mlp_kinds"),
            )
        )
        settings.append(
            Setting(
                "decoder_sparse_step",
                "config.decoder_sparse_step",
                _why("every n-th layer is MoE", spec, "text.mlp_kinds"),
            )
        )
    return settings


def _head_transform_settings(spec: ArchitectureSpec, extra: list[ExtraField]) -> list[Setting]:
    """The head transform's activation and dense bias, from the config keys HF reads."""
    transform = spec.text.head_transform
    if transform is None:
        return []
    extra.append(ExtraField("head_transform_activation", "str", repr(transform.activation)))
    extra.append(ExtraField("head_transform_bias", "bool", repr(transform.bias)))
    activation = (
        f"config.{transform.activation_key}"
        if transform.activation_key
        else repr(transform.activation)
    )
    return [
        Setting(
            "head_transform_activation",
            activation,
            _why("head transform activation", spec, "text.head_transform"),
        ),
        _bool_setting(
            spec,
            "head_transform_bias",
            transform.bias_key,
            transform.bias,
            "text.head_transform",
            "head transform dense bias",
        ),
    ]


def _own_values_reasons(spec: ArchitectureSpec, attention: AttentionSpec) -> list[str]:
    """The attention's changes per layer kind and in its values, one line each."""
    reasons = []
    for kind in attention.kinds:
        changes = [f"{kind.kv_heads_factor}x the key/value heads"] * (kind.kv_heads_factor != 1)
        changes += ["a learned sink logit per head"] * bool(kind.sinks)
        what = f"{kind.kind} layers: {' and '.join(changes)}"
        reasons.append(_why(what, spec, "text.attention.kinds"))
    if attention.v_head_dim_key:
        what = f"value heads config.{attention.v_head_dim_key} wide, o_proj takes them"
        reasons.append(_why(what, spec, "text.attention.v_head_dim"))
    if attention.value_scale_key:
        what = f"values times config.{attention.value_scale_key} after v_proj"
        reasons.append(_why(what, spec, "text.attention.value_scale"))
    return reasons


def _attention_variant_settings(spec: ArchitectureSpec, extra: list[ExtraField]) -> list[Setting]:
    """The config values the generated attention variants read, from the keys HF reads: how
    many keys the dynamic mask leaves unmasked, the differential pair norm's epsilon."""
    attention = spec.text.attention
    if attention is None:
        return []
    settings = []
    mask = attention.dynamic_mask
    if mask is not None and mask.keep_window_key is not None:
        extra.append(ExtraField("keep_window_size", "int | None", "None"))
        path = "text.attention.dynamic_mask"
        why = _why("keys the dynamic mask keeps per row", spec, path)
        settings.append(Setting("keep_window_size", f"config.{mask.keep_window_key}", why))
    indexer = attention.indexer
    if indexer is not None:
        why = _why("the lightning indexer's sizes", spec, "text.attention.indexer")
        for field, key in (
            ("index_n_heads", indexer.heads_key),
            ("index_head_dim", indexer.head_dim_key),
            ("index_topk", indexer.topk_key),
        ):
            extra.append(ExtraField(field, "int", "0"))
            settings.append(Setting(field, f"config.{key}", why))
        if indexer.layers_key:
            extra.append(
                ExtraField(
                    indexer.layers_key, "list[str]", "dataclasses.field(default_factory=list)"
                )
            )
            why = _why("which layers run an indexer", spec, "text.attention.indexer")
            settings.append(Setting(indexer.layers_key, f"list(config.{indexer.layers_key})", why))
    if attention.v_head_dim_key is not None:
        why = _why("value heads' width", spec, "text.attention.v_head_dim")
        settings.append(Setting("v_head_dim", f"config.{attention.v_head_dim_key}", why))
    if attention.value_scale_key is not None:
        key = attention.value_scale_key
        extra.append(ExtraField("attention_value_scale", "float", "1.0"))
        why = _why("factor on the values after v_proj", spec, "text.attention.value_scale")
        expr = f"1.0 if config.{key} is None else config.{key}"
        settings.append(Setting("attention_value_scale", expr, why))
    differential = attention.differential
    if differential is not None:
        extra.append(ExtraField("pair_norm_eps", "float", "1e-6"))
        why = _why("epsilon of the pair norm", spec, "text.attention.differential")
        settings.append(Setting("pair_norm_eps", f"config.{differential.eps_key}", why))
    return settings


def _rope_pairing(spec: ArchitectureSpec) -> list[Setting]:
    """mobius keys ``rope_interleave`` on model_type lists (glm*, MLA): always set it."""
    rotating = [(kind, rope) for kind, rope in spec.text.rope if rope.rope_type is not None]
    if not rotating:
        return []
    kind, rope = rotating[0]
    what = "RoPE on interleaved pairs" if rope.interleaved else "RoPE rotates halves"
    return [
        Setting("rope_interleave", repr(rope.interleaved), _why(what, spec, f"text.rope.{kind}"))
    ]


def _mla_settings(spec: ArchitectureSpec, extra: list[ExtraField]) -> list[Setting]:
    attention = spec.text.attention
    if attention is None or attention.mla is None:
        return []
    why = _why("latent attention sizes", spec, "text.attention.mla")
    settings = [
        Setting(field, f"config.{field}", why)
        for field in (
            "q_lora_rank",
            "kv_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
        )
    ]
    extra.append(ExtraField("attention_scale", "float | None", "None"))
    scale_why = "qk_head_dim ** -0.5" + (
        ", times YaRN mscale squared" if attention.yarn_mscale else ""
    )
    settings.append(
        Setting(
            "attention_scale",
            "cls._mla_attention_scale(config)",
            _why(scale_why, spec, "text.attention.scale"),
        )
    )
    return settings


def _profile_config_fields(profile: ClassProfile) -> frozenset[str]:
    if profile.config_class == "Gemma2Config":
        return frozenset(
            {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"}
        )
    return frozenset()


def _flag_changes(spec: ArchitectureSpec, settings: tuple[Setting, ...]) -> tuple[str, ...]:
    attention = spec.text.attention
    lines = []
    if spec.text.mlp is not None and spec.text.mlp.bias:
        lines.append(_why("MLP biases", spec, "text.mlp.bias"))
    if attention is None:
        return tuple(lines)
    if attention.qk_norm != "none":
        width = "each head" if attention.qk_norm == "per_head" else "the full projection width"
        lines.append(
            _why(f"q_norm / k_norm over {width} before RoPE", spec, "text.attention.qk_norm")
        )
    if attention.q_bias or attention.o_bias:
        lines.append(
            _why(
                f"attention biases (q/k/v {attention.q_bias}, o {attention.o_bias})",
                spec,
                "text.attention.q_bias",
            )
        )
    if attention.softcap:
        lines.append(_why("attention logits soft-capped", spec, "text.attention.softcap"))
    return tuple(lines)


def _renames(spec: ArchitectureSpec, text_design: TextDesign | None) -> tuple[tuple[str, str], ...]:
    """HF names (norms, MLP projections) that differ from the names the generated layers use."""
    renames = list(spec.weights.renames)  # other top-level layouts first (GPT-NeoX, Falcon)
    renames += recurrence_renames(spec)
    final, o_name = spec.text.name_of("final_norm"), spec.text.name_of("o_proj")
    if final != "norm":
        renames.append((f"model.{final}.", "model.norm."))
    if o_name != "o_proj":
        renames.append((f".self_attn.{o_name}.", ".self_attn.o_proj."))
    last_bias = spec.text.attention and spec.text.attention.last_layer_o_bias
    if last_bias:  # a bare parameter: the name ends there
        renames.append((f".self_attn.{last_bias}", ".self_attn.o_proj.bias"))
    for role in ("q_proj", "k_proj", "v_proj", "q_norm", "k_norm"):
        if spec.text.name_of(role) != role:
            renames.append((f".self_attn.{spec.text.name_of(role)}.", f".self_attn.{role}."))
    moe = spec.text.moe
    if moe is not None and spec.text.blocks is None:  # per-expert names -> MoELayer's
        memory = {"gate_up": "experts.gate_up_proj", "down": "experts.down_proj"}
        for role, name in moe.fused_on_disk:  # to the in-memory names, split when loading
            if name != f"{moe.block_name}.{memory[role]}":
                renames.append((f".{name}", f".{moe.block_name}.{memory[role]}"))
        if moe.router_on_disk:
            renames.append(
                (f".{moe.router_on_disk}", f".{moe.block_name}.{moe.router_name}.weight")
            )
        for name in moe.correction_names:  # the generated router holds it
            renames.append((f".{name}", f".{moe.block_name}.{moe.router_name}.{_CORRECTION}"))
        if moe.block_name != "mlp":
            renames.append((f".{moe.block_name}.", ".mlp."))
        shared = moe.shared
        for role, hf_name in shared.projections if shared and not shared.stacked else ():
            if hf_name != f"{role}_proj":  # the generated MLP's names (w1 -> gate_proj ...)
                renames.append((f".{shared.name}.{hf_name}.", f".{shared.name}.{role}_proj."))
        for role, leaf in moe.expert_leaves:  # gate (none when plain), up, down
            if leaf != f"{role}_proj":
                renames.append((f".{leaf}.", f".{role}_proj."))
        if moe.router_name != "gate":
            renames.append((f".mlp.{moe.router_name}.", ".mlp.gate."))
    mlp = spec.text.mlp
    if mlp is not None:
        renames += _mlp_renames(mlp)
    placement = spec.text.norm.placement
    if text_design is not None and text_design.custom_layer:
        return tuple(renames)  # the generated layer uses the HF norm names
    expected = DECODER_LAYER_NORMS.get(placement, {})
    for role, hf_name in spec.text.norm.names:
        ours = expected.get(role)
        if ours and ours != hf_name:
            renames.append((f".{hf_name}.", f".{ours}."))
    return tuple(renames)


def _mlp_renames(mlp: MLPSpec) -> list[tuple[str, str]]:
    """HF's MLP names -> those of the mobius MLP the generated layers use."""
    renames = []
    ours_by_kind = {
        "plain": ("up_proj", "down_proj"),
        "fused_gate_up": ("gate_up_proj", "down_proj"),
        "gated": ("gate_proj", "up_proj", "down_proj"),  # LFM2's w1, w3, w2
    }
    if mlp.kind in ours_by_kind:  # FCMLP: up_proj, down_proj; FusedGateUpMLP: gate_up_proj ...
        for hf_name, ours in zip(mlp.projections, ours_by_kind[mlp.kind], strict=True):
            if hf_name != ours:
                renames.append((f".mlp.{hf_name}.", f".mlp.{ours}."))
    if mlp.learned_activation not in (None, "act_fn"):  # FCMLP's name for its activation
        renames.append((f".mlp.{mlp.learned_activation}.", ".mlp.act_fn."))
    return renames
