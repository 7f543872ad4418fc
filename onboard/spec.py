"""``ArchitectureSpec``: the target-neutral description every generator consumes.

The spec says *what* the architecture computes (shapes, attention, MLP, norms, RoPE, per-layer
kinds, weight names), never how a target library spells it. Each value that decides generated
code has evidence: where in config.json, the probed tiny model or the HF source it came from, so a
reviewer can check every choice, and a generator can cite it in the code it writes.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from onboard.block_specs import (
    AttentionSpec,
    BlockLayout,
    ClampedGluSpec,
    MLPSpec,
    NormSpec,
)
from onboard.scale_spec import ScaleSite, ScaleSpec
from onboard.token_mixers import TokenMixers
from onboard.vision import VisionSpec

SPEC_VERSION = 1

# Attention kinds, and in hybrids the recurrent kinds of ``token_mixers.MixerKind``
LayerKind = Literal[
    "full_attention",
    "sliding_attention",
    "indexed_attention",  # full attention whose keys a lightning indexer selects (DeepSeek V3.2)
    "short_conv",
    "mamba2",
    "mamba",
    "gated_deltanet",
    "mlp",
    "moe",
]


@dataclass(frozen=True)
class Evidence:
    """Where a value came from: ``kind`` is config, probe, source or weights."""

    kind: Literal["config", "probe", "source", "weights"]
    where: str  # "config.json:rope_theta", "modeling_qwen3.py:63", a weight key, a module path
    detail: str = ""  # the snippet, value or observation

    def cite(self) -> str:
        return f"{self.where}: {self.detail}" if self.detail else self.where


@dataclass(frozen=True)
class SourceRef:
    """Which model, from where, and which HF source files described it."""

    model_id: str
    origin: str  # local, cache, hub, bundled
    revision: str | None
    model_type: str
    architecture: str
    transformers_version: str
    hf_files: tuple[tuple[str, str], ...] = ()  # (file name, sha256)
    # The checkpoint's own code (auto_map), (file name, sha256): what parity may import.
    remote_files: tuple[tuple[str, str], ...] = ()
    hub_id: str | None = None  # the Hub id library files name it by; None: a local folder

    @property
    def public_name(self) -> str:
        """What library files call the checkpoint: its Hub id, or the local folder's name
        (never a path of the machine it was onboarded on)."""
        if self.hub_id:
            return self.hub_id
        path = Path(self.model_id)
        return (path.parent if path.name == "config.json" else path).name or self.model_id


@dataclass(frozen=True)
class RouterSpec:
    """How the router turns logits into (weights, expert indices).

    ``softmax_topk``: score every expert (softmax or sigmoid), pick the top k, optionally
    renormalise the picked weights; ``topk_softmax``: pick the top k logits, softmax over those;
    ``sparsemixer`` (PhiMoE, at inference): two experts, each the best left, weighted by a softmax
    over the logits within a relative ``2 x jitter_eps`` of it.
    A correction bias shifts only the *choice* (DeepSeek-V3); group-limited routing first keeps
    the best ``topk_group`` of ``n_group`` groups.
    """

    scoring: Literal["softmax", "sigmoid"]
    order: Literal["softmax_topk", "topk_softmax", "sparsemixer"]
    renormalize: bool
    renormalize_key: str | None = None  # config key behind renormalize (norm_topk_prob)
    correction_bias: bool = False
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    bias: bool = False  # the router's linear layer has a bias
    jitter_eps: float = 0.0  # sparsemixer's (the tiny model's value), from config.<jitter_key>
    jitter_key: str | None = None
    scale_key: str = "routed_scaling_factor"  # config key of routed_scaling_factor (route_scale)
    # Shared experts scored by the router (Inkling): its last ``shared_logits`` rows score them;
    # their sigmoid joins the chosen experts' in the renormalisation, and each shared expert's
    # output is scaled by its share. config.<shared_logits_key> counts them.
    shared_logits: int = 0
    shared_logits_key: str | None = None
    # The router's learned scalar that multiplies every weight, shared ones too (Inkling:
    # global_scale), HF's attribute on the router
    learned_scale: str | None = None


@dataclass(frozen=True)
class SharedExpertSpec:
    intermediate_size: int
    gated: bool  # output scaled by sigmoid(shared_expert_gate(x))
    name: str  # HF attribute: shared_expert or shared_experts
    width_expr: str = "shared_expert_intermediate_size"  # config expression for the width
    plain: bool = False  # up, activation, down without a gate (NemotronH)
    # Several gated experts held as 3-D gate_proj / up_proj / down_proj parameters [n, I, H],
    # [n, I, H], [n, H, I], each scaled by its router weight (Inkling; RouterSpec.shared_logits)
    stacked: bool = False
    # HF's names of its linear layers by role (2024 remote code: gate -> w1, up -> w3, down -> w2);
    # a plain one uses up and down only
    projections: tuple[tuple[str, str], ...] = (
        ("gate", "gate_proj"),
        ("up", "up_proj"),
        ("down", "down_proj"),
    )

    # A clamped GLU over one fused gate_up projection (MiniMax-M3); projections then name the
    # roles gate_up and down
    glu: ClampedGluSpec | None = None

    def leaf(self, role: str) -> str:
        return dict(self.projections)[role]


# Config keys that count the leading dense layers (the rest MoE): DeepSeek's name, AFMoE's
LEADING_DENSE_KEYS = ("first_k_dense_replace", "num_dense_layers")


@dataclass(frozen=True)
class MoESpec:
    num_experts: int
    top_k: int
    intermediate_size: int  # width of each routed expert
    router: RouterSpec
    shared: SharedExpertSpec | None
    activation: str
    plain: bool = False  # each expert is down(act(up(x))), without a gate (NemotronH)
    # On-disk naming (the checkpoint keeps one tensor per expert):
    block_name: str = "mlp"  # model.layers.N.<block_name>.experts.E.<leaf>
    expert_leaves: tuple[tuple[str, str], ...] = (
        ("gate", "gate_proj"),
        ("up", "up_proj"),
        ("down", "down_proj"),
    )
    router_name: str = "gate"
    # Checkpoints that keep the experts fused, 3-D as in memory, under other names (Granite MoE:
    # role -> layer-relative name, gate_up -> block_sparse_moe.input_linear.weight, down -> ...)
    fused_on_disk: tuple[tuple[str, str], ...] = ()
    # Those fused tensors hold each expert as (in, out), the layout grouped GEMMs read (Aria's
    # experts.fc1 [E, H, 2I] and experts.fc2 [E, I, H]), not nn.Linear's (out, in)
    fused_transposed: bool = False
    # HF attribute of a norm of the block's output (routed plus shared experts) before the
    # residual add, of the layers' norm kind and epsilon, in MoE layers only (A.X-K1:
    # post_mlp_layernorm; its checkpoints keep it on the layer, transformers moves it on load)
    post_norm: str | None = None
    # The router's on-disk name (layer-relative) when it is not its in-memory one (Granite MoE:
    # block_sparse_moe.router.layer.weight)
    router_on_disk: str | None = None
    # Where the checkpoint and the HF model keep the router's choice bias when not on the router,
    # in any shape (Ernie 4.5: mlp.moe_statics... on disk, mlp.gate.moe_statics... in memory,
    # [1, experts]); layer-relative names
    correction_names: tuple[str, ...] = ()
    # Which layers are dense, as the HF config says it: none, first_k_dense_replace (layers below
    # it are dense) or mlp_only_layers (listed layers dense; the rest every decoder_sparse_step).
    # moe_layer_interval: layer i is MoE iff (i + 1) % interval == 0 and it lies within
    # [moe_layer_start_index, moe_layer_end_index] (Ernie 4.5). expert_layer_period: layer i is
    # MoE iff i % expert_layer_period == expert_layer_offset (Jamba). num_dense_layers: as
    # first_k_dense_replace (AFMoE). mlp_layer_types: layer i is MoE iff its entry is "sparse"
    # (transformers' per-layer list: GLM-4 MoE Lite, MiMo-V2-Flash, Laguna, HY-V3).
    dense_rule: Literal[
        "none",
        "first_k_dense_replace",
        "num_dense_layers",
        "mlp_layer_types",
        "mlp_only_layers",
        "moe_layer_interval",
        "expert_layer_period",
    ] = "none"
    # The HF config keys of the sizes (they vary: num_local_experts, num_experts, n_routed_experts).
    count_key: str = "num_local_experts"
    top_k_key: str = "num_experts_per_tok"
    width_key: str = "moe_intermediate_size"
    # Each expert's clamped GLU in place of activation(gate) * up (GPT-OSS, MiniMax-M3)
    glu: ClampedGluSpec | None = None

    def leaf(self, role: str) -> str:
        return dict(self.expert_leaves)[role]

    @property
    def block_glu(self) -> ClampedGluSpec | None:
        """The clamped GLU the block's experts compute: the routed experts', else the shared
        expert's."""
        return self.glu or (self.shared.glu if self.shared else None)

    @property
    def block_glu_path(self) -> str:
        """The spec path whose evidence shows ``block_glu``."""
        return "text.moe.glu" if self.glu else "text.moe.shared"


