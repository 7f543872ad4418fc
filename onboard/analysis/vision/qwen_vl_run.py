"""Qwen2.5-VL's tower computed from its spec, for the vision check: what ``QwenVLTowerSpec``
(and the merger's ``ProjectorSpec``) say, written out in torch so the check can compare each
stage with HF's."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from onboard.analysis.vision.glm import downsample, resampled_positions
from onboard.analysis.vision.steps import ROW_OPS, run_row_step
from onboard.vision import ProjectorSpec, QwenVLTowerSpec

Grid = tuple[int, int, int]  # temporal, rows, columns, in patches


def window_order(spec: QwenVLTowerSpec, grids: Sequence[Grid]) -> tuple[list[int], list[int]]:
    """The merge blocks in window order (indices into merge-block order, over all images) and
    each window's length in patches; windows in reading order, each image's after the last's."""
    m, side = spec.spatial_merge_size, spec.window_blocks
    if not side:  # no windows: each image one window, blocks in their own order
        counts = [t * (h // m) * (w // m) for t, h, w in grids]
        return list(range(sum(counts))), [c * m * m for c in counts]
    order: list[int] = []
    lengths: list[int] = []
    offset = 0
    for t, h, w in grids:
        rows, columns = h // m, w // m
        for frame in range(t):
            for top in range(0, rows, side):
                for left in range(0, columns, side):
                    window = [
                        offset + (frame * rows + r) * columns + c
                        for r in range(top, min(top + side, rows))
                        for c in range(left, min(left + side, columns))
                    ]
                    order += window
                    lengths.append(len(window) * m * m)
        offset += t * rows * columns
    return order, lengths


def patch_angles(spec: QwenVLTowerSpec, grids: Sequence[Grid]) -> Any:
    """[patches, head_dim / 2] in merge-block order: a patch's row turns the first half of the
    angles, its column the second, both at ``inv_freq`` over head_dim / 2."""
    import torch

    quarter = spec.head_dim // 2
    inv_freq = 1.0 / (spec.rope_theta ** (torch.arange(0, quarter, 2, dtype=torch.float) / quarter))
    m = spec.spatial_merge_size
    angles = []
    for t, h, w in grids:
        row, column = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        # merge-block order: block row, block column, row in block, column in block
        row = row.reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten().float()
        column = column.reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten().float()
        angle = torch.cat([row[:, None] * inv_freq, column[:, None] * inv_freq], dim=-1)
        angles.append(angle.repeat(t, 1))
    return torch.cat(angles)


def learned_positions(spec: QwenVLTowerSpec, table: Any, grids: Sequence[Grid]) -> Any:
    """[patches, hidden] in merge-block order: the square table resampled bilinearly, corners
    aligned, to each image's rows x columns, the same for every frame."""
    import torch
    import torch.nn.functional as F

    side = math.isqrt(spec.position_embeddings)
    square = table.view(side, side, -1).permute(2, 0, 1)[None]
    m = spec.spatial_merge_size
    out = []
    for t, h, w in grids:
        grid = F.interpolate(square, size=(h, w), mode="bilinear", align_corners=True)[0]
        blocks = grid.reshape(-1, h // m, m, w // m, m).permute(1, 3, 2, 4, 0)
        out.append(blocks.reshape(h * w, -1).repeat(t, 1))
    return torch.cat(out)


class QwenVLRun:
    """The tower, with ``weight(name)`` giving its tensors, on images of ``grids``."""

    def __init__(
        self, spec: QwenVLTowerSpec, weight: Callable[[str], Any], grids: Sequence[Grid]
    ) -> None:
        import torch

        self.spec = spec
        self.weight = weight
        self.grids = [tuple(int(x) for x in g) for g in grids]
        unit = spec.spatial_merge_size**2
        order, lengths = window_order(spec, self.grids)
        # patch order: each merge block's patches, blocks in window order
        self.order = torch.tensor([b * unit + i for b in order for i in range(unit)])
        self.block_order = torch.tensor(order)
        angles = patch_angles(spec, self.grids)[self.order]
        self.cos = torch.cat([angles, angles], -1).cos()
        self.sin = torch.cat([angles, angles], -1).sin()
        self.window_mask = torch.block_diag(*(torch.ones(n, n) for n in lengths)).bool()
        images = [t * h * w for t, h, w in self.grids]
        self.image_mask = torch.block_diag(*(torch.ones(n, n) for n in images)).bool()
        # each image's own patches are contiguous in window order too
        self.full_mask = self.image_mask

    def patches(self, pixels: Any) -> Any:
        """[patches, hidden] in window order: the patch convolution alone."""
        return self._convolve(pixels)[self.order]

    def embed(self, pixels: Any) -> Any:
        """[patches, hidden] in window order: the layers' input (with the learned positions
        where the tower has them)."""
        s = self.spec
        x = self._convolve(pixels)
        if s.glm is not None:  # GLM-4V norms the patches, then resamples bicubically
            x = run_row_step(s.glm.patch_norm, self.weight, x)
            table = self.weight(f"{s.name_of('positions')}.weight")
            positions = resampled_positions(s.glm.resample, table, self.grids, s.spatial_merge_size)
            x = x + positions
        elif s.position_embeddings:
            table = self.weight(f"{s.name_of('positions')}.weight")
            x = x + learned_positions(s, table, self.grids)
        return x[self.order]

    def end(self, x: Any) -> Any:
        """What the merger reads: the last state, or GLM-4V's end norm and downsample over it
        (one row per merge block)."""
        glm = self.spec.glm
        if glm is None:
            return x
        return downsample(glm, self.spec, self.weight, run_row_step(glm.end_norm, self.weight, x))

    def _convolve(self, pixels: Any) -> Any:
        import torch.nn.functional as F

        s = self.spec
        patch = s.name_of("patch")
        x = pixels.view(-1, s.num_channels, s.temporal_patch_size, s.patch_size, s.patch_size)
        bias = self.weight(f"{patch}.bias") if s.patch_bias else None
        x = F.conv3d(x, self.weight(f"{patch}.weight"), bias, stride=x.shape[2:])
        return x.view(-1, s.hidden_size)

    def states(self, pixels: Any) -> list[Any]:
        """The encoder's input, then each layer's output, all in window order."""
        states = [self.embed(pixels)]
        for i in range(self.spec.num_layers):
            states.append(self.layer(i, states[-1]))
        return states

    def layer(self, index: int, x: Any) -> Any:
        s = self.spec
        prefix = f"{s.name_of('layers')}.{index}."
        norm = dict(s.norm.names)
        mask = self.full_mask if index in s.fullatt_layers else self.window_mask
        h = x + self._attention(
            prefix + s.name_of("attention"), self._norm(prefix + norm["attn_in"], x), mask
        )
        return h + self._mlp(prefix + s.name_of("mlp"), self._norm(prefix + norm["mlp_in"], h))

    def merge(self, projector: ProjectorSpec, weight: Callable[[str], Any], x: Any) -> Any:
        """The merger's steps over the last state (window order), rows put back into
        merge-block order."""
        import torch

        return run_merger(projector, weight, x)[torch.argsort(self.block_order)]

    def _norm(self, name: str, x: Any) -> Any:
        import torch
        import torch.nn.functional as F

        norm = self.spec.norm
        if norm.kind == "layer":
            bias = self.weight(f"{name}.bias") if norm.bias else None
            return F.layer_norm(x, x.shape[-1:], self.weight(f"{name}.weight"), bias, norm.eps)
        return (
            x
            * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)
            * self.weight(f"{name}.weight")
        )

    def _linear(self, name: str, x: Any, bias: bool) -> Any:
        import torch.nn.functional as F

        return F.linear(
            x, self.weight(f"{name}.weight"), self.weight(f"{name}.bias") if bias else None
        )

    def _rotate(self, x: Any) -> Any:
        import torch

        half = x.shape[-1] // 2
        turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * self.cos[:, None] + turned * self.sin[:, None]

    def _attention(self, name: str, x: Any, mask: Any) -> Any:
        a = self.spec.attention
        seq = x.shape[0]
        qkv = self._linear(f"{name}.{self.spec.name_of('qkv')}", x, a.q_bias)
        q, k, v = qkv.view(seq, 3, a.num_heads, a.head_dim).unbind(1)
        q, k = self._rotate(q).transpose(0, 1), self._rotate(k).transpose(0, 1)
        v = v.transpose(0, 1)
        scores = ((q @ k.transpose(-1, -2)) * a.scale).masked_fill(~mask, float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(0, 1).reshape(seq, -1)
        return self._linear(f"{name}.{self.spec.name_of('o_proj')}", out, a.o_bias)

    def _mlp(self, name: str, x: Any) -> Any:
        from transformers.activations import ACT2FN

        m = self.spec.mlp
        if m.kind == "plain":
            first, second = m.projections
            hidden = ACT2FN[m.activation](self._linear(f"{name}.{first}", x, m.bias))
            return self._linear(f"{name}.{second}", hidden, m.bias)
        gate, up, down = m.projections
        hidden = ACT2FN[m.activation](self._linear(f"{name}.{gate}", x, m.bias))
        return self._linear(
            f"{name}.{down}", hidden * self._linear(f"{name}.{up}", x, m.bias), m.bias
        )


def run_merger(projector: ProjectorSpec, weight: Callable[[str], Any], x: Any) -> Any:
    """A merger's steps over the rows ``x``, in their order."""
    for step in projector.steps:
        if step.op == "group_rows":
            x = x.reshape(-1, x.shape[-1] * step.kernel)
        elif step.op in ROW_OPS:
            x = run_row_step(step, weight, x)
        else:
            raise ValueError(f"a Qwen-VL merger has no {step.op} step")
    return x


def mrope_cos_sin(
    sections: Sequence[int],
    theta: float,
    head_dim: int,
    positions: Any,
    layout: str = "chunks",
    pairs: str = "halves",
) -> Any:
    """cos, sin [B, S, head_dim] for ``positions [3, B, S]``: each frequency of the rotated half
    turns by the axis ``MRopeSpec.layout`` gives it (section i by axis i % 3 for chunks), on the
    channels ``MRopeSpec.pairs`` gives it."""
    import torch

    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
    angles = positions[..., None].float() * inv_freq  # [3, B, S, head_dim / 2]
    axis = mrope_axes(sections, head_dim // 2, layout)
    chosen = angles.gather(0, axis.expand(1, *angles.shape[1:]))[0]
    if pairs == "adjacent":
        both = chosen.repeat_interleave(2, dim=-1)
    else:
        both = torch.cat([chosen, chosen], dim=-1)
    return both.cos(), both.sin()


def mrope_axes(sections: Sequence[int], half: int, layout: str) -> Any:
    """[half] long: which of the three position axes turns each frequency."""
    import torch

    if layout == "chunks":
        axes = [i % 3 for i, n in enumerate(sections) for _ in range(n)]
    elif layout == "interleaved":
        axes = [
            1
            if f % 3 == 1 and f < 3 * sections[1]
            else 2
            if f % 3 == 2 and f < 3 * sections[2]
            else 0
            for f in range(half)
        ]
    else:
        raise ValueError(f"no M-RoPE layout {layout!r}")
    if len(axes) != half:
        raise ValueError(f"M-RoPE sections {list(sections)} do not cover {half} frequencies")
    return torch.tensor(axes)
