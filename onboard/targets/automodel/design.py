"""Decide the generated AutoModel package: names, the HF modules it builds on, what it adds.

The generated model keeps HF's module tree (so checkpoint names and layouts are HF's own) by
subclassing the architecture's HF attention and decoder layer and reusing its MLP and norms, the
pattern that gave bit-exact parity in AutoModel 0.7.0's ``qwen3``. It writes what AutoModel owns:
the model and causal-LM classes (backend, tie policy, capabilities, logits), the attention
forward (NeMo's RoPE and HF's attention dispatch), the RoPE tables, the scaled embedding, the
state-dict adapter. Every choice the spec drives carries the evidence behind it, which the
templates write next to the code.

An MoE model swaps HF's sparse block for AutoModel's own ``MoE`` (moe_design.py); the HF classes
and the reasons the comments give live in hf_facts.py.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from onboard.analysis.features import features
from onboard.analysis.probe import Probe
from onboard.errors import UnsupportedFeatureError
from onboard.flag_guards import FlagGuard
from onboard.hf_config import make_hf_config
from onboard.naming import class_prefix, module_name
from onboard.spec import ArchitectureSpec
from onboard.targets.automodel.dropout import Dropouts, design_dropouts
from onboard.targets.automodel.hf_facts import (
    HFNames,
    Reason,
    best,
    cite,
    class_location,
    source_line,
)
from onboard.targets.automodel.kept_attention import KeptAttention, kept_attention, kept_blockers
from onboard.targets.automodel.moe_design import (
    MOE_ATTRIBUTE,
    MoEDesign,
    moe_design,
    moe_reasons,
    sparse_block,
)
from onboard.targets.automodel.parallelism import Parallelism
from onboard.targets.automodel.router_training import RouterTraining
from onboard.targets.automodel.vision import VisionDesign, design_vision, hf_ties, text_view
from onboard.targets.base import Candidate, Proposal
from onboard.token_mixers import ATTENTION_KINDS, FEED_FORWARD_KINDS

if TYPE_CHECKING:
    from onboard.targets.automodel.kept_base import KeptBase

MODELS_PACKAGE = "nemo_automodel.components.models"
LAYER_ZERO = "model.layers.0"


@dataclass(frozen=True)
class HFLayout:
    """HF's attribute names, which the generated classes keep: they subclass HF's modules.

    The analysis sees every decoder through the Llama layout (``embed_tokens``, ``self_attn``,
    ``mlp``, ``norm``); the generated code must use the names HF's own modules have.
    """

    embeddings: str = "embed_tokens"  # of the base model
    final_norm: str = "norm"
    attention: str = "self_attn"  # of a decoder layer
    mlp: str = "mlp"
    # Each layer is one residual block holding attention, a recurrent mixer or an MLP under one
    # attribute (NemotronH's mixer), instead of Llama's attention and MLP
    one_block: bool = False
    # Checkpoint prefix -> in-memory prefix, as transformers renames on load and back on save
    # (NemotronH checkpoints say backbone., its model says model.)
    prefixes: tuple[tuple[str, str], ...] = ()
    # The attention's own names where they are not Llama's: role -> attribute (LFM2: o_proj ->
    # out_proj, q_norm -> q_layernorm)
    attention_names: tuple[tuple[str, str], ...] = ()
    # The causal LM's attributes: its base model (HF's own, kept whole, under HF's name where
    # the tree is not Llama's: GPT-2's transformer) and its head (GPT-NeoX: embed_out)
    base: str = "model"
    head: str = "lm_head"

    def attr(self, role: str) -> str:
        """HF's attribute of the attention for ``role`` (q_proj, ..., o_proj, q_norm, k_norm)."""
        return dict(self.attention_names).get(role, role)

    @property
    def embeddings_weight(self) -> str:
        return f"{self.base}.{self.embeddings}.weight"

    @property
    def head_weight(self) -> str:
        return f"{self.head}.weight"

    @property
    def saved_head_weight(self) -> str:
        """The head's weight as the checkpoint names it (GPT-NeoX's: embed_out.weight)."""
        for disk, memory in self.prefixes:
            if self.head_weight.startswith(memory):
                return disk + self.head_weight.removeprefix(memory)
        return self.head_weight


@dataclass(frozen=True)
class MixerDesign:
    """A recurrent token mixer the generated layers keep as HF's own module."""

    label: str  # the HF config's layer_types entry of its layers (Qwen3-Next: linear_attention)
    kind: str  # onboard's kind (gated_deltanet, mamba2, ...)
    attribute: str  # the decoder layer's attribute holding it (linear_attn)
    hf_class: str
    where: str  # modeling_x.py:N of the class


