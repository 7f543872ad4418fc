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
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.vision import QwenVLTowerSpec, VisionSpec

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
# Fixed inside mobius' towers: the block norms' epsilon, the RoPE base, and per MLP kind the
# class (Qwen2.5-VL's windowed one, Qwen2-VL's without windows), its norms and its activation
_MOBIUS_EPS = 1e-6
_MOBIUS_THETA = 10000.0
_MOBIUS_TOWERS = {
    # mlp kind: (class, norm kind, activation)
    "gated": ("Qwen25VLVisionModel", "rms", "silu"),
    "plain": ("Qwen2VLVisionModel", "layer", "quick_gelu"),
}
# mobius' FCMLP names the plain MLP's linears so
_FCMLP = ("up_proj", "down_proj")


@dataclass(frozen=True)
class MergerLayer:
    name: str  # HF's attribute under the merger: ln_q, mlp.0, mlp.1, mlp.2
    op: str
    in_expr: str = ""
    out_expr: str = ""
    bias: bool = False
    activation: str = ""
    eps: float = 0.0


@dataclass(frozen=True)
class QwenVLNames:
    """The generated tower: mobius' windowed ViT with a generated merger."""

    base_class: str  # mobius' tower: Qwen25VLVisionModel, or Qwen2VLVisionModel (no windows)
    windows: bool  # the tower reads window_size and fullatt_block_indexes
    merger: str  # merger
    norm: str  # ln_q
    norm_class: str  # RMSNorm or LayerNorm
    norm_eps: float
    sequence: str  # mlp: the merger's linears and activation, HF's Sequential
    steps: tuple[MergerLayer, ...]  # what the sequence holds, in order
    # HF's plain MLP linears -> mobius' FCMLP's (fc1 -> up_proj, fc2 -> down_proj)
    mlp_renames: tuple[tuple[str, str], ...] = ()

    @property
    def imports(self) -> str:
        return ", ".join([*sorted({self.base_class, self.norm_class, "Linear"}), "get_activation"])


def qwen_vl_blockers(vision: VisionSpec) -> list[str]:
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec)
    found = []
    names = dict(tower.names)
    if any(names.get(role) != name for role, name in _NAMES.items()):
        found.append(
            f"a Qwen-VL tower laid out otherwise ({', '.join(f'{r}={n}' for r, n in tower.names)}; "
            "vision.tower.names): mobius' Qwen25VLVisionModel keeps HF Qwen2.5-VL's names"
        )
    a, m = tower.attention, tower.mlp
    if not (a.q_bias and a.o_bias) or a.scale != a.head_dim**-0.5:
        found.append(
            "a Qwen-VL attention without biases or with its own scale (vision.tower.attention): "
            "mobius' Qwen25VLVisionAttention has biased qkv and proj at head_dim ** -0.5"
        )
    base, norm_kind, activation = _MOBIUS_TOWERS.get(m.kind, ("", "", ""))
    if not base or not m.bias or m.activation != activation:
        found.append(
            f"a Qwen-VL MLP {m.kind} with bias={m.bias} and {m.activation} (vision.tower.mlp): "
            "mobius' Qwen-VL blocks fix a biased gated silu MLP (Qwen25VLVisionModel) or a "
            "biased fc1 / fc2 quick_gelu one (Qwen2VLVisionModel)"
        )
    elif tower.norm.kind != norm_kind or tower.norm.eps != _MOBIUS_EPS:
        found.append(
            f"{tower.norm.kind} norms at eps {tower.norm.eps} in the Qwen-VL layers "
            f"(vision.tower.norm): mobius' {base} fixes {norm_kind} norms at 1e-6"
        )
    if base == "Qwen2VLVisionModel" and tower.window_size:
        found.append(
            "window attention in a Qwen-VL tower with a plain MLP (vision.tower.window_size): "
            "mobius' Qwen2VLVisionModel attends per image only"
        )
    if tower.rope_theta != _MOBIUS_THETA:
        found.append(
            f"a Qwen-VL tower RoPE base {tower.rope_theta} (vision.tower.rope_theta): mobius' "
            "Qwen25VLVisionRotaryEmbedding fixes 10000"
        )
    if tower.patch_bias:
        found.append("a Qwen-VL patch convolution with a bias (vision.tower.patch_bias)")
    ops = tuple(s.op for s in vision.projector.steps)
    if (
        ops[:1] not in ((n,) for n in _MERGER_NORMS)
        or ops[1:] != _MERGER_OPS
        or vision.projector.steps[0].weight_offset
    ):
        found.append(
            f"a Qwen-VL merger {' -> '.join(ops)} (vision.projector): the generated merger is "
            "an RMS norm, rows grouped by the merge block, linear, activation, linear"
        )
    if vision.merge.mrope is None or vision.merge.mrope.layout != "chunks":
        found.append(
            "image positions other than M-RoPE in consecutive sections (vision.merge.mrope): "
            "mobius' ChunkedMRope rotates sections in turn"
        )
    elif vision.merge.mrope.default_at:
        found.append(
            f"M-RoPE sections from HF's fallback at {vision.merge.mrope.default_at}, not the "
            "config (vision.merge.mrope.default_at): the generated config reads mrope_section"
        )
    if tower.position_embeddings:
        found.append(
            "learned positions resampled to each image's grid (vision.tower.position_embeddings):"
            " mobius' Qwen-VL towers add none"
        )
    if vision.deepstack is not None:
        found.append(
            f"DeepStack features from tower layers {list(vision.deepstack.layers)} added to the "
            "first text layers (vision.deepstack): the generated Qwen-VL model merges the "
            "last layer's only"
        )
    return found


def qwen_vl_names(vision: VisionSpec) -> QwenVLNames:
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec)
    norm, _group, first, act, second = vision.projector.steps
    sequence = first.name.rpartition(".")[0]
    width = "config.vision.hidden_size * _vision_field(config, 'spatial_merge_size') ** 2"
    base = _MOBIUS_TOWERS[tower.mlp.kind][0]
    plain = tower.mlp.kind == "plain"
    return QwenVLNames(
        base_class=base,
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
        mlp_renames=tuple(zip(tower.mlp.projections, _FCMLP, strict=True)) if plain else (),
    )
