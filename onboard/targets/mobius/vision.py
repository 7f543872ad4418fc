"""The vision side of a VLM for mobius: what its ``vision-language`` task builds from the spec.

The task builds three graphs from one module: ``vision_encoder`` (pixels to projected features),
``embedding`` (token embeddings with the features in the placeholders' rows) and ``decoder``
(the text model on embeddings, with its KV cache). mobius' own pieces are used where they compute
what HF does: ``CLIPVisionModel`` with an integer feature layer (it never post-norms hidden
states). The projector and the merge are generated: mobius' LLaVA projector fixes its activation,
and its embedding restarts the feature count on every row, so a batch's second row gets the first
row's image (hybrid notes, section 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.errors import UnsupportedFeatureError
from onboard.spec import ArchitectureSpec
from onboard.targets.mobius.vision_glm import GLM_TOWER_CHANGE, glm_norm_field
from onboard.targets.mobius.vision_linear_patch import (
    LinearPatchNames,
    linear_patch_blockers,
    linear_patch_changes,
    linear_patch_fields,
    linear_patch_names,
)
from onboard.targets.mobius.vision_perceiver import (
    PerceiverNames,
    perceiver_blockers,
    perceiver_change,
    perceiver_fields,
    perceiver_names,
)
from onboard.targets.mobius.vision_pixtral import PixtralNames, pixtral_blockers, pixtral_names
from onboard.targets.mobius.vision_qwen_vl import (
    QWEN_VL_TASK,
    QwenVLNames,
    qwen_vl_blockers,
    qwen_vl_names,
)
from onboard.targets.mobius.vision_tiles import (
    TileNames,
    tile_blockers,
    tile_changes,
    tile_fields,
    tile_names,
)
from onboard.vision import (
    LinearPatchTowerSpec,
    PixtralTowerSpec,
    ProjectorOp,
    ProjectorStep,
    QwenVLTowerSpec,
    VisionSpec,
    VitTowerSpec,
)

VLM_TASK = "vision-language"
# mobius' qwen-vl task whose decoder takes and returns the hybrid task's states per layer
# (conv_state and recurrent_state for a DeltaNet layer, key and value for an attention layer)
HYBRID_QWEN_VL_TASK = "hybrid-qwen-vl"
# The variant that takes images of any size, one at a time, and squeezes the batch of one away
PIXTRAL_TASK = "pixtral-vl"


@dataclass(frozen=True)
class ProjectorLayer:
    """One projector step as the generated module writes it, its sizes as config expressions:
    a Linear, an activation, a LayerNorm or (offset) RMSNorm, an average pool over the patch
    grid, or a product with a bare weight."""

    name: str
    op: ProjectorOp
    label: str = ""  # what the docstring calls it: HF's attribute, or the activation's name
    in_expr: str = ""  # linear, matmul; the norms' width
    out_expr: str = ""  # linear, matmul
    bias_expr: str = ""  # linear
    eps_expr: str = ""  # layer_norm, rms_norm
    offset: bool = False  # rms_norm: scales by (1 + w)
    # gated_mlp (a gate_up step and the linear after it, held by one module of HF's: Idefics
    # 2's modality_projection): its width between, and its up and down linears (the gate is
    # ``inner``)
    mid_expr: str = ""
    up: str = ""
    down: str = ""

    @property
    def activation(self) -> bool:
        return self.op == "activation"

    @property
    def attribute(self) -> str:
        """The projector's attribute (patch_merger of patch_merger.merging_layer)."""
        return self.name.partition(".")[0]

    @property
    def inner(self) -> str:
        """patch_merge: the merger's linear (merging_layer); a linear HF nests one level down
        (Idefics 3's modality_projection.proj): its name in the holder module."""
        return self.name.partition(".")[2]

    @property
    def numbered(self) -> bool:
        """A linear HF keeps in a list (Janus' hidden_layers.0): the generated projector keeps
        it in an ``nn.ModuleList`` under the same name, so checkpoint names map as they are."""
        return self.inner.isdigit()

    @property
    def holder_class(self) -> str:
        """The class of the module that holds a nested linear, named after HF's attribute."""
        return "".join(part.capitalize() for part in self.attribute.split("_"))


@dataclass(frozen=True)
class ConfigField:
    """A field the VLM config class adds, read from the composite HF config (``top``)."""

    name: str
    annotation: str
    default: str
    expr: str  # over ``top``, the composite config
    why: str
    # False: a field mobius' config class has already (set here, not declared again)
    declared: bool = True


@dataclass(frozen=True)
class TowerNames:
    """Where a generated ViT keeps each part: HF's names, so checkpoint tensors map as they are
    (the MLP's fc1 / fc2 aside: mobius' FCMLP calls them up_proj / down_proj)."""

    embeddings: str  # embeddings
    patch: str  # patch_embedding, under embeddings
    positions: str  # position_embedding, under embeddings
    class_token: str | None  # class_embedding, under embeddings; None: no class token
    encoder: str  # encoder
    layers: str  # layers, under encoder
    pre_norm: str | None
    post_norm: str | None  # built only when the selection reads it
    head: str | None  # a pooling head no VLM reads: its tensors are dropped
    norms: tuple[str, str]  # layer_norm1, layer_norm2
    attention: str  # self_attn
    mlp: str  # mlp
    mlp_projections: tuple[str, str]  # fc1, fc2
    # HF's path of the patch convolution under embeddings where it nests deeper than the
    # attribute the generated embeddings hold it in (InternViT's patch_embeddings.projection)
    patch_path: str = ""
    o_proj: str = "out_proj"  # HF's output projection; mobius' EncoderAttention's is out_proj
    # The class token and position table as HF's bare [1, ..., hidden] parameters (InternViT)
    table_parameters: bool = False
    # Each layer's output scales of the attention and the MLP (InternViT's lambda_1, lambda_2)
    scales: tuple[str, str] | None = None
    # q/k/v add a bias by vision_config.<key> (the output projection always does); None: all
    # four always do
    qkv_bias_key: str | None = None