@dataclass(frozen=True)
class FrequencyOrder:
    """RoPE's inverse frequencies ``1 / theta^(2i / d)`` in another order, described by the
    sections a config key of the kind's ``rope_parameters`` lists (Cohere Compass'
    ``mrope_section``: h, w, t): the frequencies before the last section taken evens first, then
    odds, the last section's in place. HF pre-rotates its M-RoPE table so; for text, whose
    M-RoPE position rows are equal, that table is the whole difference from a plain RoPE."""

    key: str  # the rope_parameters key that lists the sections (mrope_section)
    rule: Literal["evens_then_odds_before_last"] = "evens_then_odds_before_last"

    def indices(self, sections: tuple[int, ...] | list[int], count: int) -> tuple[int, ...]:
        """Position i of the reordered table holds standard frequency ``indices[i]``."""
        head = list(range(count - int(sections[-1])))
        return (*head[0::2], *head[1::2], *range(len(head), count))


@dataclass(frozen=True)
class RopeSpec:
    """Rotary embedding of one layer kind (``rope_type`` None means no RoPE)."""

    rope_type: str | None
    theta: float
    partial_rotary_factor: float = 1.0
    scaling: tuple[tuple[str, Any], ...] = ()  # the remaining rope_parameters, sorted
    interleaved: bool = False  # rotate (x0, x1), (x2, x3) ... pairs (DeepSeek's rope_interleave)
    reversed: bool = False  # rotate the other way, sin negated (NanoChat's rotate_half)
    order: FrequencyOrder | None = None  # the frequencies reordered (None: the standard order)


