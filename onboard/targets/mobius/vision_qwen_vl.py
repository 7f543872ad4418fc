"""A Qwen-VL tower for mobius: what the generated vision encoder needs from the spec, and what it
cannot follow.

mobius 0.1.0 has Qwen2.5-VL's windowed ViT (``components/_qwen25_vl_vision.py``,
``Qwen25VLVisionModel``): Conv3d patches, the window order over ``image_grid_thw`` computed in
the graph, 2-D RoPE, window and full attention layers, and the reverse order after the merger.
Parity proves it computes what HF's tower does, so the generated encoder subclasses it and
passes the window and full-attention settings read from the composite config (mobius reads them
on the model_type's own config). The merger is generated from the projector's steps (mobius'
fixes GELU and names ``mlp_0`` / ``mlp_2`` where HF's checkpoint says ``mlp.0`` / ``mlp.2``), and
so is the embedding (mobius' restarts the feature count on every row). The decoder is mobius'
text model with the M-RoPE sections set on the config, fed ``position_ids [3, B, S]`` that the
host computes (``qwen-vl`` task).

Qwen3-VL's tower is mobius' ``Qwen3VLVisionModel`` (``components/_qwen3_vl_vision.py``): learned
positions resampled to each grid, LayerNorm layers with a tanh-GELU MLP, and its own merger and
DeepStack mergers under HF's names. Its DeepStack features reach the decoder through a task of
the generated module's own (``qwen-vl`` has no such input; mobius' own 3-model Qwen3-VL drops
them).
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.targets.mobius.merger import MergerLayer
from onboard.targets.mobius.vision_glm import GlmNames, glm_blockers, glm_imports, glm_names
from onboard.vision import ProjectorSpec, QwenVLTowerSpec, VisionSpec

QWEN_VL_TASK = "qwen-vl"
# What mobius' Qwen25VLVisionModel builds and names (HF Qwen2.5-VL's names)
_NAMES = {
    "patch": "patch_embed.proj",
    "rope": "rotary_pos_emb",
    "layers": "blocks",
    "attention": "attn",
    "qkv": "qkv",
    "o_proj": "proj",
    "mlp": "mlp",
    "merger": "merger",
}
_MERGER_NORMS = ("rms_norm", "layer_norm")
_MERGER_OPS = ("group_rows", "linear", "activation", "linear")
# Fixed inside mobius' towers: the block norms' epsilon and the RoPE base
_MOBIUS_EPS = 1e-6
_MOBIUS_THETA = 10000.0


@dataclass(frozen=True)
class MobiusQwenTower:
    """What one of mobius' Qwen-VL tower classes fixes inside."""

    class_name: str
    mlp: str  # the block MLP's kind
    norm: str  # the block norms' kind
    activations: tuple[str, ...]  # HF names of the block MLP's activation it computes
    windows: bool  # it takes window_size and fullatt_block_indexes
    positions: bool  # learned positions resampled to each image's grid
    patch_bias: bool
    # its own merger (and DeepStack mergers) under HF Qwen3-VL's names
    own_merger: bool = False


_MOBIUS_TOWERS = (
    MobiusQwenTower("Qwen25VLVisionModel", "gated", "rms", ("silu",), True, False, False),
    MobiusQwenTower("Qwen2VLVisionModel", "plain", "layer", ("quick_gelu",), False, False, False),
    MobiusQwenTower(
        "Qwen3VLVisionModel",
        "plain",
        "layer",
        ("gelu_pytorch_tanh", "gelu_new"),
        False,
        True,
        True,
        own_merger=True,
    ),
)
# mobius' Qwen3VLPatchMerger: (name, op, bias) per step, GELU exact, LayerNorm at 1e-6; the
# DeepStack mergers norm after grouping the rows
_QWEN3_MERGER_STEPS = (
    ("norm", "layer_norm", False),
    ("", "group_rows", False),
    ("linear_fc1", "linear", True),
    (None, "activation", False),
    ("linear_fc2", "linear", True),
)
_QWEN3_DEEPSTACK_STEPS = (_QWEN3_MERGER_STEPS[1], _QWEN3_MERGER_STEPS[0], *_QWEN3_MERGER_STEPS[2:])


def mobius_tower(tower: QwenVLTowerSpec) -> MobiusQwenTower | None:
    """mobius' tower class for this tower: learned positions pick Qwen3-VL's, else the MLP."""
    if tower.position_embeddings:
        return _MOBIUS_TOWERS[2]
    return next((t for t in _MOBIUS_TOWERS[:2] if t.mlp == tower.mlp.kind), None)