@dataclass(frozen=True)
class VisionDesign:
    prefix: str
    tower_attribute: str  # vision_tower
    projector_attribute: str  # multi_modal_projector
    layers: tuple[ProjectorLayer, ...]
    fields: tuple[ConfigField, ...]
    text_prefix: str  # on-disk prefixes of the text model and its head (language_model.model.)
    head_prefix: str | None  # None: tied to the embeddings
    tower_prefix: str
    projector_prefix: str
    published_levels: tuple[str, ...]  # levels published checkpoints add under the tower
    changes: tuple[str, ...]
    # A ViT generated from the spec (SigLIP's shape, a post-normed state); None: mobius'
    # CLIPVisionModel computes it
    tower: TowerNames | None = None
    patch_bias: bool = False
    post_normed: bool = False  # the selected state goes through the post norm
    # The token rows are scaled (the text's embedding scale) before image features replace
    # the placeholders', so the features are not scaled
    scaled_embeddings: bool = False
    # How token types widen the mask (vision.merge.token_blocks): "images", each image's
    # placeholders see each other both ways, found in input_ids (Gemma 3); "prefix", every
    # token typed 0 does, read from token_type_ids (PaliGemma). The decoder takes input_ids or
    # token_type_ids too, through a task of the module's own
    token_blocks: str = ""
    # A Pixtral tower generated from the spec; the task then takes images of any size
    pixtral: PixtralNames | None = None
    # A Qwen-VL tower: mobius' windowed ViT with a generated merger; the task takes flattened
    # patches with image_grid_thw and M-RoPE positions
    qwen_vl: QwenVLNames | None = None
    # HF takes pixel_values [rows, images per row, ...] with all-zero padding images: the host
    # feeds the encoder the real ones
    image_rows: bool = False
    # The projector reads several hidden states, concatenated along the width (VipLLaVA): the
    # generated ViT keeps each one up to the deepest
    several_layers: bool = False
    # The text model is a hybrid (Qwen3.5's gated DeltaNet layers): the decoder graph carries
    # each recurrent layer's states beside the attention layers' KV cache
    hybrid: bool = False
    # vision_config gives the image and patch sizes as (height, width) pairs (InternVL's): the
    # generated config hands the tower one side of each
    square_pairs: bool = False
    # Tiles of any resolution (LLaVA-NeXT): the encoder takes one image's tiles with its size
    # and packs their features into the image's grid, through a task of the module's own
    tiles: TileNames | None = None
    # A perceiver resampler among the projector's steps (Idefics 2's), generated from its spec
    perceiver: PerceiverNames | None = None
    # On-disk prefixes of the parts only videos or image generation read (Video-LLaVA's video
    # tower): the graphs take images and give text, so their tensors are skipped by name
    other_prefixes: tuple[str, ...] = ()
    other_paths: str = ""  # what reads them: videos, image generation

    @property
    def other_prefixes_expr(self) -> str:
        """What ``str.startswith`` takes: one prefix, or a tuple of them."""
        prefixes = self.other_prefixes
        return repr(prefixes[0]) if len(prefixes) == 1 else repr(prefixes)

    # No tower (Fuyu): the encoder is one linear over flattened patches, image_patches [patches,
    # P * P * C], through a task of the module's own
    linear_patch: LinearPatchNames | None = None

    @property
    def task(self) -> str:
        if self.qwen_vl:
            return HYBRID_QWEN_VL_TASK if self.hybrid else QWEN_VL_TASK
        return PIXTRAL_TASK if self.pixtral else VLM_TASK

    @property
    def deepstack(self) -> int:
        """DeepStack mergers: their features reach the decoder beside the merged embeddings."""
        return self.qwen_vl.deepstack if self.qwen_vl else 0

    @property
    def own_decoder(self) -> bool:
        """The decoder takes inputs mobius' tasks do not give it (``input_ids``,
        ``token_type_ids``, DeepStack features)."""
        return bool(self.token_blocks) or bool(self.deepstack)

    @property
    def own_task(self) -> bool:
        """The module builds its graphs through a task class of its own: a decoder of its own
        (``own_decoder``) or a vision encoder that takes tiles with ``image_sizes`` or flattened
        patches."""
        return self.own_decoder or self.tiles is not None or self.linear_patch is not None

    @property
    def merge_layer(self) -> ProjectorLayer | None:
        return next((layer for layer in self.layers if layer.op == "patch_merge"), None)

    @property
    def tower_class(self) -> str:
        return f"{self.prefix}VisionTransformer"

    @property
    def config_class(self) -> str:
        return f"{self.prefix}MultiModalConfig"

    @property
    def model_class(self) -> str:
        return f"{self.prefix}MultiModalModel"

    @property
    def encoder_class(self) -> str:
        return f"{self.prefix}VisionEncoder"

    @property
    def projector_class(self) -> str:
        return f"{self.prefix}MultiModalProjector"

    @property
    def embedding_class(self) -> str:
        return f"{self.prefix}Embedding"

    @property
    def decoder_class(self) -> str:
        return f"{self.prefix}Decoder"

    @property
    def task_class(self) -> str:
        return f"{self.prefix}VisionLanguageTask"

    @property
    def component_imports(self) -> str:
        """The ``mobius.components`` names the generated projector and embedding use."""
        names = set() if self.scaled_embeddings else {"Embedding"}
        if self.linear_patch is not None:
            names.add("Linear")
        for layer in self.layers:
            names |= {
                "activation": {"get_activation"},
                "glu": {"get_activation"},
                "gated_mlp": {"Linear", "get_activation"},
                "perceiver": {"Linear", "RMSNorm", "GatedMLP"},
                "linear": {"Linear"},
                "patch_merge": {"Linear"},
                "layer_norm": {"LayerNorm"},
                "rms_norm": {"OffsetRMSNorm" if layer.offset else "RMSNorm"},
            }.get(layer.op, set())
        return ", ".join(sorted(names, key=lambda n: (n[0].islower(), n)))