@dataclass(frozen=True)
class PositionsSpec:
    """Absolute positions added to the token embeddings: row ``position + offset`` of a learned
    (max_position_embeddings + offset) x hidden table (GPT-2's ``wpe``, OPT's
    ``embed_positions``), or of the sinusoidal table ``[sin(p * f), cos(p * f)]`` with
    ``f_i = 10000 ** (-i / (hidden / 2 - 1))`` (XGLM) or ``10000 ** (-i / (hidden / 2))`` (CTRL),
    which nothing learns."""

    offset: int = 0  # OPT, BioGPT and XGLM keep two rows before position 0
    kind: Literal["learned", "sinusoidal"] = "learned"
    # The config key of a sinusoidal row HF sets to zero (XGLM: pad_token_id, its padding_idx)
    zero_row_key: str | None = None
    divisor: Literal["half-1", "half"] = "half-1"  # of the sinusoidal frequencies' exponent


@dataclass(frozen=True)
class HeadTransformSpec:
    """A transform of the final hidden states before the head, ``norm(act(dense(x)))`` with the
    layers' norm kind (ModernBERT's prediction head, ``model.head_transform``)."""

    dense: str  # HF attribute names inside it
    norm: str
    activation: str
    activation_key: str | None  # config keys HF reads them from, if any
    bias: bool
    bias_key: str | None