@dataclass(frozen=True)
class ModelDesign:
    arch: str
    model_type: str
    module: str  # package name under nemo_automodel.components.models
    prefix: str
    hf: HFNames
    qk_norm: str  # none, per_head, full_width
    layer_rule: str  # config (config.layer_types), sliding_window (all slide when set), full
    layer_kinds: tuple[str, ...]
    # One RoPE table per attention kind (rope_utils.py), asked for by kind as HF's rotary is
    per_kind_rope: bool
    embedding_scale: bool
    attention_softcap: bool
    final_softcap: bool
    norm_eps: str  # the expression the final norm's eps is built from
    closest: Candidate | None
    hidden: tuple[str, ...]
    reasons: dict[str, Reason]
    changes: tuple[Reason, ...]  # what the generated code adds to the closest class
    switches: tuple[Reason, ...] = ()  # config flags HF honours that the generated code refuses
    # Config flags' values the generated code was not proved on (parity ran with them as
    # analysed only, or tried True and False only): its __init__ refuses them, as mobius' does
    guards: tuple[FlagGuard, ...] = ()
    moe: MoEDesign | None = None
    mixers: tuple[MixerDesign, ...] = ()  # a hybrid's recurrent mixers, kept as HF's modules
    output_gate: bool = False  # q_proj also gives a gate: output * sigmoid(gate), per head
    # HF's attention norms the heads' output before o_proj with this module (BitNet's
    # attn_sub_norm); HF's MLP keeps its own norm before down_proj
    attention_sub_norm: str | None = None
    partial_rope: bool = False  # RoPE rotates the first dims of each head only
    layout: HFLayout = HFLayout()
    # Attention kinds without RoPE: beside kinds with it (Cohere2) or all of them (NemotronH)
    nope_kinds: tuple[str, ...] = ()
    ties: bool = True  # HF's causal LM ties the head when the config says so (NemotronH never)
    # HF's attention dropout probability, as Python over the attention (LFM2's has none)
    attention_dropout: str | None = "self.attention_dropout"
    # The dropout keys HF's modules read and where the generated model drops by each (dropout.py)
    dropouts: Dropouts = field(default_factory=Dropouts)
    # RoPE rotates adjacent pairs (x0, x1), (x2, x3)... instead of the two halves (Cohere, GLM);
    # hf_tables_interleaved: HF's own cos/sin tables repeat each frequency over a pair (Cohere)
    # where NeMo's (and GLM's) repeat them over the halves
    interleaved_rope: bool = False
    hf_tables_interleaved: bool = False
    # Config multipliers the generated model applies (Python over ``self.config``); HF's own
    # decoder layer and attention apply the residual and attention ones
    embedding_multiplier: str | None = None
    logits_multiplier: str | None = None
    # HF scales the head's input, not its output (MiniCPM3: lm_head(h / logits_scaling)): equal
    # in exact arithmetic, not in fp32
    head_input_scaled: bool = False
    lm_head_bias: bool = False  # the head adds a bias (Phi)
    # HF's decoder layer is told its kind by its model (Bamba: layer_type=), not the config
    layer_type_argument: bool = False
    layer_returns_tuple: bool = False  # HF's decoder layer returns (hidden states, weights)
    # One projection gives q, k and v (HF's attribute): their rows one after the other
    # (concatenated: Phi-3) or head by head (per_head: Persimmon); HF's module keeps it fused
    fused_qkv: str | None = None
    fused_qkv_attr: str = ""
    # HF's rotary embedding is MRoPE over (t, h, w) positions (Qwen3.5's text model): text
    # positions are equal in all three, where it computes 1-D RoPE
    mrope: bool = False
    # A VLM: the classes above are its text backbone (prefix ``<Name>Text``), and the registered
    # class holds HF's tower and projector beside it
    vision: VisionDesign | None = None
    qk_norm_after_rope: bool = False  # the per-head q/k norms apply to the rotated q, k (HunYuan)
    qk_norm_each_head: bool = False  # the q/k norms hold a weight row per head (Cohere's)
    # HF's attention and rotary kept whole, for the features its forward computes that the
    # generated one does not write (multi-head latent attention, differential attention, ...)
    kept_attention: KeptAttention | None = None
    # HF's model always materialises the causal mask (allow_is_causal_skip=False): Doge's
    # attention adds its dynamic mask onto it
    materialised_mask: bool = False
    # HF's causal LM runs SDPA attention (GraniteSWA's, Bloom's, CodeGen's do not: eager only)
    hf_sdpa: bool = True
    # HF's base model kept whole (a tree not Llama's, kept_base.py): the generated code is the
    # causal LM around it, and the adapter and tests only
    kept_base: KeptBase | None = None
    # The capability flags copied from the closest class (parallelism.py); None for a VLM
    parallelism: Parallelism | None = None

    @property
    def qk_norm_before_rope(self) -> str:
        """The q/k norm the projections apply before RoPE ("none" when it comes after)."""
        return "none" if self.qk_norm_after_rope else self.qk_norm

    @property
    def attention_kinds(self) -> tuple[str, ...]:
        """The layer kinds that attend (and so have RoPE tables and masks of their own)."""
        return tuple(k for k in self.layer_kinds if k in ATTENTION_KINDS)

    @property
    def rope_kinds(self) -> tuple[str, ...]:
        """The attention kinds whose layers rotate q and k."""
        return tuple(k for k in self.attention_kinds if k not in self.nope_kinds)

    @property
    def rope(self) -> bool:
        """False when no layer has RoPE (NemotronH's attention has no positions)."""
        return bool(self.rope_kinds)

    @property
    def package(self) -> str:
        return f"{MODELS_PACKAGE}.{self.module}"

    @property
    def text_class(self) -> str:
        """The causal LM over the generated decoder (a VLM's text-only model)."""
        return f"{self.prefix}ForCausalLM"

    @property
    def text_adapter(self) -> str:
        return f"{self.prefix}StateDictAdapter"

    @property
    def model_class(self) -> str:
        """The class the registry maps the architecture to."""
        return self.vision.model_class if self.vision else self.text_class

    @property
    def adapter_class(self) -> str:
        return self.vision.adapter_class if self.vision else self.text_adapter

    @property
    def text_arch(self) -> str:
        """The text model's architecture (the registered one, but for a VLM)."""
        return self.hf.causal_lm if self.vision else self.arch

    @property
    def has_layers_module(self) -> bool:
        return self.embedding_scale

    @property
    def sliding(self) -> bool:
        return "sliding_attention" in self.layer_kinds

    def why(self, key: str) -> str:
        return str(self.reasons[key]) if key in self.reasons else ""