def vision_blockers(spec: ArchitectureSpec) -> list[str]:
    """What the generator cannot write for this vision side, each with where it was seen."""
    vision = spec.vision
    if vision is None:
        return []
    found = []
    tower = vision.tower
    found += tile_blockers(vision)
    if isinstance(tower, LinearPatchTowerSpec):
        return found + linear_patch_blockers(spec) + _text_blockers(spec)
    if isinstance(tower, QwenVLTowerSpec):
        return found + qwen_vl_blockers(vision) + _text_blockers(spec)
    if isinstance(tower, PixtralTowerSpec):
        found += pixtral_blockers(tower)
    elif not _plain_vit(tower) or not (_clip_shaped(tower) or _tower_names(tower)):
        found.append(
            f"{vision.towers.kind} tower with a layout the generated ViT does not follow "
            f"({', '.join(f'{r}={n}' for r, n in tower.names)}; vision.tower.names)"
        )
    if len(vision.select.layers) != 1 and isinstance(tower, PixtralTowerSpec):
        found.append(
            "features from several layers of a Pixtral tower (vision.select): the generated "
            "Pixtral tower returns one hidden state"
        )
    merges = any(s.op == "patch_merge" for s in vision.projector.steps)
    if merges and not isinstance(tower, PixtralTowerSpec):
        found.append(
            "a patch merge over a tower that hands on no patch grid (vision.projector): the "
            "generated projector merges patches behind a Pixtral tower only"
        )
    nested = [s.name for s in vision.projector.steps if s.op == "linear" and s.name.count(".") > 1]
    if nested:
        found.append(
            f"projector linears nested two levels or more ({', '.join(nested)}; "
            "vision.projector): the generated projector holds a linear at most one level down"
        )
    offsets = {s.weight_offset for s in vision.projector.steps if s.op == "rms_norm"}
    if offsets - {0.0, 1.0}:
        found.append(
            f"a projector RMSNorm scaling by {sorted(offsets)} + w (vision.projector): mobius "
            "norms scale by w or 1 + w"
        )
    widths = _widths(vision.projector.steps)
    if any(_width_expr(vision, spec.text.hidden_size, w) is None for w in widths if w):
        found.append("a projector width that is neither the tower's nor the text's")
    own = vision.projector.width
    if own is not None and own.key.startswith("text_config.") and _text_width(own.key) is None:
        found.append(
            f"a projector width set by {own.key} (vision.projector.width): the generated "
            "config reads the text's intermediate_size only"
        )
    found += _gated_blockers(vision.projector.steps)
    found += perceiver_blockers(vision, spec.text.hidden_size)
    return found + _text_blockers(spec)


def _gated_blockers(steps: tuple[ProjectorStep, ...]) -> list[str]:
    """A gated unit the generated projector holds as HF does: in one module, one level down,
    with the linear after it (Idefics 2's modality_projection: gate_proj, up_proj, down_proj)."""
    found = []
    for at, step in enumerate(steps):
        if step.op != "gate_up":
            continue
        after = steps[at + 1] if at + 1 < len(steps) else None
        holder = step.name.partition(".")[0]
        held = [step.name, step.up, after.name if after else ""]
        if (
            after is None
            or after.op != "linear"
            or any(n.count(".") != 1 or n.partition(".")[0] != holder for n in held)
        ):
            found.append(
                f"a gated unit at {step.name} not held with the linear after it in one module "
                "(vision.projector): the generated projector holds gate, up and down together"
            )
    return found


def _text_width(key: str) -> str | None:
    """The generated config's expression of a text_config width: mobius' text config holds
    intermediate_size."""
    return "config.intermediate_size" if key == "text_config.intermediate_size" else None