@dataclass(frozen=True)
class StackRecurrenceSpec:
    """Two stacks of the decoder layer run in cycles (HRM), each call a cache slot of its own.

    The low state starts at the decoder's parameter ``initial`` (expanded over the sequence),
    the high state at the embeddings. For each of ``config.<outer_key>`` cycles: the low stack
    ``config.<inner_key>`` times on ``low + high``, then the high stack once on ``high + low``.
    Each stack is its ``config.<layers_key>`` layers, then its own ``stack_norm`` (a norm of the
    spec's kind); the head reads the high state. Call ``c`` of the ``inner + 1`` calls in cycle
    ``h`` writes the KV slots ``(h * (inner + 1) + c) * layers + layer``.
    """

    stacks: tuple[str, str]  # the decoder's children run (low, high): L_module, H_module
    outer_key: str  # H_cycles
    inner_key: str  # L_cycles
    layers_key: str  # num_layers_per_stack
    initial: str  # the decoder's parameter the low state starts at (z_L_init)
    stack_norm: str  # each stack's norm after its layers (final_norm)

    def calls(self, outer: int, inner: int) -> tuple[tuple[int, int], ...]:
        """(stack index, first KV-slot block) of every stack call in order: 0 low, 1 high."""
        order = []
        for h in range(outer):
            order += [(0, h * (inner + 1) + c) for c in range(inner)]
            order.append((1, h * (inner + 1) + inner))
        return tuple(order)


@dataclass(frozen=True)
class TextDecoderSpec:
    vocab_size: int
    hidden_size: int
    num_layers: int
    max_position_embeddings: int
    layer_types: tuple[LayerKind, ...]
    sliding_window: int | None
    attention: AttentionSpec | None  # None: no layer attends (a pure state-space model)
    mlp: MLPSpec | None  # None: no layer mixes channels (Mamba's layers hold only the mixer)
    norm: NormSpec
    rope: tuple[tuple[LayerKind, RopeSpec], ...]  # one entry per layer kind in use
    tie_word_embeddings: bool
    embedding_scale: Literal["none", "sqrt_hidden"] = "none"  # token embeddings x sqrt(hidden)
    final_logit_softcap: float | None = None
    scales: tuple[ScaleSpec, ...] = ()  # config multipliers, at most one per site
    # A per-layer config list: layer i applies RoPE iff config.<key>[i] (SmolLM3's no_rope_layers)
    rope_layers_key: str | None = None
    # HF names where they differ from Llama's: role -> attribute. Roles: final_norm (model.<x>),
    # q_proj, k_proj, v_proj, o_proj, q_norm, k_norm (self_attn.<x>); Phi has final_layernorm
    # and dense, Persimmon q_layernorm and k_layernorm, CTRL Wq, Wk, Wv.
    names: tuple[tuple[str, str], ...] = ()
    lm_head_bias: bool = False  # the head adds a bias (Phi)
    final_norm: bool = True  # False: the last layer's output goes to the head as is (OpenAI GPT)
    positions: PositionsSpec | None = None  # learned absolute positions (model.embed_positions)
    # A norm of the embeddings (any absolute positions added first) before the first layer
    embedding_norm: bool = False
    # HF blocks that add the residual themselves (BLOOM: self_attn and mlp; MPT: mlp): the same
    # computation, other module boundaries, which the spec check compares module by module
    blocks_add_residual: tuple[str, ...] = ()
    head_transform: HeadTransformSpec | None = None
    # Norm roles layer 0 does without (ModernBERT's first layer has no attention norm)
    first_layer_without: tuple[str, ...] = ()
    # Layer-relative linears that store their weight (in, out), as GPT-2's Conv1D does
    transposed_linears: tuple[str, ...] = ()
    # The config keys the layer kinds and the window are read from (GPT-Neo: attention_layers,
    # window_size); None: no list, every layer of one kind
    layer_types_key: str | None = None
    window_key: str = "sliding_window"
    # Learned per-channel scales of the residual at each add, sub-block -> layer attribute
    # (Doge: attn -> input_residual, x = input_residual * x + attn(norm(x)); mlp -> ...)
    residual_gates: tuple[tuple[str, str], ...] = ()

    def name_of(self, role: str) -> str:
        return dict(self.names).get(role, role if role != "final_norm" else "norm")

    moe: MoESpec | None = None
    mlp_kinds: tuple[Literal["dense", "moe"], ...] = ()  # per layer; empty: every layer dense
    # Hybrids: the recurrent token mixers some layers use instead of attention, and the config's
    # label of each such kind (LFM2 says conv for short_conv)
    mixers: TokenMixers = field(default_factory=TokenMixers)
    mixer_labels: tuple[tuple[str, str], ...] = ()  # HF label -> onboard kind
    # One residual block a layer (NemotronH): its kind in layer_types; None: Llama's two blocks
    blocks: BlockLayout | None = None
    # Stacks of the layer run in cycles (HRM); None: one stack of layers, run once
    recurrence: StackRecurrenceSpec | None = None

    def kind_of_label(self, label: str) -> str:
        """onboard's kind for a layer-type label of the HF config."""
        return dict(self.mixer_labels).get(label, label)

    def is_moe_layer(self, index: int) -> bool:
        return bool(self.mlp_kinds) and self.mlp_kinds[index] == "moe"

    def feed_forward_of(self, kind: str, index: int) -> Literal["dense", "moe"] | None:
        """What a layer of ``kind`` (onboard's word) at ``index`` mixes channels with: in a
        block layout the kind says (``mlp`` or ``moe``; none for the others), else the MLP
        kinds do."""
        if self.blocks is not None:
            return {"mlp": "dense", "moe": "moe"}.get(kind)
        return "moe" if self.is_moe_layer(index) else "dense"

    def scale_at(self, site: ScaleSite) -> ScaleSpec | None:
        return next((s for s in self.scales if s.site == site), None)

    def reordered_rope(self) -> tuple[LayerKind, RopeSpec] | None:
        """The first layer kind whose RoPE frequencies are reordered (Cohere Compass' sliding
        layers), and its RoPE."""
        return next(((k, r) for k, r in self.rope if r.order is not None), None)

    def rope_for(self, kind: LayerKind) -> RopeSpec:
        return dict(self.rope)[kind]

    @property
    def distinct_layer_types(self) -> tuple[LayerKind, ...]:
        return tuple(dict.fromkeys(self.layer_types))