def design_model(
    spec: ArchitectureSpec,
    proposal: Proposal,
    tiny_config: dict[str, Any],
    probe: Probe,
    flagged: tuple[ArchitectureSpec, ...] = (),
) -> ModelDesign:
    """The design for ``spec``; raises UnsupportedFeatureError for what cannot be expressed.

    ``flagged``: the specs under the config flags' other values, which the same code runs."""
    if proposal.blockers:
        raise UnsupportedFeatureError(
            f"the AutoModel generator cannot express {len(proposal.blockers)} feature(s) of "
            f"{spec.model_type}; nothing was written",
            proposal.blockers,
        )
    if spec.vision is not None:
        return _vlm_design(spec, proposal, tiny_config, probe)
    from onboard.targets.automodel.kept_base import keeps_base, kept_base_design

    if keeps_base(spec):
        return kept_base_design(spec, proposal, tiny_config, probe)
    layout = hf_layout(spec)
    hf = hf_names(spec, probe.model_class, dict(probe.modules), layout)
    text = spec.text
    reasons = _reasons(spec, hf)
    kinds = text.distinct_layer_types
    moe = None
    if text.moe is not None:
        moe = moe_design(spec, hf, probe)
        reasons.update(moe_reasons(spec, hf, moe))
    design = ModelDesign(
        arch=spec.source.architecture,
        model_type=spec.model_type,
        module=module_name(spec.model_type),
        prefix=class_prefix(spec.source.architecture, spec.model_type),
        hf=hf,
        qk_norm=text.attention.qk_norm,
        layer_rule=_layer_rule(tiny_config, kinds),
        layer_kinds=kinds,
        # HF's rotary asked for a kind's table reads config.rope_parameters[kind], also where
        # every kind rotates alike (Olmo3) or only one kind is in use (Mellum)
        per_kind_rope=len(distinct_ropes(text)) > 1
        or _takes("layer_type", hf, hf.rotary, "forward"),
        embedding_scale=text.embedding_scale == "sqrt_hidden",
        attention_softcap=bool(text.attention.softcap),
        final_softcap=bool(text.final_logit_softcap) or "final_softcap" in reasons,
        norm_eps=f"config.{text.norm.eps_key}" if text.norm.eps_key else repr(text.norm.eps),
        closest=proposal.chosen,
        hidden=proposal.hidden,
        reasons=reasons,
        changes=_changes(spec, proposal.chosen),
        switches=_switches(hf, moe.training.handled if moe else ()),
        moe=moe,
        mixers=mixer_designs(spec, hf, tiny_config, probe),
        output_gate=text.attention.output_gate,
        attention_sub_norm=text.attention.sub_norm,
        partial_rope=any(r.partial_rotary_factor != 1.0 for _, r in text.rope),
        layout=layout,
        nope_kinds=tuple(k for k, r in text.rope if r.rope_type is None),
        ties=_hf_ties(hf),
        attention_dropout=_attention_dropout(hf),
        mrope=bool(hf.rotary) and "mrope_section" in _hf_source(hf, hf.rotary),
        interleaved_rope=any(r.interleaved for _, r in text.rope),
        hf_tables_interleaved=bool(hf.rotary) and "repeat_interleave" in _hf_source(hf, hf.rotary),
        embedding_multiplier=_multiplier(text, "embedding"),
        lm_head_bias=text.lm_head_bias,
        layer_type_argument=_takes("layer_type", hf, hf.decoder_layer, "__init__"),
        layer_returns_tuple="return hidden_states, " in _hf_source(hf, hf.decoder_layer),
        fused_qkv=text.attention.fused_qkv_layout if text.attention.fused_qkv else None,
        fused_qkv_attr=text.attention.fused_qkv or "",
        logits_multiplier=_multiplier(text, "logits"),
        head_input_scaled=_head_input_scaled(spec, hf),
        qk_norm_after_rope=text.attention.qk_norm_after_rope,
        qk_norm_each_head=text.attention.qk_norm_each_head,
        kept_attention=kept_attention(spec, reasons.get("mla"), flagged),
        materialised_mask=source_line(hf.module, "allow_is_causal_skip=False") is not None,
        hf_sdpa=hf_sdpa(hf),
    )
    if design.kept_attention is not None and (refused := kept_blockers(design)):
        raise UnsupportedFeatureError(
            f"HF's attention kept whole ({design.kept_attention}) cannot be given its tables",
            refused,
        )
    return with_dropouts(design, probe, tiny_config)