def _text_blockers(spec: ArchitectureSpec) -> list[str]:
    """What the generated decoder cannot do with the text model on merged embeddings."""
    vision = spec.vision
    assert vision is not None
    found = []
    text = spec.text
    if text.embedding_scale != "none" and not vision.merge.scaled_before_merge:
        found.append(
            "a text embedding scale HF applies after the merge (text.embedding_scale, "
            "vision.merge): the generated embedding scales the token rows only"
        )
    if any(s.site != "logits" for s in text.scales):  # the decoder applies a logit scale
        found.append(
            "config multipliers of the text model (text.scales): the generated decoder runs "
            "the text model and head on merged embeddings without them"
        )
    if text.final_logit_softcap is not None or text.lm_head_bias:
        found.append(
            "a soft-capped or biased head: the generated decoder runs mobius' TextModel and "
            "head on embeddings"
        )
    recurrent = text.mixers.in_use()
    if recurrent and (not isinstance(vision.tower, QwenVLTowerSpec) or vision.deepstack):
        found.append(
            f"a hybrid text model ({', '.join(recurrent)} layers; text.mixers) under "
            + ("a DeepStack tower" if vision.deepstack else f"a {vision.towers.kind} tower")
            + ": the generated decoder carries recurrent states through mobius' hybrid-qwen-vl "
            "task only, whose vision encoder returns the merged features alone"
        )
    return found


def design_vision(spec: ArchitectureSpec, prefix: str) -> VisionDesign | None:
    vision = spec.vision
    if vision is None:
        return None
    prefixes = dict(vision.prefixes)
    tower = vision.tower
    if isinstance(tower, QwenVLTowerSpec):
        return _design_qwen_vl(vision, prefix)
    if isinstance(tower, LinearPatchTowerSpec):
        return _design_linear_patch(spec, prefix)
    if isinstance(tower, PixtralTowerSpec):
        pixtral, clip = pixtral_names(tower), False
    else:
        several = len(vision.select.layers) > 1  # CLIPVisionModel returns one hidden state
        pixtral, clip = None, _clip_shaped(tower) and not vision.select.post_norm and not several
    return VisionDesign(
        prefix=prefix,
        tower_attribute=prefixes["tower"].rstrip(".").split(".")[-1],
        projector_attribute=prefixes["projector"].rstrip(".").split(".")[-1],
        layers=_layers(vision, spec),
        fields=_fields(vision)
        + _fields_of_pixtral(vision)
        + _fields_of_tiles(vision)
        + tuple(ConfigField(*row) for row in perceiver_fields(vision)),
        text_prefix=prefixes["text"],
        head_prefix=prefixes.get("lm_head"),
        tower_prefix=prefixes["tower"],
        projector_prefix=prefixes["projector"],
        published_levels=tuple(
            published.removeprefix(saved) for published, saved in vision.published_aliases
        ),
        changes=_changes(vision) + _blocks_change(spec),
        tower=None if clip or pixtral else _tower_names(tower),
        patch_bias=tower.patch_bias,
        post_normed=vision.select.post_norm,
        scaled_embeddings=vision.merge.scaled_before_merge,
        token_blocks=vision.merge.token_blocks,
        pixtral=pixtral,
        image_rows=vision.image_rows,
        other_prefixes=tuple(other.prefix for other in vision.other_paths),
        other_paths=" or ".join(dict.fromkeys(other.path for other in vision.other_paths)),
        several_layers=len(vision.select.layers) > 1,
        square_pairs=isinstance(tower, VitTowerSpec) and tower.sizes_as_pairs,
        tiles=tile_names(spec),
        perceiver=perceiver_names(vision),
    )


def _design_linear_patch(spec: ArchitectureSpec, prefix: str) -> VisionDesign:
    """No tower and no projector: the encoder holds HF's patch linear under its own name."""
    vision = spec.vision
    assert vision is not None
    prefixes = dict(vision.prefixes)
    names = linear_patch_names(vision)
    return VisionDesign(
        prefix=prefix,
        tower_attribute=names.patch if names else "",
        projector_attribute="",
        layers=(),
        fields=tuple(ConfigField(*row) for row in linear_patch_fields(vision)),
        text_prefix=prefixes["text"],
        head_prefix=prefixes.get("lm_head"),
        tower_prefix=prefixes["tower"],
        projector_prefix="",
        published_levels=(),
        changes=linear_patch_changes(spec),
        scaled_embeddings=vision.merge.scaled_before_merge,
        linear_patch=names,
    )


def _fields_of_tiles(vision: VisionSpec) -> tuple[ConfigField, ...]:
    return tuple(ConfigField(*row) for row in tile_fields(vision)) if vision.tiles else ()