@dataclass(frozen=True)
class WeightSplit:
    """A saved tensor transformers cuts into equal chunks on load, by name substring: HRM's
    ``attn.gqkv_proj.weight`` into ``self_attn.gate_proj.weight``, ``q_proj``, ``k_proj``,
    ``v_proj``, in that order, along ``dim``."""

    fused: str
    parts: tuple[str, ...]
    dim: int = 0
    where: str = ""  # transformers' converter (conversion_mapping.py:N)


@dataclass(frozen=True)
class WeightSpec:
    """The checkpoint's tensor names, as a tiny model of the architecture saves them."""

    tensors: tuple[tuple[str, tuple[int, ...]], ...]  # on-disk (safetensors) name, tiny shape
    tied_keys: tuple[str, ...] = ()  # names absent on disk because they are tied
    # Checkpoint-name substrings -> the Llama layout's (GPT-NeoX: gpt_neox.embed_in. ->
    # model.embed_tokens.), applied in order before any other rename
    renames: tuple[tuple[str, str], ...] = ()
    # HF's base_model_prefix, which checkpoints saved from the base model leave out (GPT-2's
    # Hub checkpoints say h.0..., not transformer.h.0...); "" when the names never lack it
    base_prefix: str = ""
    top_level: tuple[str, ...] = ()  # the causal LM's own modules, whose names never lack it
    # Saved tensors cut into several before any rename (``tensors`` names their parts)
    splits: tuple[WeightSplit, ...] = ()


@dataclass(frozen=True)
class Delta:
    """Something the analysis saw but no spec field explains: a human must look."""

    what: str
    where: str
    detail: str = ""