def with_dropouts(design: ModelDesign, probe: Probe, tiny_config: dict[str, Any]) -> ModelDesign:
    """``design`` with HF's dropouts placed; the keys it does not drop by join its refused
    switches (a config setting one is refused, not half-honoured in training)."""
    found = design_dropouts(design, probe, tiny_config)
    refused = tuple(
        Reason(key, found.reads_of(key)[0].where)
        for key in found.not_honoured
        if key not in {s.text for s in design.switches}
    )
    return replace(design, dropouts=found, switches=design.switches + refused)


def _vlm_design(
    spec: ArchitectureSpec, proposal: Proposal, tiny_config: dict[str, Any], probe: Probe
) -> ModelDesign:
    """The text backbone designed as the causal LM of its own type, under the VLM's names."""
    text_spec = text_view(spec, probe.model_class)
    text = design_model(text_spec, proposal, dict(tiny_config["text_config"]), probe)
    vision = design_vision(spec, hf_ties(spec))
    # the text dropouts are placed for text-only causal LMs: a VLM's tests do not train them
    handled = text.moe.training.handled if text.moe else ()
    text = replace(text, dropouts=Dropouts(), switches=_switches(text.hf, handled))
    if text.moe is not None:  # the VLM's forward has no load-balancing loss: its flags stay refused
        moe = replace(text.moe, training=RouterTraining())
        text = replace(text, moe=moe, switches=_switches(text.hf))
    return replace(
        text,
        arch=spec.source.architecture,
        model_type=spec.model_type,
        module=module_name(spec.model_type),
        prefix=f"{vision.prefix}Text",
        vision=vision,
    )


def distinct_ropes(text: Any) -> set[tuple[Any, ...]]:
    """The different RoPEs the layer kinds apply (kinds without RoPE left out): a kind that
    rotates another share of each head needs a table of its own width."""
    return {
        (r.rope_type, r.theta, r.partial_rotary_factor, r.scaling)
        for _, r in text.rope
        if r.rope_type is not None
    }


def _multiplier(text: Any, site: str) -> str | None:
    scale = text.scale_at(site)
    return scale.expression("self.config") if scale is not None else None


def _head_input_scaled(spec: ArchitectureSpec, hf: HFNames) -> bool:
    """Whether HF's causal LM applies the logits scale to the hidden states before the head
    (read as source: ``hidden_states = hidden_states / self.config.logits_scaling``)."""
    scale = spec.text.scale_at("logits")
    if scale is None or hf.view_of:
        return False
    key = re.escape(scale.key)
    pattern = rf"hidden_states\s*=\s*hidden_states\s*[*/]\s*self\.config\.{key}\b"
    return re.search(pattern, _hf_source(hf, hf.causal_lm)) is not None


def _mlp_said(mlp: Any) -> str:
    """The MLP in words; a learned activation (Apertus' xielu) is HF's module, kept whole."""
    said = f"{mlp.kind} MLP, {mlp.activation}"
    if mlp.learned_activation:
        said += f" (HF's {mlp.learned_activation} module, its learned parameters included)"
    return said


def _attention_dropout(hf: HFNames) -> str | None:
    """Where HF's attention reads its dropout probability (read as source), or None."""
    source = _hf_source(hf, hf.attention)
    if "self.attention_dropout = config.attention_dropout" in source:
        return "self.attention_dropout"
    if "config.attention_dropout" in source:  # Persimmon keeps an nn.Dropout under that name
        return "self.config.attention_dropout"
    return None


def _takes(parameter: str, hf: HFNames, class_name: str, method: str) -> bool:
    """Whether HF's ``class_name.method`` has the parameter (False without such a class)."""
    if not class_name:
        return False
    return parameter in inspect.signature(getattr(_hf_class(hf, class_name), method)).parameters


def _hf_source(hf: HFNames, class_name: str) -> str:
    return inspect.getsource(_hf_class(hf, class_name))


def _hf_ties(hf: HFNames) -> bool:
    """Whether HF's causal LM ties its head to the embeddings (it lists the tied keys); a
    view's head is tied as its VLM's (``lm_head`` on the text embeddings)."""
    if hf.view_of:
        return True
    return bool(getattr(_hf_class(hf, hf.causal_lm), "_tied_weights_keys", None))