def _design_qwen_vl(vision: VisionSpec, prefix: str) -> VisionDesign:
    """mobius' windowed ViT under the tower's HF attribute, the merger generated inside it."""
    prefixes = dict(vision.prefixes)
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec) and vision.merge.mrope is not None
    attribute = prefixes["tower"].rstrip(".").split(".")[-1]
    names = qwen_vl_names(vision)
    mrope = vision.merge.mrope
    section_key = mrope.key.split(".")
    keys = dict(tower.keys)
    rows = [
        (
            "spatial_merge_size",
            "int",
            str(tower.spatial_merge_size),
            f"top.vision_config.{keys['spatial_merge_size']}",
            "the side of the block of patches the merger turns into one token",
        ),
        (
            "temporal_patch_size",
            "int",
            str(tower.temporal_patch_size),
            f"top.vision_config.{keys['temporal_patch_size']}",
            "frames per patch (the Conv3d's depth)",
        ),
    ]
    if names.windows:
        rows += [
            (
                "window_size",
                "int",
                str(tower.window_size),
                f"top.vision_config.{keys['window_size']}",
                "the side in pixels of the windows the window-attention layers attend within",
            ),
            (
                "fullatt_block_indexes",
                "list[int] | None",
                "None",
                f"list(top.vision_config.{keys['fullatt_layers']})",
                "the tower layers that attend over the whole image",
            ),
        ]
    if names.glm is not None:  # mobius reads layer_norm_eps or norm_eps, GLM-4V rms_norm_eps
        rows.append(glm_norm_field(tower))
    if names.positions:
        rows.append(
            (
                "num_position_embeddings",
                "int",
                str(tower.position_embeddings),
                f"top.vision_config.{keys['position_embeddings']}",
                "the learned position table's rows (a square grid resampled to each image)",
            )
        )
    if vision.deepstack is not None:
        rows.append(
            (
                "deepstack_visual_indexes",
                "list[int] | None",
                "None",
                f"list(top.vision_config.{vision.deepstack.key})",
                "the tower layers whose merged features are added to the first text layers' "
                "outputs at the image placeholders (DeepStack)",
            )
        )
    rows.append(
        (
            "mrope_section",
            "list[int] | None",
            "None",
            f"list(top.text_config.{section_key[0]}[{section_key[1]!r}])".replace("'", '"'),
            "the M-RoPE sections: how much of each head's rotated half turns with the "
            "temporal, row and column positions",
        )
    )
    if mrope.layout == "interleaved":
        rows.append(
            (
                "mrope_interleaved",
                "bool",
                "False",
                "True",
                "the sections take turns frequency by frequency (HF's interleaved M-RoPE), "
                "not in consecutive runs",
            )
        )
    fields = tuple(ConfigField(*row) for row in rows)
    return VisionDesign(
        prefix=prefix,
        tower_attribute=attribute,
        projector_attribute=f"{attribute}.{names.merger}",
        layers=(),
        fields=fields,
        text_prefix=prefixes["text"],
        head_prefix=prefixes.get("lm_head"),
        tower_prefix=prefixes["tower"],
        projector_prefix=prefixes["projector"],
        published_levels=(),
        changes=_qwen_vl_changes(vision, names),
        qwen_vl=names,
    )


def _qwen_vl_changes(vision: VisionSpec, names: QwenVLNames) -> tuple[str, ...]:
    mrope = vision.merge.mrope
    assert mrope is not None
    if names.glm is not None:
        tower = GLM_TOWER_CHANGE
    elif names.own_merger:
        tower = (
            "vision encoder: mobius' Qwen3-VL ViT over flattened patches and image_grid_thw, "
            "learned positions resampled to each grid, every layer attending per image"
        )
    elif names.windows:
        tower = (
            "vision encoder: mobius' windowed ViT over flattened patches and image_grid_thw, "
            "windows and full-attention layers read from the composite config"
        )
    else:
        tower = (
            "vision encoder: mobius' Qwen2-VL ViT over flattened patches and image_grid_thw, "
            "every layer attending per image"
        )
    steps = " -> ".join(s.activation or s.name or s.op for s in vision.projector.steps)
    changes = [
        tower,
        f"merger: {steps}" + (" (mobius' own, under HF's names)" if names.own_merger else ""),
        "image features fill the placeholder tokens in reading order over the whole batch",
        f"positions: M-RoPE sections ({mrope.layout}"
        + (", on adjacent channel pairs" if mrope.pairs == "adjacent" else "")
        + f") from text_config.{mrope.key}, computed by the host",
    ]
    if vision.deepstack is not None:
        changes.append(
            f"DeepStack: tower layers {list(vision.deepstack.layers)} through their own "
            "mergers, added to the outputs of the first text layers at the image placeholders "
            "(the vision encoder outputs them, the decoder takes them)"
        )
    return tuple(changes)


def _clip_shaped(tower: VitTowerSpec) -> bool:
    """What mobius' CLIPVisionModel computes and loads: a plain ViT with CLIP's class token,
    pre-norm, bias-free patch convolution and names."""
    return (
        _plain_vit(tower)
        and tower.attention.q_bias
        and not tower.layer_scale
        and not tower.table_parameters
        and tower.class_token
        and tower.pre_norm
        and not tower.patch_bias
        and dict(tower.names).get("o_proj") == "out_proj"
        and tower.mlp.projections == ("fc1", "fc2")
    )


def _plain_vit(tower: VitTowerSpec) -> bool:
    """What the generated ViT computes: q/k/v biased (always, or by a config key), a biased
    output projection, head_dim ** -0.5, a biased two-linear MLP, biased LayerNorms."""
    a = tower.attention
    qkv = {a.q_bias, a.k_bias, a.v_bias}  # one bias for the three: always, or by its key
    return (
        len(qkv) == 1
        and (a.q_bias or tower.qkv_bias_key is not None)
        and a.o_bias
        and a.scale == a.head_dim**-0.5
        and tower.mlp.kind == "plain"
        and tower.mlp.bias
        and len(tower.mlp.projections) == 2
        and tower.norm.kind == "layer"
        and tower.norm.bias
    )


