"""GLM-4V's tower, read as a Qwen-VL relative: the parts it adds, found by structure and by the
order its forward calls them, and their computation for the check.

Structure: besides the patch convolution, the rotary module, the layers and the merger, the
tower holds two norms and a 2-D convolution. The norm its forward calls before the first layer
is the patch norm; the norm and the convolution it calls after the last layer, before the
merger, are the tower's end. How the learned positions are resampled to each grid is read by
computing the first layer's input both ways and keeping the one HF computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from onboard.spec import Evidence
from onboard.vision import GlmTowerParts, ProjectorStep, QwenVLTowerSpec

Grid = tuple[int, int, int]
RESAMPLES = ("bicubic", "bilinear")


class NotGlm(Exception):
    """The tower's extra parts do not fit GLM-4V's layout."""


def read_glm_parts(
    tower: Any, config: Any, layers: str, merger: str
) -> tuple[GlmTowerParts | None, dict[str, str]]:
    """The tower's GLM-4V parts and their names (patch_norm, end_norm, downsample), or None
    when it holds no 2-D convolution (a plain Qwen-VL tower)."""
    import torch.nn as nn

    from onboard.analysis.vision.projector import norm_eps, rms_offset

    convs = [(n, m) for n, m in tower.named_children() if isinstance(m, nn.Conv2d)]
    if not convs:
        return None, {}
    if len(convs) != 1:
        raise NotGlm(f"{len(convs)} 2-D convolutions in the tower")
    down_name, down = convs[0]
    m = config.spatial_merge_size
    if tuple(down.kernel_size) != (m, m) or tuple(down.stride) != (m, m):
        raise NotGlm(
            f"{down_name} is a {tuple(down.kernel_size)} convolution at stride "
            f"{tuple(down.stride)}, not one merge block ({m} x {m}) to one row"
        )
    order = _call_order(tower, config)
    norms = [
        n
        for n, c in tower.named_children()
        if (isinstance(c, nn.LayerNorm) or rms_offset(c) is not None) and n in order
    ]
    if down_name not in order or merger not in order:
        raise NotGlm(f"{down_name} or {merger} is never called: {order}")
    first = order.index(f"{layers}.0")
    last = max(i for i, n in enumerate(order) if n.startswith(f"{layers}."))
    before = [n for n in norms if order.index(n) < first]
    after = [n for n in norms if last < order.index(n) < order.index(down_name)]
    if len(before) != 1 or len(after) != 1 or order.index(down_name) > order.index(merger):
        raise NotGlm(
            f"norms {norms} and {down_name} called in the order {order}: not one norm before "
            "the layers, then one norm and the convolution before the merger"
        )

    def step(name: str) -> ProjectorStep:
        norm = tower.get_submodule(name)
        if isinstance(norm, nn.LayerNorm):
            return ProjectorStep("layer_norm", name, eps=float(norm.eps))
        return ProjectorStep(
            "rms_norm", name, eps=float(norm_eps(norm)), weight_offset=rms_offset(norm)
        )

    parts = GlmTowerParts(
        patch_norm=step(before[0]),
        end_norm=step(after[0]),
        downsample_bias=down.bias is not None,
    )
    return parts, {"patch_norm": before[0], "end_norm": after[0], "downsample": down_name}


def _call_order(tower: Any, config: Any) -> list[str]:
    """The tower's children in the order its forward first calls a leaf of each, on one image
    of two merge blocks a side."""
    import torch

    from onboard.analysis.vision.merger import called_leaves

    m = config.spatial_merge_size
    width = config.in_channels * config.temporal_patch_size * config.patch_size**2
    pixels = torch.zeros(4 * m * m, width)
    grid = torch.tensor([[1, 2 * m, 2 * m]])
    with torch.no_grad():
        called = called_leaves(tower, lambda: tower(pixels, grid_thw=grid))
    lists = _lists(tower)
    order: list[str] = []
    for name, _ in called:
        parts = name.split(".")
        top = ".".join(parts[:2]) if parts[0] in lists else parts[0]
        if top not in order:
            order.append(top)
    return order


def _lists(tower: Any) -> set[str]:
    import torch.nn as nn

    return {n for n, c in tower.named_children() if isinstance(c, nn.ModuleList)}


def glm_keys(config: Any, keys: dict[str, str], mlp_width: int) -> dict[str, str]:
    """GLM-4V's block MLP is out_hidden_size wide (intermediate_size is its merger's width) and
    its position table has (image_size / patch_size) ** 2 rows: the keys the real sizes read."""
    keys = dict(keys)
    if getattr(config, keys.get("intermediate_size", ""), None) != mlp_width:
        found = [k for k in ("out_hidden_size", "hidden_size") if getattr(config, k) == mlp_width]
        if len(found) != 1:
            raise NotGlm(f"no one vision_config key holds the block MLP's width {mlp_width}")
        keys["merger_width"] = keys.pop("intermediate_size", "intermediate_size")
        keys["intermediate_size"] = found[0]
    if getattr(config, "image_size", None) and not getattr(config, "num_position_embeddings", 0):
        keys["position_side"] = "image_size"
        keys.pop("position_embeddings", None)
    if getattr(config, "rms_norm_eps", None) is not None:
        keys["norm_eps"] = "rms_norm_eps"
    return keys


def resampled_positions(mode: str, table: Any, grids: Sequence[Grid], merge: int) -> Any:
    """[patches, hidden] in merge-block order: the square table resampled to each image's rows
    x columns, the same for every frame. bicubic: ``grid_sample`` at each patch's centre,
    ``(i + 0.5) / size * 2 - 1``, corners not aligned, border padding (GLM-4V); bilinear: the
    grid with corners aligned (Qwen3-VL)."""
    import torch
    import torch.nn.functional as F

    side = math.isqrt(table.shape[0])
    square = table.view(side, side, -1).permute(2, 0, 1)[None].float()
    out = []
    for t, h, w in grids:
        if mode == "bilinear":
            grid = F.interpolate(square, size=(h, w), mode="bilinear", align_corners=True)[0]
        else:
            rows = (torch.arange(h, dtype=torch.float32) + 0.5) / h * 2 - 1
            columns = (torch.arange(w, dtype=torch.float32) + 0.5) / w * 2 - 1
            y, x = torch.meshgrid(rows, columns, indexing="ij")
            where = torch.stack([x, y], dim=-1)[None]
            grid = F.grid_sample(
                square, where, mode=mode, align_corners=False, padding_mode="border"
            )[0]
        blocks = grid.reshape(-1, h // merge, merge, w // merge, merge).permute(1, 3, 2, 4, 0)
        out.append(blocks.reshape(h * w, -1).repeat(t, 1))
    return torch.cat(out).to(table.dtype)


def downsample(
    parts: GlmTowerParts, spec: QwenVLTowerSpec, weight: Callable[[str], Any], x: Any
) -> Any:
    """[blocks, out_hidden_size]: each merge block's patches (consecutive rows, in reading
    order inside the block) as an m x m image, convolved to one row."""
    import torch.nn.functional as F

    m = spec.spatial_merge_size
    name = spec.name_of("downsample")
    blocks = x.view(-1, m, m, x.shape[-1]).permute(0, 3, 1, 2)
    bias = weight(f"{name}.bias") if parts.downsample_bias else None
    return F.conv2d(blocks, weight(f"{name}.weight"), bias, stride=m).view(blocks.shape[0], -1)


def read_resample(
    embed: Callable[[str], Any], expected: Any, where: str
) -> tuple[str, Evidence | None]:
    """The resampling whose first-layer input is HF's (``embed(mode)``), with its evidence; the
    first candidate when none is (the check then names the stage)."""
    import torch

    for mode in RESAMPLES:
        got = embed(mode)
        if got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5):
            return mode, Evidence("probe", where, f"learned positions resampled {mode}")
    return RESAMPLES[0], None