@dataclass(frozen=True)
class ConfigFlag:
    """A boolean config key of the architecture and the catalogue features it switches.

    ``value`` is the analysed config's; ``switches`` holds (feature, value as analysed, value
    with the flag flipped). ``not_understood`` says why the flipped model could not be read:
    code generated for this architecture then cannot honour the flag's other value.
    ``admits`` names the types besides bool its config class takes for the key (Laguna's
    ``gating``: str), which no parity run tries. ``pinned`` says why the analysis ran with
    ``value`` whatever the checkpoint's config says (BERT's ``is_decoder``, which its causal LM
    needs): the flag is never flipped, and generated code refuses its other value.
    """

    key: str
    value: bool
    switches: tuple[tuple[str, str, str], ...] = ()
    evidence: tuple[Evidence, ...] = ()
    not_understood: str | None = None
    admits: tuple[str, ...] = ()
    pinned: str | None = None

    @property
    def understood(self) -> bool:
        return self.not_understood is None and self.pinned is None

    @property
    def guard_reason(self) -> str:
        """Why generated code refuses the flag's other value (a sentence for its error)."""
        if self.pinned is not None:
            return self.pinned
        if self.not_understood is not None:
            return "onboard could not read the architecture with it flipped"
        switched = ", ".join(name for name, _, _ in self.switches)
        return f"it switches {switched}, which this code does not read from the config"


@dataclass(frozen=True)
class FlagSpecs:
    """What a flags-flipped variant was flipped from: the analysed spec, and for each flag it
    flips the spec with that flag alone flipped (so a generated setting that changes is tied to
    the flag changing it)."""

    baseline: ArchitectureSpec
    single: tuple[tuple[str, ArchitectureSpec], ...]


@dataclass(frozen=True)
class ArchitectureSpec:
    source: SourceRef
    kind: str
    text: TextDecoderSpec
    weights: WeightSpec
    evidence: tuple[tuple[str, tuple[Evidence, ...]], ...] = ()  # dotted field path -> evidence
    unresolved: tuple[Delta, ...] = ()
    spec_version: int = SPEC_VERSION
    # A vision-language model's tower, projector and merge beside ``text``
    vision: VisionSpec | None = None
    # The architecture's boolean config flags and what each switches (read by flipping it)
    flags: tuple[ConfigFlag, ...] = ()

    @property
    def model_type(self) -> str:
        return self.source.model_type

    def evidence_for(self, path: str) -> tuple[Evidence, ...]:
        return dict(self.evidence).get(path, ())

    def to_dict(self) -> dict[str, Any]:
        return _to_plain(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArchitectureSpec:
        return _from_plain(cls, data)

    @classmethod
    def from_json(cls, text: str) -> ArchitectureSpec:
        return cls.from_dict(json.loads(text))


def _to_plain(value: Any) -> Any:
    """Dataclasses to dicts and tuples to lists (JSON has no tuples)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_to_plain(v) for v in value]
    return value


def _from_plain(tp: Any, value: Any) -> Any:
    """Rebuild ``tp`` from the output of ``_to_plain`` using the dataclasses' type hints."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        # A field missing from older JSON takes its default (a required one still raises).
        kwargs = {
            f.name: _from_plain(hints[f.name], value[f.name])
            for f in dataclasses.fields(tp)
            if f.name in value
        }
        return tp(**kwargs)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        return _from_plain(members[0], value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_plain(args[0], v) for v in value)
        return tuple(_from_plain(a, v) for a, v in zip(args, value, strict=True))
    if origin is Literal or tp is Any:
        return value
    if tp is float and isinstance(value, int):
        return float(value)
    return value


@dataclass
class EvidenceLog:
    """Collects evidence while a spec is built; frozen into ``ArchitectureSpec.evidence``."""

    entries: dict[str, list[Evidence]] = field(default_factory=dict)

    def add(self, path: str, *items: Evidence) -> None:
        self.entries.setdefault(path, []).extend(items)

    def freeze(self) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
        return tuple((k, tuple(v)) for k, v in sorted(self.entries.items()))