def _tower_names(tower: VitTowerSpec) -> TowerNames | None:
    """The generated ViT's names, when HF's nest as CLIP's and SigLIP's do (embeddings.<x>,
    <encoder>.<layers>); None otherwise."""
    names = dict(tower.names)
    embeddings = {names[r].partition(".")[0] for r in ("patch", "positions") if r in names}
    if "class_embedding" in names:
        embeddings.add(names["class_embedding"].partition(".")[0])
    encoder, _, layers = names["layers"].partition(".")
    if len(embeddings) != 1 or not layers or "." in layers:
        return None
    (parent,) = embeddings
    norms = dict(tower.norm.names)
    patch = names["patch"].partition(".")[2]
    return TowerNames(
        embeddings=parent,
        patch=patch.rpartition(".")[2],
        patch_path=patch if "." in patch else "",
        o_proj=names["o_proj"],
        table_parameters=tower.table_parameters,
        scales=(names["attn_scale"], names["mlp_scale"]) if tower.layer_scale else None,
        qkv_bias_key=tower.qkv_bias_key,
        positions=names["positions"].partition(".")[2],
        class_token=names["class_embedding"].partition(".")[2]
        if "class_embedding" in names
        else None,
        encoder=encoder,
        layers=layers,
        pre_norm=names.get("pre_norm"),
        post_norm=names.get("post_norm"),
        head=names.get("head"),
        norms=(norms["attn_in"], norms["mlp_in"]),
        attention=names["attention"],
        mlp=names["mlp"],
        mlp_projections=(tower.mlp.projections[0], tower.mlp.projections[1]),
    )


def _widths(steps: tuple[ProjectorStep, ...]) -> list[int]:
    sized = ("linear", "matmul")
    return [w for s in steps if s.op in sized for w in (s.in_features, s.out_features)]