# mobius' FCMLP names the plain MLP's linears so
_FCMLP = ("up_proj", "down_proj")


@dataclass(frozen=True)
class QwenVLNames:
    """The generated tower: one of mobius' Qwen-VL ViTs, with a generated merger unless the
    class has HF's own (Qwen3-VL)."""

    base_class: str  # mobius' tower: Qwen25VLVisionModel, Qwen2VLVisionModel, Qwen3VLVisionModel
    windows: bool  # the tower reads window_size and fullatt_block_indexes
    merger: str  # merger
    norm: str  # ln_q
    norm_class: str  # RMSNorm or LayerNorm
    norm_eps: float
    sequence: str  # mlp: the merger's linears and activation, HF's Sequential
    steps: tuple[MergerLayer, ...]  # what the sequence holds, in order; () with own_merger
    # HF's plain MLP linears -> mobius' FCMLP's (fc1 -> up_proj, fc2 -> down_proj)
    mlp_renames: tuple[tuple[str, str], ...] = ()
    own_merger: bool = False  # mobius' class builds the merger under HF's names
    positions: bool = False  # learned positions (num_position_embeddings)
    deepstack: int = 0  # DeepStack mergers: features added to the first this many text layers
    glm: GlmNames | None = None  # GLM-4V's tower, generated (vision_glm.py)

    @property
    def imports(self) -> str:
        if self.glm is not None:
            return glm_imports(self.glm)
        if self.own_merger:
            return self.base_class
        return ", ".join([*sorted({self.base_class, self.norm_class, "Linear"}), "get_activation"])


def qwen_vl_blockers(vision: VisionSpec) -> list[str]:
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec)
    if tower.glm is not None:
        return glm_blockers(vision) + _position_blockers(vision)
    found = []
    names = dict(tower.names)
    expected = dict(_NAMES)
    if tower.position_embeddings:
        expected["positions"] = "pos_embed"
    if vision.deepstack is not None:
        expected["deepstack"] = "deepstack_merger_list"
    if any(names.get(role) != name for role, name in expected.items()):
        found.append(
            f"a Qwen-VL tower laid out otherwise ({', '.join(f'{r}={n}' for r, n in tower.names)}; "
            "vision.tower.names): mobius' Qwen-VL towers keep HF Qwen2.5-VL's and Qwen3-VL's names"
        )
    a, m = tower.attention, tower.mlp
    if not (a.q_bias and a.o_bias) or a.scale != a.head_dim**-0.5:
        found.append(
            "a Qwen-VL attention without biases or with its own scale (vision.tower.attention): "
            "mobius' Qwen-VL attentions have biased qkv and proj at head_dim ** -0.5"
        )
    mobius = mobius_tower(tower)
    known = mobius is not None and mobius.mlp == m.kind and m.activation in mobius.activations
    if mobius is None or not known or not m.bias:
        found.append(
            f"a Qwen-VL MLP {m.kind} with bias={m.bias} and {m.activation} (vision.tower.mlp): "
            "mobius' Qwen-VL blocks fix a biased gated silu MLP (Qwen25VLVisionModel), a biased "
            "fc1 / fc2 quick_gelu one (Qwen2VLVisionModel) or a biased tanh-GELU one beside "
            "learned positions (Qwen3VLVisionModel)"
        )
        return found + _position_blockers(vision)
    if tower.norm.kind != mobius.norm or tower.norm.eps != _MOBIUS_EPS:
        found.append(
            f"{tower.norm.kind} norms at eps {tower.norm.eps} in the Qwen-VL layers "
            f"(vision.tower.norm): mobius' {mobius.class_name} fixes {mobius.norm} norms at 1e-6"
        )
    if tower.window_size and not mobius.windows:
        found.append(
            f"window attention in a Qwen-VL tower with a {m.kind} MLP (vision.tower.window_size): "
            f"mobius' {mobius.class_name} attends per image only"
        )
    if tower.rope_theta != _MOBIUS_THETA:
        found.append(
            f"a Qwen-VL tower RoPE base {tower.rope_theta} (vision.tower.rope_theta): mobius' "
            "Qwen-VL rotary embeddings fix 10000"
        )
    if tower.patch_bias != mobius.patch_bias:
        found.append(
            f"a Qwen-VL patch convolution with bias={tower.patch_bias} (vision.tower.patch_bias): "
            f"mobius' {mobius.class_name} fixes bias={mobius.patch_bias}"
        )
    found += _merger_blockers(vision, mobius)
    return found + _position_blockers(vision)