def hf_sdpa(hf: HFNames) -> bool:
    """Whether HF's causal LM takes SDPA attention (a VLM's text view is onboard's own class)."""
    causal_lm = getattr(importlib.import_module(hf.module), hf.causal_lm, None)
    return bool(getattr(causal_lm, "_supports_sdpa", True))


def _hf_class(hf: HFNames, class_name: str) -> type:
    return getattr(importlib.import_module(hf.module), class_name)


def mixer_designs(
    spec: ArchitectureSpec, hf: HFNames, tiny_config: dict[str, Any], probe: Probe
) -> tuple[MixerDesign, ...]:
    """Each recurrent kind's HF label, layer attribute and class, read on the tiny model.

    The tiny config labels its layers as HF does (``linear_attention``) and the spec by what
    they compute (``gated_deltanet``); the layers of one kind pair the two up.
    """
    if not spec.text.mixers.in_use():
        return ()
    labels = list(getattr(make_hf_config(tiny_config), "layer_types", None) or ())
    if not labels:
        raise UnsupportedFeatureError(
            f"{spec.model_type} names its layer kinds without config.layer_types: the generated "
            "AutoModel layers read their kind from there"
        )
    modules = dict(probe.modules)
    norms = {n.class_name for n in probe.layer_norms}
    found: dict[str, MixerDesign] = {}
    for index, label in enumerate(labels):
        kind = spec.text.kind_of_label(label)
        if label in ATTENTION_KINDS or label in found or kind in FEED_FORWARD_KINDS:
            continue
        layer = f"model.layers.{index}"
        children = [
            (name.rsplit(".", 1)[-1], cls)
            for name, cls in modules.items()
            if name.startswith(f"{layer}.") and name.count(".") == 3
        ]
        mixers = [(a, c) for a, c in children if a != MOE_ATTRIBUTE and c not in norms]
        if len(mixers) != 1:
            raise UnsupportedFeatureError(
                f"cannot tell the token mixer of {layer} ({label})",
                tuple(f"{layer}.{a}: {c}" for a, c in mixers),
            )
        attribute, cls = mixers[0]
        found[label] = MixerDesign(
            label=label,
            kind=kind if kind in spec.text.mixers.in_use() else _mixer_kind(spec, label, labels),
            attribute=attribute,
            hf_class=cls,
            where=class_location(hf, cls),
        )
    return tuple(found.values())


def _mixer_kind(spec: ArchitectureSpec, label: str, labels: list[str]) -> str:
    """onboard's kind for HF's ``label``: the one recurrent kind in use, or refuse."""
    kinds = spec.text.mixers.in_use()
    if len(kinds) == 1:
        return kinds[0]
    raise UnsupportedFeatureError(
        f"layers labelled {label!r} among {sorted(set(labels))}: more than one recurrent kind "
        f"({', '.join(kinds)}) to pair with HF's labels"
    )


def with_name(design: ModelDesign, name: str | None) -> ModelDesign:
    """``--name``: the package and class names come from ``name`` instead of the model."""
    if name is None:
        return design
    prefix = class_prefix("", name)
    if design.vision is not None:
        vision = replace(design.vision, prefix=prefix)
        return replace(design, module=module_name(name), prefix=f"{prefix}Text", vision=vision)
    return replace(design, module=module_name(name), prefix=prefix)


def hf_layout(spec: ArchitectureSpec) -> HFLayout:
    """HF's names for what the analysis sees under the Llama layout's; refuses any other rename.

    The view renames HF's embeddings and final norm (``model.embeddings.`` ->
    ``model.embed_tokens.``); transformers' own conversion renames a checkpoint prefix
    (``backbone.`` -> ``model.``), which the adapter undoes.
    """
    parts, unknown = _layout_parts(spec)
    if unknown:
        raise UnsupportedFeatureError(
            f"{spec.model_type} keeps its decoder under names the AutoModel generator does not "
            f"write ({LAYOUT_WHY})",
            unknown,
        )
    blocks = spec.text.blocks
    roles = ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm")
    return HFLayout(
        embeddings=parts.get("model.embed_tokens.", "embed_tokens"),
        final_norm=dict(spec.text.names).get("final_norm") or parts.get("model.norm.", "norm"),
        attention=blocks.block if blocks else parts.get(".self_attn.", "self_attn"),
        mlp=blocks.block if blocks else parts.get(".mlp.", "mlp"),
        one_block=blocks is not None,
        prefixes=checkpoint_prefixes(spec.model_type),
        attention_names=tuple((r, a) for r, a in spec.text.names if r in roles and r != a),
    )


LAYOUT_WHY = (
    "it keeps HF's model.embed_tokens-style tree, renaming only the embeddings, the final norm "
    "and a checkpoint prefix"
)