def _width_expr(vision: VisionSpec, text_hidden: int, width: int) -> str | None:
    """The config expression of a projector width: the tower's (times the layers it reads)
    or the text's."""
    layers = len(vision.select.layers)
    if width == vision.tower.hidden_size * layers:
        return "config.vision.hidden_size" + (f" * {layers}" if layers > 1 else "")
    own = vision.projector.width
    if own is not None and width in (own.value, own.value // 2):
        return _own_width(own.key) + (" // 2" if width != own.value else "")
    if width == text_hidden:
        return "config.hidden_size"
    glu = any(s.op == "glu" for s in vision.projector.steps)
    if glu and width * 2 == text_hidden:  # the value half of a gated unit
        return "config.hidden_size // 2"
    shuffle = _shuffle(vision)
    if shuffle is not None and width == shuffle.out_features:
        return _SHUFFLED_WIDTH
    return None


# A width of the projector's own, set by a key of the composite config
_OWN_WIDTH = '_vision_field(config, "{key}")'
# The tower's width after the pixel shuffle: a block of patches' features side by side
_SHUFFLED_WIDTH = 'config.vision.hidden_size * _vision_field(config, "pixel_shuffle_factor") ** 2'


def _own_width(key: str) -> str:
    """A width of the projector's own: a field read from its key, or the text config's."""
    if key.startswith("text_config."):
        return _text_width(key) or ""
    return _OWN_WIDTH.format(key=key)


def _shuffle(vision: VisionSpec) -> ProjectorStep | None:
    return next((s for s in vision.projector.steps if s.op == "pixel_shuffle"), None)


def _kernel_expr(shuffle: ProjectorStep) -> str:
    """The pixel shuffle's side, read from the composite config as HF reads it."""
    if not shuffle.kernel_key:
        return str(shuffle.kernel)
    if shuffle.kernel_from_ratio:
        return f"round(1 / top.{shuffle.kernel_key})"
    return f"top.{shuffle.kernel_key}"


def _layers(vision: VisionSpec, spec: ArchitectureSpec) -> tuple[ProjectorLayer, ...]:
    """The projector's steps with their sizes as config expressions, the width followed
    through the steps: the projector reads the tower's (times the layers it reads), a linear or
    product writes the text's when that is its width (so when the two are equal, as in
    LightOnOCR, the projector ends on the text's)."""
    text_hidden = spec.text.hidden_size
    reading = len(vision.select.layers)
    width = "config.vision.hidden_size" + (f" * {reading}" if reading > 1 else "")
    layers = []
    steps = vision.projector.steps
    for at, step in enumerate(steps):
        if at and steps[at - 1].op == "gate_up":  # the down linear, held by the gated unit
            width = _out_expr(vision, text_hidden, step)
            continue
        if step.op == "gate_up" and at + 1 < len(steps):
            layers.append(_gated(vision, text_hidden, step, steps[at + 1], width))
            continue
        layers.append(_layer(vision, spec, step, width))
        _require_in_list_order(layers)
        if step.op in ("linear", "matmul"):
            width = _out_expr(vision, text_hidden, step)
        elif step.op == "pixel_shuffle":
            width = _SHUFFLED_WIDTH
        elif step.op == "glu":
            width = f"{width} // 2"
    return tuple(layers)


def _require_in_list_order(layers: list[ProjectorLayer]) -> None:
    """The generated projector appends a list's linears as the forward calls them, so the
    forward must call them in their list order (hidden_layers.0, then .1, ...)."""
    last = layers[-1]
    if not last.numbered:
        return
    before = sum(1 for layer in layers[:-1] if layer.numbered and layer.attribute == last.attribute)
    if int(last.inner) != before:
        raise UnsupportedFeatureError(
            f"the projector calls {last.name} after {before} linears of {last.attribute}: the "
            "generated projector calls a list's linears in their order"
        )


def _out_expr(vision: VisionSpec, text_hidden: int, step: ProjectorStep) -> str:
    own = vision.projector.width
    if own is not None and step.name in own.linears:
        return _own_width(own.key)
    if step.out_features == text_hidden:
        return "config.hidden_size"
    return _width_expr(vision, text_hidden, step.out_features) or ""


def _gated(
    vision: VisionSpec, text_hidden: int, gate: ProjectorStep, down: ProjectorStep, width: str
) -> ProjectorLayer:
    """A gated unit and the linear after it, in the module of HF's that holds the three."""
    holder = gate.name.partition(".")[0]
    return ProjectorLayer(
        gate.name,
        "gated_mlp",
        label=holder,
        in_expr=width,
        mid_expr=_out_expr(vision, text_hidden, gate),
        out_expr=_out_expr(vision, text_hidden, down),
        bias_expr=str(gate.bias),
        up=gate.up.partition(".")[2],
        down=down.name.partition(".")[2],
    )


def _layer(
    vision: VisionSpec, spec: ArchitectureSpec, step: ProjectorStep, width: str
) -> ProjectorLayer:
    """One step; ``width``: the config expression of the width that reaches it."""
    text_hidden = spec.text.hidden_size
    if step.op in ("activation", "avg_pool", "pixel_shuffle", "glu", "perceiver"):
        return ProjectorLayer(step.name, step.op, label=step.activation or step.name)
    if step.op in ("layer_norm", "rms_norm"):
        return ProjectorLayer(
            step.name,
            step.op,
            label=step.name,
            in_expr=width,
            eps_expr=_eps_expr(vision, spec, step.eps),
            offset=step.weight_offset == 1.0,
        )
    if step.op == "patch_merge":
        label = step.name.partition(".")[0]
        return ProjectorLayer(step.name, step.op, label=label, bias_expr=str(step.bias))
    bias_key = vision.projector.bias_key
    return ProjectorLayer(
        step.name,
        step.op,
        label=step.name,
        in_expr=width,
        out_expr=_out_expr(vision, text_hidden, step),
        bias_expr=f"config.{bias_key}" if bias_key else str(step.bias),
    )


def _eps_expr(vision: VisionSpec, spec: ArchitectureSpec, eps: float) -> str:
    """The tower's epsilon when the norm shares it and HF reads it from vision_config; else the
    text's when it is that (Mistral 3's projector norm: text_config.rms_norm_eps)."""
    tower = vision.tower.norm
    if eps == tower.eps and tower.eps_key is not None:
        return "config.vision.norm_eps"
    return "config.rms_norm_eps" if eps == spec.text.norm.eps else repr(eps)


def _fields(vision: VisionSpec) -> tuple[ConfigField, ...]:
    select = vision.select
    if len(select.layers) > 1:
        layers = ConfigField(
            "vision_feature_layers",
            "tuple[int, ...]",
            str(select.layers),
            f"tuple(top.{select.layer_key})" if select.layer_key else str(select.layers),
            "the hidden states the projector reads, concatenated along the width (indices "
            "into the tower's hidden states)",
        )
    else:
        layers = ConfigField(
            "vision_feature_layer",
            "int",
            str(select.layers[0]),
            f"top.{select.layer_key}" if select.layer_key else str(select.layers[0]),
            "the hidden state the projector reads (index into the tower's hidden states)",
        )
    fields = [
        layers,
        ConfigField(
            "drop_class_token",
            "bool",
            str(select.drop_class_token),
            f'top.{select.strategy_key} == "default"'
            if select.strategy_key
            else str(select.drop_class_token),
            "the class token's feature is dropped before the projector",
        ),
    ]
    tower = vision.tower
    if isinstance(tower, VitTowerSpec) and tower.qkv_bias_key:
        fields.append(
            ConfigField(
                "vision_attention_bias",
                "bool",
                str(tower.attention.q_bias),
                f"top.vision_config.{tower.qkv_bias_key}",
                "the tower's q/k/v projections add a bias (its output projection always does)",
            )
        )
    steps = vision.projector.steps
    activation = next(
        (s.activation for s in steps if s.op in ("activation", "glu", "gate_up")), None
    )
    if activation is not None:
        key = vision.projector.activation_key
        fields.append(
            ConfigField(
                "projector_hidden_act",
                "str",
                f'"{activation}"',
                f"top.{key}" if key else f'"{activation}"',
                "the projector's activation",
            )
        )
    bias = next((s.bias for s in steps if s.op == "linear"), None)
    if bias is not None:
        bias_key = vision.projector.bias_key
        fields.append(
            ConfigField(
                "multimodal_projector_bias",
                "bool",
                str(bias),
                f"top.{bias_key}" if bias_key else str(bias),
                "the projector's linears add a bias",
            )
        )
    pool = next((s for s in steps if s.op == "avg_pool"), None)
    if pool is not None:
        side = vision.tower.image_size // vision.tower.patch_size // pool.kernel
        fields.append(
            ConfigField(
                "mm_tokens_per_image",
                "int",
                str(side * side),
                f"top.{pool.tokens_key}" if pool.tokens_key else str(side * side),
                "image tokens per image after the projector's average pool",
            )
        )
    own = vision.projector.width
    if own is not None and not own.key.startswith("text_config."):  # else the text's field
        fallback = ", top.text_config.hidden_size" if own.text_fallback else ""
        fields.append(
            ConfigField(
                own.key,
                "int",
                str(own.value),
                f'getattr(top, "{own.key}"{fallback})' if fallback else f"top.{own.key}",
                "the width between the projector's linears"
                + (" (the text's hidden size when the config has none)" if fallback else ""),
            )
        )
    shuffle = _shuffle(vision)
    if shuffle is not None:
        fields.append(
            ConfigField(
                "pixel_shuffle_factor",
                "int",
                str(shuffle.kernel),
                _kernel_expr(shuffle),
                "the side of the block of patches the pixel shuffle folds into one token",
            )
        )
    return tuple(fields)


def _fields_of_pixtral(vision: VisionSpec) -> tuple[ConfigField, ...]:
    """What mobius reads wrong for a Pixtral tower: its RoPE base (transformers 5 keeps it in
    rope_parameters) and the patch merge size (on the composite config, not the vision one)."""
    tower = vision.tower
    if not isinstance(tower, PixtralTowerSpec):
        return ()
    fields = [
        ConfigField(
            "vision_rope_theta",
            "float",
            repr(tower.rope_theta),
            'top.vision_config.rope_parameters["rope_theta"]',
            "the base of the tower's 2-D RoPE",
        )
    ]
    merge = next((s for s in vision.projector.steps if s.op == "patch_merge"), None)
    if merge is not None:
        fields.append(
            ConfigField(
                "spatial_merge_size",
                "int",
                str(merge.kernel),
                f"top.{merge.kernel_key}" if merge.kernel_key else str(merge.kernel),
                "the side of the square of patches the projector merges into one",
            )
        )
    return tuple(fields)


def _changes(vision: VisionSpec) -> tuple[str, ...]:
    select = vision.select
    kept = (
        "with no class token"
        if not vision.tower.class_token
        else "without the class token"
        if select.drop_class_token
        else "with the class token"
    )
    steps = " -> ".join(
        s.activation
        if s.op == "activation"
        else f"{s.activation}({s.name}) * {s.up}"
        if s.op == "gate_up"
        else s.name
        for s in vision.projector.steps
    )
    rows = (
        (
            "pixel_values [rows, images per row, channels, height, width]: the host feeds the "
            "encoder the real images in reading order (HF drops all-zero padding images); "
            "full tiles only, pixel_attention_mask is not read (every patch real)",
        )
        if vision.image_rows
        else ()
    )
    return (
        f"vision features: hidden state {select.layers[0]} of the tower, {kept}",
        f"projector: {steps}",
        *(tile_changes(vision) if vision.tiles else ()),
        *((perceiver_change(vision),) if perceiver_names(vision) else ()),
        "image features fill the placeholder tokens in reading order over the whole batch",
        *rows,
        *(
            f"{other.path} not generated: {other.part}, read for {other.path} only, is left "
            f"out ({len(other.tensors)} checkpoint tensors)"
            for other in vision.other_paths
        ),
    )


def _blocks_change(spec: ArchitectureSpec) -> tuple[str, ...]:
    """What the token types do to the mask, cited at HF's line."""
    from onboard.targets.mobius.settings import why

    assert spec.vision is not None
    phrase = {
        "images": "each image's placeholders see each other both ways (token_type_ids 1; the "
        "decoder finds them in input_ids)",
        "prefix": "the tokens token_type_ids type 0 (the image and the prompt) see each other "
        "both ways, a bidirectional prefix; the suffix typed 1 stays causal",
    }.get(spec.vision.merge.token_blocks)
    return (why(phrase, spec, "vision.merge.token_blocks"),) if phrase else ()


def unread_tensors(spec: ArchitectureSpec) -> dict[str, str]:
    """Checkpoint tensors HF's VLM computes with but never reads the result of, each with why:
    tower layers past the selected hidden state, a post norm the selection skips, a pooling
    head, the parts only videos or image generation read. The generated graph leaves them out;
    the weight proof lists them by name."""
    vision = spec.vision
    if vision is None or isinstance(vision.tower, LinearPatchTowerSpec):
        return {}  # a linear patch embedding: every tensor is read
    tower = vision.tower
    prefix = dict(vision.prefixes)["tower"]
    states = tower.num_layers + 1
    needed = max(i % states for i in vision.select.layers)
    layers = tower.name_of("layers")
    unread = {}
    for name, _ in vision.tensors:
        relative = name.removeprefix(prefix)
        if relative.startswith(f"{layers}."):
            index = int(relative.removeprefix(f"{layers}.").split(".")[0])
            if index >= needed:
                unread[name] = f"tower layer {index} comes after hidden state {needed}"
        elif tower.post_norm and relative.startswith(f"{tower.name_of('post_norm')}."):
            if not vision.select.post_norm:
                unread[name] = "the post norm: the projector reads a hidden state before it"
        elif "head" in dict(tower.names) and relative.startswith(f"{tower.name_of('head')}."):
            unread[name] = "the tower's pooling head, whose output no VLM reads"
    for other in vision.other_paths:
        for name in other.tensors:
            unread[name] = f"{other.part} is read for {other.path} only"
    return unread
