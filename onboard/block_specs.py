"""The specs of the blocks text and vision layers share: attention, MLP, norm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NormKind = Literal["rms", "layer"]
NormPlacement = Literal["pre", "sandwich", "post", "parallel", "post_residual"]
QKNorm = Literal["none", "per_head", "full_width"]
MLPKind = Literal["gated", "plain", "fused_gate_up"]


@dataclass(frozen=True)
class BlockLayout:
    """Layers that hold one residual block each, ``x + block(norm(x))`` (NemotronH): the
    layer's kind says what the block is (attention, a recurrent mixer, an MLP or experts), and
    every layer names its norm and its block alike, whatever the kind."""

    norm: str  # HF attribute names inside each layer
    block: str


@dataclass(frozen=True)
class LatentQueryGateSpec:
    """Latent attention whose queries and output gate come from one projection of the q latent
    (AXK2's q_gate_proj, in place of q_b_proj). It reads ``cat(inputs)``: the normed latent
    ``q_a_layernorm(q_a_proj(x))`` and the raw ``q_a_proj(x)``, in the order ``inputs`` says;
    each head's output splits into its query (qk head dim) and a gate (v head dim), and the
    heads' output is scaled by ``sigmoid(gate)`` before o_proj."""

    proj: str  # HF attribute inside the attention
    inputs: tuple[Literal["normed", "raw"], ...] = ("normed", "raw")


@dataclass(frozen=True)
class MLASpec:
    """DeepSeek-style multi-head latent attention: low-rank q and kv, a shared RoPE key part."""

    q_lora_rank: int | None  # None: q_proj directly, no q_a/q_b
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    # Epsilon of q_a_layernorm / kv_a_layernorm when HF fixes it in the source instead of
    # reading the layers' config key (DeepSeek and MiniCPM3 build them with the default 1e-6).
    norm_eps: float | None = None
    query_gate: LatentQueryGateSpec | None = None  # q_b_proj's place, see the class


@dataclass(frozen=True)
class IndexerSpec:
    """DeepSeek V3.2's lightning indexer (DeepSeek Sparse Attention) inside latent attention.

    Each query scores every key it may see: ``sum_h w_h relu(q_h . k) / sqrt(head_dim)``, with
    ``heads`` queries ``q_h = wq_b(q_resid)`` from the low-rank query path (after
    ``q_a_layernorm``), one key ``k = k_norm(wk(x))`` (a LayerNorm with bias), the first
    ``qk_rope_head_dim`` channels of both rotated (``rope_interleaved``: on pairs), and
    ``w = weights_proj(x) / sqrt(heads)``. Only the ``topk`` keys with the highest scores stay
    unmasked in the attention. The indexer's keys are cached across decode steps beside the KV
    cache. The sub-modules keep HF's names: wq_b, wk, k_norm, weights_proj.
    """

    attribute: str  # HF attribute of the indexer in the attention (indexer)
    heads: int
    head_dim: int
    topk: int
    norm_eps: float  # k_norm's epsilon (HF fixes 1e-6 in the source)
    rope_interleaved: bool = False  # GLM-MoE-DSA rotates (x0, x1) pairs, DeepSeek V3.2 halves
    # The config keys HF reads them from
    heads_key: str = "index_n_heads"
    head_dim_key: str = "index_head_dim"
    topk_key: str = "index_topk"
    # A per-layer config list of "full" (the layer runs its own indexer) and "shared" (it
    # reuses the selection of the last layer that did) (GLM-MoE-DSA: indexer_types); None:
    # every layer runs one
    layers_key: str | None = None
    own: str = "full"  # the entry of layers_key that marks a layer running its own indexer


@dataclass(frozen=True)
class DynamicMaskSpec:
    """Doge's dynamic mask: each key adds ``exp(decay * softplus(proj(values)))`` of its kv head
    to the scores (the causal mask kept); when the keys outnumber ``config.<keep_window_key>``,
    only that many highest entries of each row stay unmasked."""

    decay: str  # HF attributes in the attention: the per-kv-head parameter (A)
    proj: str  # and the linear from the values to one entry per kv head (dt_proj)
    keep_window_key: str | None  # None: every key stays, however many
    bias: bool = False  # proj adds a bias


@dataclass(frozen=True)
class DifferentialSpec:
    """DiffLlama's differential attention: softmax(q k) over the two halves of the value heads
    (each repeated to all kv heads, side by side), the first half of the heads minus lambda x
    the second, an RMS norm (nothing to learn) over each such pair, x (1 - lambda_init).
    ``lambda = exp(q1 . k1) - exp(q2 . k2) + lambda_init``, from four head_dim parameters."""

    lambdas: tuple[str, str, str, str]  # HF attributes of q1, k1, q2, k2
    lambda_init: str  # Python over the layer index ``layer_idx`` (math imported), from HF
    norm: str  # HF attribute of the pair norm (groupnorm)
    eps_key: str | None  # config key of its epsilon


@dataclass(frozen=True)
class KindAttention:
    """What the attention of one layer kind changes of ``AttentionSpec``'s (MiMo-V2-Flash's
    sliding layers: twice the key/value heads of its full layers, and sinks they alone have)."""

    kind: str  # the layer kind (sliding_attention)
    kv_heads_factor: int = 1  # its key/value heads: this many times num_key_value_heads
    sinks: str | None = None  # HF attribute of its per-head sink logit (see AttentionSpec.sinks)


@dataclass(frozen=True)
class AttentionSpec:
    num_heads: int
    num_kv_heads: int
    head_dim: int
    q_bias: bool
    k_bias: bool
    v_bias: bool
    o_bias: bool
    qk_norm: QKNorm
    scale: float  # multiplies q·k; head_dim ** -0.5 unless the model says otherwise
    softcap: float | None = None
    # Which values HF reads from the config at run time (the rest the architecture fixes):
    # projection letter -> config key, e.g. q -> attention_bias
    bias_keys: tuple[tuple[str, str], ...] = ()
    scale_key: str | None = None  # scale = config.<key> ** scale_power (query_pre_attn_scalar)
    scale_power: float = -0.5  # 1.0 when the config holds the scale itself (attention_multiplier)
    mla: MLASpec | None = None
    yarn_mscale: bool = False  # scale *= yarn mscale(factor, mscale_all_dim) ** 2 (DeepSeek)
    # HF attribute of one projection to q, k and v (Phi-3: qkv_proj); its rows are q, k, v one
    # after the other (concatenated), head by head (per_head: Persimmon, GPT-NeoX), or in
    # fused_qkv_groups groups of heads, each holding its heads' q, v, k (grouped: CodeGen), or
    # key/value head by key/value head, each with its query heads, then its k, then its v
    # (kv_grouped: InternLM2's wqkv)
    fused_qkv: str | None = None
    fused_qkv_layout: Literal["concatenated", "per_head", "grouped", "kv_grouped"] = "concatenated"
    fused_qkv_groups: int = 1
    # Multi-query attention switched on by a config flag (GPT-BigCode, Falcon: multi_query):
    # one k/v head whatever num_key_value_heads says; kv_heads_expr is HF's rule, over the config
    multi_query: bool = False
    kv_heads_expr: str | None = None
    unscaled: bool = False  # q.k is not scaled at all (GPT-Neo)
    # ALiBi (BLOOM, MPT): head h adds slope_h x key position to its scores, with the slopes of
    # the ALiBi paper for the head count; no RoPE
    alibi: bool = False
    # q x (1 + beta x log(1 + floor(position / original_max_position_embeddings))) after RoPE,
    # both from rope_parameters (Ministral 3: llama_4_scaling_beta)
    position_scale: bool = False
    qk_norm_after_rope: bool = False  # per-head q/k norms applied after RoPE (HunYuan)
    # per-head q/k norms with a weight of their own for each head, [heads, head_dim] (Cohere)
    qk_norm_each_head: bool = False
    # Those weights saved as one norm module per head, in this list of the norm (StableLM:
    # q_layernorm.norms.{h}.weight, [head_dim] each): stacked into [heads, head_dim] on load
    qk_norm_head_modules: str | None = None
    # A bias HF keeps beside the output projection and adds to the attention's output in the
    # last layer only (GPT-NeoX Japanese: self_attn.dense_bias)
    last_layer_o_bias: str | None = None
    dynamic_mask: DynamicMaskSpec | None = None
    differential: DifferentialSpec | None = None
    # q_proj gives each head's query and then a gate as wide; the heads' output is scaled by
    # sigmoid(gate) before the output projection (Qwen3-Next, Qwen3.5)
    output_gate: bool = False
    # A projection of its own gives the gate instead (AFMoE: gate_proj, hidden -> the heads'
    # width, no bias): the heads' output x sigmoid(gate_proj(x)) before the output projection
    output_gate_proj: str | None = None
    # That gate's squashing (Laguna: softplus) and whether it gives one value per head, which
    # scales the head's whole output (Laguna's g_proj: hidden -> heads), not one per channel
    output_gate_activation: Literal["sigmoid", "softplus"] = "sigmoid"
    output_gate_per_head: bool = False
    # HF attribute of a norm of the heads' output before the output projection, of the layers'
    # norm kind and epsilon (BitNet: attn_sub_norm)
    sub_norm: str | None = None
    # Attention sinks (GPT-OSS, Granite SWA): HF attribute of a learned logit per head, one
    # more column of every row's softmax that no value is read for (it only takes probability
    # mass); in every attention layer
    sinks: str | None = None
    # DeepSeek Sparse Attention (DeepSeek V3.2, GLM-MoE-DSA): a lightning indexer keeps the
    # top-k keys of each query in the latent attention of the layers of kind indexed_attention
    indexer: IndexerSpec | None = None
    # Value heads of their own width (MiMo-V2-Flash: config.v_head_dim, narrower than the
    # query/key heads); o_proj then takes heads x v_head_dim. None: head_dim
    v_head_dim: int | None = None
    v_head_dim_key: str | None = None
    # The values times config.<value_scale_key> right after v_proj, so the cache holds them
    # scaled (MiMo-V2-Flash: attention_value_scale); None: no such factor
    value_scale: float | None = None
    value_scale_key: str | None = None
    # Layer kinds whose attention differs from the rest (key/value heads, sinks)
    kinds: tuple[KindAttention, ...] = ()

    def bias_key(self, projection: str) -> str | None:
        return dict(self.bias_keys).get(projection)

    def for_kind(self, kind: str) -> KindAttention:
        """What ``kind``'s attention changes: nothing, unless ``kinds`` names it."""
        return next((k for k in self.kinds if k.kind == kind), KindAttention(kind))


@dataclass(frozen=True)
class ClampedGluSpec:
    """A clamped sigmoid GLU in place of ``act(gate) * up`` (GPT-OSS, MiniMax-M3): ``g =
    gate.clamp(max=limit)``, ``u = up.clamp(-limit, limit)``, ``(u + up_offset) * g *
    sigmoid(alpha * g)``. Gate and up are one fused projection's two halves (gate first) or
    its alternate rows (gate even, GPT-OSS)."""

    limit: float
    alpha: float
    up_offset: float = 1.0
    layout: Literal["halves", "interleaved"] = "halves"
    limit_key: str | None = None  # the config keys HF reads them from; None: fixed in its code
    alpha_key: str | None = None


@dataclass(frozen=True)
class MLPSpec:
    kind: MLPKind
    activation: str  # HF activation name, e.g. silu, gelu_pytorch_tanh
    bias: bool
    intermediate_size: int
    projections: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")  # HF attribute names
    bias_key: str | None = None  # config key HF reads the MLP bias from (mlp_bias), if any
    # config key HF reads the activation from; None when the code fixes it (BLOOM's gelu)
    activation_key: str | None = "hidden_act"
    # The width as Python source over the HF config (GPT-2: config.n_inner or 4 * hidden_size)
    width_expr: str = "config.intermediate_size"
    # The HF attribute of an activation that learns parameters (Apertus' xIELU: act_fn), whose
    # parameters and buffers are checkpoint tensors of every layer
    learned_activation: str | None = None
    # Statements over the HF config that assign ``width``, when HF computes the width in the
    # MLP's constructor (LFM2: two thirds of intermediate_size, rounded to block_multiple_of)
    width_code: str | None = None
    # HF attribute of a norm of what enters the down projection (act(gate) x up), of the
    # layers' norm kind and epsilon (BitNet: ffn_sub_norm)
    sub_norm: str | None = None
    # A clamped GLU of the fused gate_up projection in place of act(gate) * up (MiniMax-M3's
    # dense layers)
    glu: ClampedGluSpec | None = None


@dataclass(frozen=True)
class NormGateSpec:
    """Norms scaled by a gate of their own: ``y * sigmoid(up(act(down(z))))``, ``y`` the plain
    norm's output and ``z`` what the gate reads (``normed``: ``y``, AXK2's GatedRMSNorm;
    ``input``: the norm's input), ``down``/``up`` bias-free linears through a low rank. A norm
    kind any role may take: ``roles`` says which roles are gated, and in which layers by the
    kind of their channel mixer (AXK2: the attention norm everywhere, the MLP norm before
    experts only)."""

    rank: int  # the real config's
    rank_key: str | None  # config key HF reads the rank from
    activation: str
    reads: Literal["normed", "input"]
    # HF attribute paths inside the gated norm module
    norm: str  # the plain norm (AXK2: norm)
    down: str  # (AXK2: mlp.fc1)
    up: str  # (AXK2: mlp.fc2)
    roles: tuple[tuple[str, tuple[Literal["dense", "moe"], ...]], ...] = ()

    def gates(self, role: str, mixer: Literal["dense", "moe"]) -> bool:
        """Whether the norm of ``role`` in a layer whose channel mixer is ``mixer`` is gated."""
        return mixer in dict(self.roles).get(role, ())


@dataclass(frozen=True)
class NormSpec:
    """The decoder layers' norms; ``names`` maps each role to the HF attribute that fills it.

    Roles: ``attn_in`` / ``mlp_in`` normalise a sub-block's input (pre-norm), ``attn_out`` /
    ``mlp_out`` its output before the residual add (post-norm); sandwich layers have all four.
    ``parallel`` layers add attention and MLP of the same input to the residual at once (Cohere:
    ``x + attn(norm(x)) + mlp(norm(x))``). ``post_residual`` layers normalise the residual stream
    after each add, roles ``attn_add`` and ``mlp_add`` (OpenAI GPT: ``n = ln_1(x + attn(x))``,
    ``ln_2(n + mlp(n))``).
    """

    kind: NormKind
    eps: float
    weight_offset: float  # 1.0 when the norm scales by (1 + w), as Gemma does
    placement: NormPlacement
    names: tuple[tuple[str, str], ...] = ()
    eps_key: str | None = "rms_norm_eps"  # config key HF reads the epsilon from, if any
    bias: bool = True  # LayerNorms only: whether they add a bias (Cohere's do not)
    weight: bool = True  # False: nothing to learn, scale 1 (OLMo's LayerNorm, NanoChat's RMSNorm)
    gate: NormGateSpec | None = None  # some roles' norms are gated (see NormGateSpec)

    def name_for(self, role: str) -> str | None:
        return dict(self.names).get(role)