def _merger_blockers(vision: VisionSpec, mobius: MobiusQwenTower) -> list[str]:
    ops = tuple(s.op for s in vision.projector.steps)
    if mobius.own_merger:
        found = []
        if not _is_qwen3_merger(vision.projector, _QWEN3_MERGER_STEPS):
            found.append(
                f"a Qwen-VL merger {' -> '.join(ops)} (vision.projector): mobius' "
                f"{mobius.class_name} fixes norm -> group_rows -> linear_fc1 -> gelu -> "
                "linear_fc2, LayerNorm at 1e-6 and biased linears"
            )
        deepstack = vision.deepstack
        if deepstack is not None and not _is_qwen3_merger(
            deepstack.projector, _QWEN3_DEEPSTACK_STEPS
        ):
            found.append(
                "DeepStack mergers "
                f"{' -> '.join(s.op for s in deepstack.projector.steps)} (vision.deepstack): "
                f"mobius' {mobius.class_name} norms each after grouping the rows"
            )
        return found
    if vision.deepstack is not None:
        return [
            f"DeepStack features from tower layers {list(vision.deepstack.layers)} "
            f"(vision.deepstack): mobius' {mobius.class_name} has no DeepStack mergers"
        ]
    if (
        ops[:1] not in ((n,) for n in _MERGER_NORMS)
        or ops[1:] != _MERGER_OPS
        or vision.projector.steps[0].weight_offset
    ):
        return [
            f"a Qwen-VL merger {' -> '.join(ops)} (vision.projector): the generated merger is "
            "an RMS norm, rows grouped by the merge block, linear, activation, linear"
        ]
    return []


def _is_qwen3_merger(
    projector: ProjectorSpec, expected: tuple[tuple[str | None, str, bool], ...]
) -> bool:
    steps = projector.steps
    return len(steps) == len(expected) and all(
        step.op == op
        and (name is None or step.name == name)
        and (op != "linear" or step.bias == bias)
        and (op != "layer_norm" or step.eps == _MOBIUS_EPS)
        and (op != "activation" or step.activation == "gelu")
        for step, (name, op, bias) in zip(steps, expected, strict=True)
    )


def _position_blockers(vision: VisionSpec) -> list[str]:
    mrope = vision.merge.mrope
    if mrope is None:
        return [
            "image positions other than M-RoPE (vision.merge.mrope): mobius' Qwen-VL decoders "
            "rotate by three-axis positions"
        ]
    if mrope.default_at:
        return [
            f"M-RoPE sections from HF's fallback at {mrope.default_at}, not the config "
            "(vision.merge.mrope.default_at): the generated config reads mrope_section"
        ]
    return []


def qwen_vl_names(vision: VisionSpec) -> QwenVLNames:
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec)
    if tower.glm is not None:
        return QwenVLNames(
            "", False, tower.name_of("merger"), "", "", 0.0, "", (), glm=glm_names(vision)
        )
    mobius = mobius_tower(tower)
    assert mobius is not None
    plain = tower.mlp.kind == "plain"
    renames = tuple(zip(tower.mlp.projections, _FCMLP, strict=True)) if plain else ()
    if mobius.own_merger:
        return QwenVLNames(
            base_class=mobius.class_name,
            windows=False,
            merger=tower.name_of("merger"),
            norm="",
            norm_class="",
            norm_eps=0.0,
            sequence="",
            steps=(),
            mlp_renames=renames,
            own_merger=True,
            positions=True,
            deepstack=len(vision.deepstack.layers) if vision.deepstack else 0,
        )
    norm, _group, first, act, second = vision.projector.steps
    sequence = first.name.rpartition(".")[0]
    width = "config.vision.hidden_size * _vision_field(config, 'spatial_merge_size') ** 2"
    return QwenVLNames(
        base_class=mobius.class_name,
        windows=bool(tower.window_size),
        merger=tower.name_of("merger"),
        norm=norm.name,
        norm_class="LayerNorm" if norm.op == "layer_norm" else "RMSNorm",
        norm_eps=norm.eps,
        sequence=sequence,
        steps=(
            MergerLayer(first.name, "linear", width, width, first.bias),
            MergerLayer(act.name, "activation", activation=act.activation),
            MergerLayer(second.name, "linear", width, "config.hidden_size", second.bias),
        ),
        mlp_renames=renames,
    )