def _layout_parts(spec: ArchitectureSpec) -> tuple[dict[str, str], tuple[str, ...]]:
    """The analysis' Llama-layout parts HF names otherwise (part -> HF's name), and the renames
    the generated code cannot keep (each as one line)."""
    prefixes = checkpoint_prefixes(spec.model_type)
    parts: dict[str, str] = {}
    unknown = []
    for source, target in spec.weights.renames:
        if (source, target) in prefixes:
            continue
        if source.startswith("model.") and target in ("model.embed_tokens.", "model.norm."):
            parts[target] = source.removeprefix("model.").rstrip(".")
        elif re.fullmatch(r"\.\w+\.", source) and target in (".self_attn.", ".mlp."):
            parts[target] = source.strip(".")  # a layer's attribute (LFM2: feed_forward)
        else:
            unknown.append(f"{source}* is the analysis' {target}*")
    return parts, tuple(unknown)


def layout_blocker(spec: ArchitectureSpec) -> str | None:
    """The module-tree refusal as one blocker line, found before any design work (so the
    re-onboarding benchmark counts it beside the feature refusals), or None."""
    _, unknown = _layout_parts(spec)
    if not unknown:
        return None
    return f"HF's module tree under other names ({'; '.join(unknown)}): {LAYOUT_WHY}"


def checkpoint_prefixes(model_type: str, *classes: str) -> tuple[tuple[str, str], ...]:
    """transformers' load-time renames of a leading prefix, (disk, memory), for ``model_type``
    and the HF ``classes`` named (GPT-NeoX's causal LM loads ``embed_out.`` as ``lm_head.``)."""
    from transformers.conversion_mapping import WeightRenaming, get_checkpoint_conversion_mapping

    found = []
    for key in (model_type, *classes):
        for rule in get_checkpoint_conversion_mapping(key) or ():
            if not isinstance(rule, WeightRenaming):
                continue
            for source, target in zip(rule.source_patterns, rule.target_patterns, strict=False):
                if source.startswith("^"):  # anchored: the prefix as a plain string
                    source = source.removeprefix("^").replace("\\.", ".")
                plain = re.fullmatch(r"\w+\.", source) and re.fullmatch(r"\w+\.", target)
                if plain:
                    found.append((source, target))
    return tuple(found)


def hf_modeling_module(spec: ArchitectureSpec) -> tuple[str, str, Any]:
    """HF's modeling file for ``spec`` (name, import path, module): what the code builds on."""
    source_file = next((n for n, _ in spec.source.hf_files if n.startswith("modeling_")), None)
    if source_file is None:
        raise UnsupportedFeatureError(
            f"no HF modeling file for {spec.model_type}: nothing to build the AutoModel code on"
        )
    package = source_file.removeprefix("modeling_").removesuffix(".py")
    module_path = f"transformers.models.{package}.{source_file.removesuffix('.py')}"
    try:
        return source_file, module_path, importlib.import_module(module_path)
    except ImportError as exc:
        raise UnsupportedFeatureError(f"cannot import {module_path}: {exc}") from None


def pretrained_base(owner: Any, module_path: str) -> type | None:
    """HF's ``...PreTrainedModel`` class ``owner`` derives from in its own modeling module."""
    return next(
        (
            c
            for c in getattr(owner, "__mro__", ())
            if c.__name__.endswith("PreTrainedModel") and c.__module__ == module_path
        ),
        None,
    )


def hf_names(
    spec: ArchitectureSpec, causal_lm: str, modules: dict[str, str], layout: HFLayout = HFLayout()
) -> HFNames:
    """The HF classes the probe found, checked importable from the modeling file they came from."""
    source_file, module_path, module = hf_modeling_module(spec)
    layer_classes = {c for n, c in modules.items() if n.count(".") == 2 and ".layers." in n}
    if len(layer_classes) > 1:
        raise UnsupportedFeatureError(
            "decoder layers of different classes",
            tuple(f"{c} at {source_file}" for c in sorted(layer_classes)),
        )
    # a layout view's base model is a stand-in: the causal LM's own base class says then
    owner = getattr(module, modules.get("model", ""), None) or getattr(module, causal_lm, None)
    pretrained_class = pretrained_base(owner, module_path)
    pretrained = pretrained_class.__name__ if pretrained_class else None
    decoder_layer = modules.get(LAYER_ZERO, "")
    if not hasattr(module, decoder_layer):  # a layout view's stand-in: HF names its layer class
        layer_classes = tuple(getattr(pretrained_class, "_no_split_modules", None) or ())
        if len(layer_classes) > 1:  # Jamba: one class for attention layers, one for Mamba
            raise UnsupportedFeatureError(
                "decoder layers of different classes: the generated model subclasses one",
                tuple(f"{c} at {source_file}" for c in layer_classes),
            )
        decoder_layer = next(iter(layer_classes), "")
    from transformers import CONFIG_MAPPING

    from onboard.analysis.vision.backbone import is_causal_view

    view_of = ""
    if not hasattr(module, causal_lm) and is_causal_view(causal_lm):
        view_of = modules.get("model", "")
    sparse = sparse_block(modules)
    names = HFNames(
        module=module_path,
        source_file=source_file,
        causal_lm=causal_lm,
        pretrained=pretrained or "",
        decoder_layer=decoder_layer,
        attention=_first_layer_module(modules, "self_attn"),
        # an all-sparse layer under another name has no mlp: its MoE block (Granite MoE)
        mlp=_first_layer_module(modules, "mlp") or (sparse[1] if sparse else ""),
        # the view calls a renamed final norm model.norm (NemotronH), else keeps HF's name (Phi)
        norm=_torch_or_hf(
            module, modules.get(f"model.{layout.final_norm}") or modules.get("model.norm", "")
        ),
        rotary=modules.get("model.rotary_emb", ""),
        embedding=modules.get("model.embed_tokens", ""),
        config=CONFIG_MAPPING[spec.model_type].__name__,
        sparse_block=sparse[1] if sparse else "",
        view_of=view_of,
    )
    wanted = {
        "causal LM": names.view_of or names.causal_lm,
        "pretrained base": names.pretrained,
        "decoder layer": names.decoder_layer,
        "attention": names.attention,
        "MLP": names.mlp,
        "final norm": names.norm,
    }
    if distinct_ropes(spec.text):
        wanted["rotary embedding"] = names.rotary
    if spec.text.moe is not None:
        wanted["sparse MoE block"] = names.sparse_block
    missing = tuple(
        f"{role} class {cls or '(not found by the probe)'} in {module_path}"
        for role, cls in wanted.items()
        if not cls or not (hasattr(module, cls) or cls.startswith("nn."))
    )
    if missing:
        raise UnsupportedFeatureError("the HF modules to build on are not all importable", missing)
    return names


