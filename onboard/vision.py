"""The vision side of a vision-language model, as components beside the text backbone.

A VLM is a text decoder (``TextDecoderSpec``, unchanged) plus four components, each read by its
own reader in ``analysis/vision`` and proved by the vision spec check:

- a **tower** that turns pixels into patch features (one field per tower kind in
  ``VisionTowers``; a model has exactly one), or, with no encoder at all, one linear over each
  flattened patch (``LinearPatchTowerSpec``: Fuyu);
- a **selection** of the tower's hidden states the projector reads;
- a **projector** from the tower's width to the text's;
- a **merge** that puts the projected features where the prompt holds image placeholders.

Encoder layers reuse the text specs (``AttentionSpec``, ``MLPSpec``, ``NormSpec``): a ViT layer
is a pre-norm block with bidirectional attention, which those already describe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from onboard.block_specs import AttentionSpec, MLPSpec, NormSpec
from onboard.scale_spec import ScaleSpec

TowerKind = Literal["vit", "pixtral", "qwen_vl", "linear_patch"]


@dataclass(frozen=True)
class VitTowerSpec:
    """A ViT with learned absolute positions (CLIP, SigLIP and their copies): a patch
    convolution, an optional class token, a position table, an optional norm before the
    encoder, pre-norm encoder layers, and a norm after them (applied or not: see
    ``FeatureSelectSpec.post_norm``)."""

    hidden_size: int
    num_layers: int
    image_size: int
    patch_size: int
    num_channels: int
    patch_bias: bool
    class_token: bool
    pre_norm: bool
    post_norm: bool
    attention: AttentionSpec  # bidirectional; projection names in ``names``
    mlp: MLPSpec
    norm: NormSpec  # the layers' norms (attn_in, mlp_in) and the tower's (pre, post)
    # HF names relative to the tower: role -> attribute path. Roles: patch, class_embedding,
    # positions, pre_norm, post_norm, layers, attention, mlp, o_proj, and head: a pooling head
    # (SigLIP's) HF runs but no VLM reads, whose checkpoint tensors a generator drops by name
    names: tuple[tuple[str, str], ...] = ()
    # The vision_config keys HF reads each size from: field -> key
    keys: tuple[tuple[str, str], ...] = ()
    # The class token and the position table are bare parameters shaped [1, 1, hidden] and
    # [1, positions, hidden] (InternViT's), not a [hidden] vector and an Embedding's table
    table_parameters: bool = False
    # Each layer scales its attention's and its MLP's output by a learned vector before the
    # residual add (InternViT's lambda_1 and lambda_2; roles attn_scale, mlp_scale)
    layer_scale: bool = False
    # q/k/v add a bias by this vision_config key while the output projection always does
    # (InternViT's attention_bias); None: the four biases are as ``attention`` says, by no key
    qkv_bias_key: str | None = None
    # vision_config gives image_size and patch_size as (height, width) pairs of equal sides
    # (InternVL's); the fields above hold one side
    sizes_as_pairs: bool = False

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def num_positions(self) -> int:
        return self.num_patches + int(self.class_token)

    def name_of(self, role: str) -> str:
        return dict(self.names)[role]


@dataclass(frozen=True)
class PixtralTowerSpec:
    """Pixtral's tower: a bias-free patch convolution over images of any size (``image_sizes``
    crops each), an RMS norm before the encoder (``ln_pre``), 2-D RoPE over each image's patch
    grid, and RMS pre-norm layers with a gated MLP. All images' patches run as one sequence
    ``[1, patches, hidden]`` whose attention is blocked per image; no class token, no post norm.

    The RoPE is axial: the first quarter of each head's rotated half turns with the patch's row
    at ``inv_freq[0::2]``, the second quarter with its column at ``inv_freq[1::2]``, where
    ``inv_freq = rope_theta ** -(arange(0, head_dim, 2) / head_dim)``.
    """

    hidden_size: int
    num_layers: int
    image_size: int  # the largest side an image may have (config image_size)
    patch_size: int
    num_channels: int
    head_dim: int
    rope_theta: float
    attention: AttentionSpec  # bidirectional within each image, RoPE on q and k
    mlp: MLPSpec  # gated: projections (gate, up, down)
    norm: NormSpec  # RMS: the layers' (attn_in, mlp_in) and ln_pre
    # HF names relative to the tower: role -> attribute path. Roles: patch, pre_norm, rope,
    # layers, attention, mlp, o_proj
    names: tuple[tuple[str, str], ...] = ()
    keys: tuple[tuple[str, str], ...] = ()  # field -> vision_config key
    patch_bias: bool = False

    # What the ViT fields say, for the code that reads either tower: ln_pre is its pre norm
    class_token = False
    pre_norm = True
    post_norm = False

    @property
    def num_patches(self) -> int:
        """Patches of the largest image."""
        return (self.image_size // self.patch_size) ** 2

    def name_of(self, role: str) -> str:
        return dict(self.names)[role]


@dataclass(frozen=True)
class QwenVLTowerSpec:
    """Qwen2.5-VL's tower: images come as flattened patches ``pixel_values [patches, C*T*P*P]``
    with ``image_grid_thw [images, 3]`` (each image's temporal, row and column patch counts),
    the processor ordering each image's patches by ``spatial_merge_size`` x ``spatial_merge_size``
    merge block. A bias-free Conv3d (kernel = stride = temporal_patch_size x P x P) embeds each
    patch; no positions are added.

    Before the layers the patches are regrouped window by window: the merge blocks of each image
    are cut into windows of ``window_size // spatial_merge_size // patch_size`` blocks a side
    (the last window of a row or column may be smaller), in reading order of the windows, and
    the RoPE angles move with them. Layers in ``fullatt_layers`` attend within each image, the
    others within each window. The RoPE is 2-D over each patch's row and column: with
    ``inv_freq = rope_theta ** -(arange(0, d/2, 2) / (d/2))`` (d the head size) the first quarter
    of each head's rotated half turns with the row, the second with the column.

    Each layer is RMS pre-norm: a fused biased ``qkv`` linear, attention at head_dim ** -0.5, an
    output projection, then a gated MLP with bias. Qwen2-VL's is the same tower without windows
    (``window_size`` 0, every layer attending per image), LayerNorms and a plain two-linear MLP.
    The patch merger (the projector, read into ``ProjectorSpec``) closes the tower; its output
    rows are put back from window order into merge-block order (``reverse_indices``).
    """

    hidden_size: int
    num_layers: int
    patch_size: int
    temporal_patch_size: int
    num_channels: int
    head_dim: int
    rope_theta: float
    spatial_merge_size: int
    window_size: int  # in pixels; 0: no windows (Qwen2-VL), every layer attends per image
    fullatt_layers: tuple[int, ...]
    out_hidden_size: int  # the merger's output width: the text's
    attention: AttentionSpec  # fused qkv (names: qkv, o_proj)
    mlp: MLPSpec  # gated with bias (Qwen2.5-VL) or plain fc1 / fc2 (Qwen2-VL)
    norm: NormSpec  # RMS (Qwen2.5-VL) or LayerNorm (Qwen2-VL): the layers' (attn_in, mlp_in)
    # HF names relative to the tower: role -> attribute path. Roles: patch, rope, layers,
    # attention, qkv, o_proj, mlp, merger
    names: tuple[tuple[str, str], ...] = ()
    keys: tuple[tuple[str, str], ...] = ()  # field -> vision_config key
    patch_bias: bool = False
    # Qwen3-VL: a learned square table of this many positions (role positions), resampled
    # bilinearly (corners aligned) to each image's row x column grid and added to the patch
    # embedding, before the 2-D RoPE layers; 0: no learned positions (Qwen2-VL, Qwen2.5-VL)
    position_embeddings: int = 0
    # GLM-4V (see ``glm.py`` beside this module): the table resampled bicubically at pixel
    # centres (grid_sample, border padding) instead; a norm over each patch after the
    # convolution; the tower's end, a norm and a convolution over each merge block into
    # out_hidden_size (its bias; None: no downsample), which the merger then reads
    glm: GlmTowerParts | None = None

    class_token = False
    pre_norm = False
    post_norm = False
    image_size = 0  # any size: a multiple of patch_size * spatial_merge_size a side

    @property
    def window_blocks(self) -> int:
        """Merge blocks per window side; 0: no windows."""
        return self.window_size // self.spatial_merge_size // self.patch_size

    @property
    def patch_width(self) -> int:
        """Values per flattened patch: C * T * P * P."""
        return self.num_channels * self.temporal_patch_size * self.patch_size**2

    def name_of(self, role: str) -> str:
        return dict(self.names)[role]


@dataclass(frozen=True)
class GlmTowerParts:
    """What GLM-4V's tower adds to a Qwen-VL one, each proved by the check: ``patch_norm``
    (role patch_norm) over the convolution's output before the positions are added; learned
    positions (``QwenVLTowerSpec.position_embeddings``) resampled by ``resample``; after the
    layers ``end_norm`` (role end_norm) and a ``spatial_merge_size``-square, -strided
    convolution (role downsample) from each merge block's patches to one row of
    ``out_hidden_size``."""

    patch_norm: ProjectorStep  # rms_norm or layer_norm, named by its tower attribute
    end_norm: ProjectorStep
    downsample_bias: bool
    # bicubic: F.grid_sample(mode bicubic, align_corners False, padding border) at each patch's
    # centre; bilinear: F.interpolate with corners aligned (Qwen3-VL's)
    resample: Literal["bicubic", "bilinear"] = "bicubic"


@dataclass(frozen=True)
class LinearPatchTowerSpec:
    """No encoder: one linear over each flattened patch, straight into the text's width (Fuyu's
    ``vision_embed_tokens``). The model takes ``image_patches [patches, patch_size * patch_size
    * num_channels]`` as the processor makes them: each image cut into a grid of
    ``patch_size``-square patches (its own size, in whole patches), the patches in reading order
    over the grid, image after image, each patch's values flattened as ``layout`` says. The
    linear's output rows are the image features in that order; no positions are added, nothing
    selects or projects them (the ``VisionSpec`` reads hidden state 0, the linear's output,
    through a projector of no steps).

    ``layout`` (read from the processor's own flattening and proved by the check): ``hwc``, row
    within the patch, then column, then channel (index ``(row * P + column) * C + channel``,
    channel-last); ``chw``, channel, then row, then column (channel-first).
    """

    hidden_size: int  # the linear's output width: the text's
    patch_size: int
    num_channels: int
    patch_bias: bool
    layout: Literal["hwc", "chw"]
    # HF names: role patch -> the linear's attribute on the base model (vision_embed_tokens)
    names: tuple[tuple[str, str], ...] = ()
    # field -> the key of the composite config HF reads it from (there is no vision_config)
    keys: tuple[tuple[str, str], ...] = ()
    processor: str = ""  # the image processor class whose flattening ``layout`` is

    # What the ViT fields say, for the code that reads any tower: no encoder, any image size
    class_token = False
    pre_norm = False
    post_norm = False
    num_layers = 0
    image_size = 0

    @property
    def patch_width(self) -> int:
        """Values per flattened patch: P * P * C."""
        return self.patch_size**2 * self.num_channels

    def name_of(self, role: str) -> str:
        return dict(self.names)[role]


TowerSpec = VitTowerSpec | PixtralTowerSpec | QwenVLTowerSpec | LinearPatchTowerSpec


@dataclass(frozen=True)
class VisionTowers:
    """One optional field per tower kind; exactly one is set."""

    vit: VitTowerSpec | None = None
    pixtral: PixtralTowerSpec | None = None
    qwen_vl: QwenVLTowerSpec | None = None
    linear_patch: LinearPatchTowerSpec | None = None

    @property
    def kind(self) -> TowerKind:
        if self.qwen_vl is not None:
            return "qwen_vl"
        if self.linear_patch is not None:
            return "linear_patch"
        return "pixtral" if self.pixtral is not None else "vit"

    @property
    def tower(self) -> TowerSpec:
        tower = self.pixtral or self.qwen_vl or self.linear_patch or self.vit
        if tower is None:
            raise ValueError("no vision tower")
        return tower

    def replace(self, tower: TowerSpec) -> VisionTowers:
        """These towers with ``tower`` in its kind's field."""
        if isinstance(tower, PixtralTowerSpec):
            return VisionTowers(pixtral=tower)
        if isinstance(tower, QwenVLTowerSpec):
            return VisionTowers(qwen_vl=tower)
        if isinstance(tower, LinearPatchTowerSpec):
            return VisionTowers(linear_patch=tower)
        return VisionTowers(vit=tower)


@dataclass(frozen=True)
class FeatureSelectSpec:
    """Which tower states the projector reads: ``hidden_states[layer]`` for each of ``layers``
    (the embeddings after any pre-norm are index 0), the class token dropped or kept, and
    concatenated along the width when there are several; or the post-normed last state."""

    layers: tuple[int, ...]  # as HF indexes hidden_states (negative from the end)
    drop_class_token: bool
    post_norm: bool  # the tower's post norm is applied (the last hidden state, normed)
    layer_key: str | None = None  # config keys HF reads them from
    strategy_key: str | None = None


ProjectorOp = Literal[
    "linear",
    "activation",
    "layer_norm",
    "rms_norm",
    "avg_pool",
    "matmul",
    "patch_merge",
    "group_rows",
    "pixel_shuffle",
    "glu",
    "gate_up",
    "perceiver",
]


@dataclass(frozen=True)
class PerceiverSpec:
    """A perceiver resampler (Idefics 2's ``perceiver_resampler``): ``latents`` learned rows
    ``[latents, hidden]``, repeated for each image, go through ``depth`` layers, then an RMS norm
    (role norm). Each layer: RMS norms over the latents (role latents_norm) and over the image's
    features, the context (role context_norm); attention whose queries are the normed latents
    and whose keys and values are the normed context followed by the normed latents
    (``num_heads`` query heads sharing ``num_kv_heads`` key/value heads of ``head_dim``, scaled
    by head_dim ** -0.5, no positions, no mask: every patch is real), its output projection,
    the residual; an RMS norm (role post_norm), a gated MLP ``down(act(gate(x)) * up(x))`` of
    ``intermediate_size``, the residual. Every norm has ``eps`` and scales by its weight. One
    image's ``patches`` feature rows become ``latents`` rows, whatever the patch count.
    """

    hidden_size: int
    latents: int
    depth: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # hidden_size * intermediate_factor
    intermediate_factor: int
    activation: str
    eps: float
    # HF names relative to the resampler: role -> attribute path. Roles: latents, layers,
    # latents_norm, context_norm, attention, q_proj, k_proj, v_proj, o_proj, post_norm, mlp,
    # gate, up, down (each inside a layer, the projections inside attention and mlp), norm
    names: tuple[tuple[str, str], ...] = ()
    # field -> key of the sub-config HF builds the resampler from (``config``)
    keys: tuple[tuple[str, str], ...] = ()
    config: str = "perceiver_config"  # that sub-config's attribute on the composite config

    def name_of(self, role: str) -> str:
        return dict(self.names)[role]

    def key_of(self, field: str) -> str:
        return dict(self.keys)[field]


@dataclass(frozen=True)
class ProjectorStep:
    """One step of a sequential projector, in the order HF's forward runs it.

    ``avg_pool``: the patch features laid out as their square grid, averaged over ``kernel`` x
    ``kernel`` blocks (Gemma 3 pools to ``mm_tokens_per_image``); ``matmul``: ``x @ W`` with a
    bare ``[in, out]`` parameter of the projector; ``rms_norm``: scales by ``weight_offset + w``;
    ``patch_merge``: each image's patch grid (from ``image_sizes``) cut into ``kernel`` x
    ``kernel`` blocks, each block's features concatenated channel-major as ``F.unfold`` orders
    them (``c * kernel**2 + row * kernel + column``), then the linear ``name`` (Mistral 3);
    ``group_rows``: every ``kernel`` consecutive feature rows concatenated into one (Qwen-VL's
    merger: the processor already orders each merge block's patches one after another);
    ``pixel_shuffle``: space to depth over each image's square patch grid, no weights: each
    ``kernel`` x ``kernel`` block of patches becomes one token, in reading order of the blocks,
    its features concatenated patch-major (``(row * kernel + column) * width + c``): Idefics 3's
    and Aya Vision's ``pixel_shuffle``; ``glu``: the width split in halves, value then gate,
    ``activation(gate) * value`` (Aya Vision's SwiGLU between its linears).
    """

    op: ProjectorOp
    name: str  # HF attribute inside the projector
    in_features: int = 0
    out_features: int = 0
    bias: bool = False
    activation: str = ""  # HF activation name (op activation, glu)
    eps: float = 0.0  # op layer_norm, rms_norm
    weight_offset: float = 0.0  # op rms_norm: 1.0 for Gemma's (1 + w)
    kernel: int = 0  # op avg_pool, patch_merge, pixel_shuffle (side), group_rows (rows)
    tokens_key: str | None = None  # op avg_pool: the config key of the tokens per image
    # op patch_merge, pixel_shuffle: the config key of the merge size (scale factor)
    kernel_key: str | None = None
    # the key holds the kernel's inverse (InternVL's downsample_ratio 0.5 for 2 x 2 blocks)
    kernel_from_ratio: bool = False
    # op pixel_shuffle: the model runs it before calling its projector module (InternVL's
    # get_image_features), not inside it (Idefics 3's connector)
    outside: bool = False
    # op gate_up: ``activation(name(x)) * up(x)``, two linears over the same rows (GLM-4V's
    # merger, Idefics 2's modality projection); ``up`` is the second linear's attribute
    up: str = ""
    # op perceiver: the resampler at ``name``, each image's feature rows to its latents
    perceiver: PerceiverSpec | None = None

    def kernel_at(self, config: object) -> int:
        """The kernel ``config`` sets (the step's own where it has no key)."""
        if not self.kernel_key:
            return self.kernel
        value = getattr(config, self.kernel_key)
        return round(1 / value) if self.kernel_from_ratio else int(value)


@dataclass(frozen=True)
class ProjectorWidth:
    """A projector width of its own, neither the tower's nor the text's, set by a key of the
    composite config (Cohere 2 Vision's and Aya Vision's ``alignment_intermediate_size``)."""

    key: str
    value: int  # at the real config's sizes
    linears: tuple[str, ...]  # the projector's linears that write this width
    # HF reads ``getattr(config, key, config.text_config.hidden_size)``: a config without the
    # key gets the text's width (Aya Vision's default config)
    text_fallback: bool = False


@dataclass(frozen=True)
class ProjectorSpec:
    name: str  # HF attribute of the projector on the base model (multi_modal_projector)
    steps: tuple[ProjectorStep, ...]
    activation_key: str | None = None  # config keys HF reads the activation and biases from
    bias_key: str | None = None
    width: ProjectorWidth | None = None


@dataclass(frozen=True)
class MRopeSpec:
    """Multimodal RoPE (Qwen2-VL, Qwen2.5-VL): every position is three (temporal, row, column),
    and each head's rotated half is cut into ``sections`` (from the text RoPE's ``key``) turned
    by the first, second and third in turn (``chunks``; the frequencies are the text's).

    Text tokens get the same running position three times. An image's placeholders, at running
    position p, get ``(p + t, p + row, p + column)`` over its merged grid (t = 0 for an image),
    and the text after it resumes at ``p + max(rows, columns)``. A decode step at cache length
    n is at ``n + delta`` three times, delta = (the prompt's largest position + 1) - its length.
    """

    sections: tuple[int, ...]  # the tiny model's
    key: str  # text_config.rope_parameters.mrope_section
    # chunks: section i is a run of consecutive frequencies turned by axis i (Qwen2-VL);
    # interleaved: frequency f turns by the row when f % 3 == 1 and f < 3 * sections[1], by the
    # column when f % 3 == 2 and f < 3 * sections[2], else by the temporal axis (Qwen3-VL)
    layout: Literal["chunks", "interleaved"] = "chunks"
    # halves: frequency f turns channels f and f + rotated / 2 (Qwen's rotate_half); adjacent:
    # channels 2f and 2f + 1 (GLM-4V's, the text RoPE's interleaved pairs)
    pairs: Literal["halves", "adjacent"] = "halves"
    # Where HF's rotary module falls back to its own sections when the config sets none (the
    # sections above are that fallback); "" when the config sets them
    default_at: str = ""


@dataclass(frozen=True)
class MergeSpec:
    """How image features enter the prompt: each placeholder token's embedding is replaced by
    the next feature row, placeholders taken in reading order over the whole batch (HF's
    ``masked_scatter``). Positions stay the text's 1-D positions."""

    image_token_id: int  # the tiny model's; the real one is config.<image_token_key>
    image_token_key: str  # config.json key (image_token_index)
    image_token_attr: str = "image_token_id"  # the attribute HF code reads
    positions: Literal["text", "mrope"] = "text"
    mrope: MRopeSpec | None = None  # positions mrope: the three-axis positions and sections
    # The text's embedding scale (``TextDecoderSpec.embedding_scale``) applies to the token rows
    # before the merge, inside the embedding (Gemma's in transformers 5), so image features are
    # not scaled; False: no scale, or a decoder that scales whatever it is given
    scaled_before_merge: bool = False
    # How HF widens the causal mask when the processor passes ``token_type_ids`` (its
    # ``block_sequence_ids``; ``analysis/vision/token_blocks.py``): "images": each image's
    # placeholders (typed 1) see each other both ways, the text stays causal (Gemma 3);
    # "prefix": every token typed 0 (the image and the prompt) sees the others both ways, the
    # suffix typed 1 stays causal (PaliGemma); "": the mask stays causal
    token_blocks: Literal["", "images", "prefix"] = ""


@dataclass(frozen=True)
class DeepStackSpec:
    """DeepStack (Qwen3-VL): the outputs of tower layers ``layers`` each go through their own
    merger (``<name>.<k>``, all with the steps of ``projector``) into the text's width; the k-th
    result is added to the output of text decoder layer k at the image placeholders (in the
    order the merge fills them), for the first ``len(layers)`` text layers only."""

    layers: tuple[int, ...]  # tower layer indices (0-based), vision_config.<key>
    name: str  # the mergers' list, relative to the tower (deepstack_merger_list)
    projector: ProjectorSpec
    key: str = "deepstack_visual_indexes"


@dataclass(frozen=True)
class TileGridSpec:
    """LLaVA-NeXT's tiles of any resolution ("anyres"): each image comes as ``pixel_values
    [images, tiles, C, S, S]`` (S the tower's ``image_size``, the padding tiles past an
    image's count dropped) with its original ``image_sizes [images, 2]`` (height, width).

    The tiles are the base tile (the whole image in one tile) first, then a grid of rows x
    columns tiles in reading order. The grid is the pinpoint (height, width) in pixels that
    fits the original size best: scaled by ``s = min(width / W, height / H)`` the image keeps
    ``min(int(W * s) * int(H * s), W * H)`` pixels (the most wins), the pinpoint's area beyond
    those is wasted (the least wins among equals), the first pinpoint wins a tie; its sides over
    S are the grid. The tower and projector run on every tile; each tile's ``side x side``
    features (side = S / patch) are laid out as one ``[rows * side, columns * side]`` feature
    grid, which ``unpad`` cuts back to the original aspect ratio: when W / H > the grid's
    width / height, ``(grid height - H * grid width // W) // 2`` feature rows go at the top and
    as many at the bottom, else as many columns at each side by the same rule. ``max_tiles``
    (LLaVA-OneVision's ``anyres_max_<n>``): when ``ratio = sqrt(h * w / (max_tiles * side**2))``
    of the unpadded grid exceeds ``downsample_above``, the grid is resized bilinearly (half-pixel
    centers, no antialiasing) to ``int(h // ratio) x int(w // ratio)``. Then the ``newline``
    vector closes each row of the grid. An image's features: the base tile's ``side**2`` rows,
    then the grid's, row by row.
    """

    pinpoints: tuple[tuple[int, int], ...]  # (height, width) in pixels, in the config's order
    pinpoints_key: str  # image_grid_pinpoints
    newline: str  # the base model's parameter closing each grid row (image_newline); "": none
    unpad: bool = True
    max_tiles: int = 0  # the grid is downsampled past this many tiles' features; 0: never
    max_tiles_key: str | None = None  # vision_aspect_ratio ("anyres_max_9")
    downsample_above: float = 0.0  # the ratio past which the grid is resized (HF's 1.1)


@dataclass(frozen=True)
class PathPartSpec:
    """A part only another path than image understanding reads."""

    part: str  # VideoLlavaModel.video_tower (CLIPVisionModel)
    path: str  # videos, image generation
    prefix: str  # on disk, as save_pretrained writes it
    tensors: tuple[str, ...]  # its on-disk names


# Where the evidence of what only the backbone's own causal LM applies (text_lm_scales,
# text_lm_softcap) is kept: ``text.X`` of the causal LM's analysis is ``TEXT_LM_EVIDENCE + X``
TEXT_LM_EVIDENCE = "vision.text_lm."


@dataclass(frozen=True)
class VisionSpec:
    towers: VisionTowers
    select: FeatureSelectSpec
    projector: ProjectorSpec
    merge: MergeSpec
    # On-disk prefixes of each part as save_pretrained writes them (role -> prefix): text,
    # lm_head, tower, projector
    prefixes: tuple[tuple[str, str], ...] = ()
    # Prefixes published checkpoints use instead (vision_tower.vision_model. for
    # vision_tower.), from transformers' checkpoint conversion mapping: (published, saved)
    published_aliases: tuple[tuple[str, str], ...] = ()
    text_model_type: str = ""  # the text backbone's model_type (llama for LLaVA 1.5)
    # The tower's and projector's checkpoint tensors (on-disk name, tiny shape); the text
    # backbone's are ``ArchitectureSpec.weights``, under ``prefix("text")`` and
    # ``prefix("lm_head")`` instead of model. and lm_head.
    tensors: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # pixel_values is [rows, images per row, channels, height, width], all-zero images padding
    # a row the model drops (Idefics 3's tiles); False: [images, channels, height, width]
    image_rows: bool = False
    deepstack: DeepStackSpec | None = None
    # Tiles of any resolution with image_sizes (LLaVA-NeXT): the projected tile features are
    # packed into each image's grid before the merge; None: one image is one tower input
    tiles: TileGridSpec | None = None
    # The parts only videos or image generation read (Video-LLaVA's second tower, Janus' VQ-VAE):
    # the generated graphs take images and give text, so their tensors are left out, by name
    other_paths: tuple[PathPartSpec, ...] = ()
    # What the text backbone's own causal LM does to the logits that the VLM's head does not
    # (Aya Vision's plain lm_head over Cohere 2, whose causal LM multiplies by logit_scale):
    # ``ArchitectureSpec.text`` computes as the VLM does; a text-only model of the backbone
    # adds these (evidence under ``vision.text_lm.*``)
    text_lm_scales: tuple[ScaleSpec, ...] = ()
    text_lm_softcap: float | None = None

    @property
    def tower(self) -> TowerSpec:
        return self.towers.tower

    def prefix(self, role: str) -> str:
        return dict(self.prefixes)[role]
