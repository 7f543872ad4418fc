"""GLM-4V's tower for mobius: generated, since mobius 0.1.0 has none (it registers glm4v and
glm4v_moe to ``LLaVAModel``, a SigLIP-style ViT over square images, which
``vision_bugs.grid_tower_defects`` reports).

The generated tower reuses what mobius' Qwen3-VL ViT computes as HF's GLM-4V does, proved by
parity: the Conv3d patch embedding (``Qwen3VLPatchEmbed``), the 2-D RoPE table and each patch's
row and column in merge-block order, the per-frame attention boundaries, and the packed
attention (``Qwen3VLVisionAttention``, its projections' biases set from the spec). Generated:
the patch norm, the learned positions resampled bicubically (ONNX ``GridSample``, cubic, at
each patch's centre, border padding), RMS pre-norm layers with a gated MLP, the tower's end
norm and downsample convolution, and the merger from its steps, all under HF's names.
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.targets.mobius.merger import MergerLayer
from onboard.vision import GlmTowerParts, ProjectorStep, QwenVLTowerSpec, VisionSpec

# mobius' Qwen3-VL rotary table and its attention's projection names
_MOBIUS_THETA = 10000.0
_ATTENTION_NAMES = {"patch": "patch_embed.proj", "qkv": "qkv", "o_proj": "proj"}
_NORMS = {"rms_norm": "RMSNorm", "layer_norm": "LayerNorm"}
GLM_TOWER_CHANGE = (
    "vision encoder: a generated GLM-4V ViT over flattened patches and image_grid_thw (mobius' "
    "Qwen3-VL patches, RoPE and attention; the patch norm, learned positions resampled "
    "bicubically, the end norm and the downsample convolution), every layer attending per image"
)


@dataclass(frozen=True)
class GlmNames:
    """HF's names (relative to the tower) and the spec's constants the generated tower uses."""

    positions_holder: str  # embeddings
    positions: str  # position_embedding
    patch_norm: str
    patch_norm_class: str
    end_norm: str
    end_norm_class: str
    downsample: str
    downsample_bias: bool
    layers: str
    attention: str
    mlp: str
    mlp_projections: tuple[str, str, str]  # gate, up, down
    norms: tuple[str, str]  # attn_in, mlp_in
    norm_class: str
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    merger: str
    steps: tuple[MergerLayer, ...]


def glm_blockers(vision: VisionSpec) -> list[str]:
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec) and tower.glm is not None
    names = dict(tower.names)
    found = [
        f"a GLM-4V {role} named {names.get(role)} (vision.tower.names): the generated tower "
        f"reuses mobius' Qwen3-VL {name}"
        for role, name in _ATTENTION_NAMES.items()
        if names.get(role) != name
    ]
    if not tower.patch_bias:
        found.append(
            "a bias-free patch convolution under a GLM-4V tower (vision.tower.patch_bias): "
            "mobius' Qwen3VLPatchEmbed has a bias"
        )
    if tower.rope_theta != _MOBIUS_THETA:
        found.append(
            f"a GLM-4V tower RoPE base {tower.rope_theta} (vision.tower.rope_theta): mobius' "
            "Qwen3-VL rotary table fixes 10000"
        )
    if tower.mlp.kind != "gated" or tower.norm.weight_offset or tower.window_size:
        found.append(
            f"a GLM-4V layer with a {tower.mlp.kind} MLP, windows or offset norms "
            "(vision.tower): the generated layer is RMS pre-norm, gated MLP, per-image attention"
        )
    if "." in names["positions"].partition(".")[2] or tower.glm.resample != "bicubic":
        found.append(
            f"learned positions at {names['positions']} resampled {tower.glm.resample} "
            "(vision.tower.glm): the generated tower resamples bicubically, one level down"
        )
    steps = vision.projector.steps
    if any(
        s.op not in ("linear", "layer_norm", "rms_norm", "activation", "gate_up") for s in steps
    ):
        found.append(
            f"a GLM-4V merger {' -> '.join(s.op for s in steps)} (vision.projector): the "
            "generated merger runs linears, norms, activations and gated units"
        )
    offsets = [
        s.name for s in (*steps, tower.glm.patch_norm, tower.glm.end_norm) if s.weight_offset
    ]
    if offsets:
        found.append(f"offset RMS norms {offsets} (vision.tower.glm, vision.projector)")
    return found


def glm_names(vision: VisionSpec) -> GlmNames:
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec) and tower.glm is not None
    glm: GlmTowerParts = tower.glm
    holder, _, leaf = tower.name_of("positions").partition(".")
    norms = dict(tower.norm.names)
    gate, up, down = tower.mlp.projections
    return GlmNames(
        positions_holder=holder,
        positions=leaf,
        patch_norm=glm.patch_norm.name,
        patch_norm_class=_NORMS[glm.patch_norm.op],
        end_norm=glm.end_norm.name,
        end_norm_class=_NORMS[glm.end_norm.op],
        downsample=tower.name_of("downsample"),
        downsample_bias=glm.downsample_bias,
        layers=tower.name_of("layers"),
        attention=tower.name_of("attention"),
        mlp=tower.name_of("mlp"),
        mlp_projections=(gate, up, down),
        norms=(norms["attn_in"], norms["mlp_in"]),
        norm_class="RMSNorm" if tower.norm.kind == "rms" else "LayerNorm",
        qkv_bias=tower.attention.q_bias,
        o_bias=tower.attention.o_bias,
        mlp_bias=tower.mlp.bias,
        merger=tower.name_of("merger"),
        steps=tuple(_step(s, tower) for s in vision.projector.steps),
    )


def _step(step: ProjectorStep, tower: QwenVLTowerSpec) -> MergerLayer:
    """Widths as config expressions: the tower's out_hidden_size (the text's) or the merger's
    own width (vision_config.intermediate_size, mobius' config.vision.intermediate_size)."""

    def width(value: int) -> str:
        if value == tower.out_hidden_size:
            return "config.vision.out_hidden_size"
        return "config.vision.intermediate_size"

    return MergerLayer(
        name=step.name,
        op=step.op,
        in_expr=width(step.in_features) if step.in_features else "",
        out_expr=width(step.out_features) if step.out_features else "",
        bias=step.bias,
        activation=step.activation,
        eps=step.eps,
        up=step.up,
    )


def glm_imports(names: GlmNames) -> str:
    classes = {"Linear", "get_activation", names.patch_norm_class, names.end_norm_class}
    classes |= {names.norm_class, "Conv2d" if names.downsample_bias else "Conv2dNoBias"}
    classes |= {_NORMS[s.op] for s in names.steps if s.op in _NORMS}
    return ", ".join(sorted(classes, key=lambda n: (n[0].islower(), n)))


def glm_norm_field(tower: QwenVLTowerSpec) -> tuple[str, str, str, str, str]:
    """The config field of the tower's norms' epsilon, read at its key (vision_config.
    rms_norm_eps), which mobius' vision config does not read."""
    key = tower.norm.eps_key or "rms_norm_eps"
    return (
        "vision_norm_eps",
        "float",
        repr(tower.norm.eps),
        f"top.vision_config.{key}",
        "the epsilon of the tower's norms (its layers', the patch norm's and the end norm's)",
    )