def _torch_or_hf(module: Any, class_name: str) -> str:
    """``nn.LayerNorm`` for a torch class HF uses as is (Phi's final norm), else HF's name."""
    import torch

    if class_name and not hasattr(module, class_name) and hasattr(torch.nn, class_name):
        return f"nn.{class_name}"
    return class_name


def _first_layer_module(modules: dict[str, str], attribute: str) -> str:
    """The class of the first decoder layer's ``attribute`` (a hybrid's layer 0 may not attend)."""
    pattern = re.compile(rf"model\.layers\.\d+\.{attribute}")
    return next((cls for name, cls in modules.items() if pattern.fullmatch(name)), "")


def _layer_rule(tiny_config: dict[str, Any], kinds: tuple[str, ...]) -> str:
    """How the generated code derives each layer's attention kind, as the HF config does."""
    config = make_hf_config(tiny_config)
    if getattr(config, "layer_types", None):
        return "config"
    if kinds == ("sliding_attention",):
        return "sliding_window"
    return "full"


def _reasons(spec: ArchitectureSpec, hf: HFNames) -> dict[str, Reason]:
    text = spec.text
    qk = {
        "none": "no q/k norm",
        "per_head": "q_norm / k_norm over each head, before RoPE",
        "full_width": "q_norm / k_norm over the full projection width, before RoPE",
    }[text.attention.qk_norm]
    if text.attention.qk_norm_after_rope:
        qk = qk.replace("before RoPE", "after RoPE (on the rotated q and k)")
    scale_key = text.attention.scale_key
    power = text.attention.scale_power
    scale = (
        f"config.{scale_key}" + (f" ** {power:g}" if power != 1 else "")
        if scale_key
        else "head_dim ** -0.5"
    )
    reasons = {} if text.attention.mla is None else {"mla": _mla_reason(spec, hf)}
    reasons |= {
        "qk_norm": Reason(
            qk,
            cite(spec, "text.attention.qk_norm_after_rope") or cite(spec, "text.attention.qk_norm"),
        ),
        "layer_types": Reason("attention kind of every layer", cite(spec, "text.layer_types")),
        "scale": Reason(
            f"q.k scaled by {scale} (self.scaling, set by the HF __init__)",
            cite(spec, "text.attention.scale") or cite(spec, "text.attention.head_dim"),
        ),
        "norm": Reason(
            f"{hf.norm}: {text.norm.kind} norm"
            + (" scaling by (1 + w)" if text.norm.weight_offset else ""),
            cite(spec, "text.norm.weight_offset"),
        ),
        "placement": Reason(
            f"{text.norm.placement}-norm layers, as {hf.decoder_layer} places them",
            cite(spec, "text.norm.placement"),
        ),
        "tie": Reason(
            f"tie_word_embeddings={text.tie_word_embeddings} in the checkpoint"
            + ("; lm_head.weight is not saved" if text.tie_word_embeddings else ""),
            cite(spec, "text.tie_word_embeddings"),
        ),
        "mlp": Reason(_mlp_said(text.mlp), cite(spec, "text.mlp.kind")),
    }
    if text.sliding_window:
        reasons["sliding_window"] = Reason(
            "sliding layers attend to config.sliding_window tokens",
            cite(spec, "text.sliding_window"),
        )
    if text.embedding_scale == "sqrt_hidden":
        reasons["embedding_scale"] = Reason(
            "token embeddings x sqrt(hidden_size), in the weight dtype as HF rounds it",
            cite(spec, "text.embedding_scale"),
        )
    for kind, rope in text.rope:
        said = f"RoPE of {kind} layers as config.rope_parameters sets it"
        if rope.rope_type is None:
            said = f"{kind} layers have no positions (no RoPE)"
        reasons[f"rope.{kind}"] = Reason(said, cite(spec, f"text.rope.{kind}"))
        if rope.interleaved:
            reasons["interleaved_rope"] = Reason(
                "RoPE rotates adjacent pairs of each head (x0, x1), (x2, x3), ..., not its halves",
                cite(spec, f"text.rope.{kind}"),
            )
        if rope.partial_rotary_factor != 1.0:
            reasons["partial_rope"] = Reason(
                "RoPE rotates the first config.partial_rotary_factor of each head (the "
                "tables' width); the rest passes through",
                cite(spec, f"text.rope.{kind}"),
            )
    for scale in text.scales:
        reasons[f"scale.{scale.site}"] = Reason(
            f"config multiplier: {scale.describe()}", f"config.json:{scale.key}"
        )
    if text.blocks is not None:
        reasons["placement"] = Reason(
            f"one residual block a layer, x + {text.blocks.block}({text.blocks.norm}(x)), as "
            f"{hf.decoder_layer} computes it",
            cite(spec, "text.blocks"),
        )
    if text.attention.fused_qkv:
        rows = {
            "concatenated": "the q rows, then k's, then v's",
            "per_head": "each head's q, k and v rows in turn",
            "kv_grouped": "per key/value head, its query heads' rows, then its k and v rows",
        }.get(text.attention.fused_qkv_layout, text.attention.fused_qkv_layout)
        reasons["fused_qkv"] = Reason(
            f"one {text.attention.fused_qkv} projection gives q, k and v: {rows}",
            cite(spec, "text.attention.fused_qkv"),
        )
    if text.attention.output_gate:
        reasons["output_gate"] = Reason(
            "q_proj gives each head's query, then its gate: the output is scaled by "
            "sigmoid(gate) before o_proj",
            cite(spec, "text.attention.output_gate"),
        )
    if text.attention.sub_norm:
        reasons["attention_sub_norm"] = Reason(
            f"{text.attention.sub_norm} normalises the heads' output before o_proj",
            cite(spec, "text.attention.sub_norm"),
        )
    if text.attention.softcap:
        reasons["attention_softcap"] = Reason(
            "attention logits soft-capped", cite(spec, "text.attention.softcap")
        )
    if text.final_logit_softcap:
        reasons["final_softcap"] = Reason(
            "final logits soft-capped: tanh(logits / cap) * cap",
            cite(spec, "text.final_logit_softcap"),
        )
    elif (line := source_line(hf.module, "config.final_logit_softcapping is not None")) is not None:
        # None in this checkpoint, but HF applies it whenever a config sets it: so must we.
        reasons["final_softcap"] = Reason(
            "HF soft-caps the final logits whenever config.final_logit_softcapping is set",
            f"{hf.source_file}:{line}",
        )
    return reasons


# Config flags that change what HF computes, off in the configs onboard analyses, and that the
# generated code does not implement: it refuses a config that sets one instead of ignoring it.
# HF MoE models add a load-balancing loss to the loss they return with output_router_logits, and
# scale the MoE input by random noise in training with router_jitter_noise: the generated MoE
# implements both where router_training recognises HF's code, and refuses them elsewhere.
SWITCHES = ("use_bidirectional_attention", "output_router_logits", "router_jitter_noise")


def _mla_reason(spec: ArchitectureSpec, hf: HFNames) -> Reason:
    """What HF's latent attention computes, the generated class keeping it whole."""
    mla = spec.text.attention.mla
    query = (
        "q through a latent of config.q_lora_rank (q_a_proj, q_a_layernorm, q_b_proj)"
        if mla.q_lora_rank
        else "q from q_proj"
    )
    return Reason(
        f"multi-head latent attention: {query}; k and v from one latent of config.kv_lora_rank "
        "(kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj) beside a shared RoPE key of "
        "config.qk_rope_head_dim; RoPE over the last config.qk_rope_head_dim dims of each q/k "
        "head (config.qk_nope_head_dim without)",
        cite(spec, "text.attention.mla") or class_location(hf, hf.attention),
    )


def _switches(hf: HFNames, handled: tuple[str, ...] = ()) -> tuple[Reason, ...]:
    keys = (key for key in SWITCHES if key not in handled)
    found = ((key, source_line(hf.module, f"config.{key}")) for key in keys)
    return tuple(Reason(key, f"{hf.source_file}:{line}") for key, line in found if line)


def _changes(spec: ArchitectureSpec, closest: Candidate | None) -> tuple[Reason, ...]:
    """One line per feature the closest AutoModel class lacks, for the module docstring."""
    if closest is None:
        return ()
    evidence = {f.name: f.evidence for f in features(spec)}
    return tuple(
        Reason(
            f"{d.feature} {d.wanted} (it has {d.candidate_has})",
            best(evidence.get(d.feature, ())),
        )
        for d in closest.deltas
    )
