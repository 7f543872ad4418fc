"""Pixtral's tower computed from its spec, for the vision check: what ``PixtralTowerSpec`` says,
written out in torch so the check can compare each stage with HF's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from onboard.vision import PixtralTowerSpec


def patch_grids(spec: PixtralTowerSpec, image_sizes: Any) -> list[tuple[int, int]]:
    """Each image's patch rows and columns, from its pixel height and width."""
    return [(int(h) // spec.patch_size, int(w) // spec.patch_size) for h, w in image_sizes]


def axial_angles(spec: PixtralTowerSpec, grids: Sequence[tuple[int, int]]) -> Any:
    """[patches, head_dim / 2]: a patch's row turns the first quarter of the head at the even
    frequencies, its column the second quarter at the odd ones."""
    import torch

    d = spec.head_dim
    inv_freq = 1.0 / (spec.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float) / d))
    angles = []
    for rows, columns in grids:
        row, column = torch.meshgrid(torch.arange(rows), torch.arange(columns), indexing="ij")
        row, column = row.flatten().float()[:, None], column.flatten().float()[:, None]
        angles.append(torch.cat([row * inv_freq[0::2], column * inv_freq[1::2]], dim=-1))
    return torch.cat(angles)


class PixtralRun:
    """The tower, with ``weight(name)`` giving its tensors, on images of ``image_sizes``."""

    def __init__(
        self, spec: PixtralTowerSpec, weight: Callable[[str], Any], image_sizes: Any
    ) -> None:
        import torch

        self.spec = spec
        self.weight = weight
        self.grids = patch_grids(spec, image_sizes)
        angles = axial_angles(spec, self.grids)
        self.cos = torch.cat([angles, angles], -1).cos()
        self.sin = torch.cat([angles, angles], -1).sin()
        counts = [rows * columns for rows, columns in self.grids]
        self.mask = torch.block_diag(*(torch.ones(n, n) for n in counts)).bool()

    def embed(self, pixels: Any) -> Any:
        """[1, patches, hidden]: each image's patches, cropped to its size, one after another."""
        import torch
        import torch.nn.functional as F

        s = self.spec
        patch = s.name_of("patch")
        bias = self.weight(f"{patch}.bias") if s.patch_bias else None
        x = F.conv2d(pixels, self.weight(f"{patch}.weight"), bias, stride=s.patch_size)
        images = [x[i, :, :rows, :columns] for i, (rows, columns) in enumerate(self.grids)]
        return torch.cat([image.flatten(1).T for image in images])[None]

    def pre_norm(self, x: Any) -> Any:
        return self._norm(self.spec.name_of("pre_norm"), x)

    def post_norm(self, x: Any) -> Any:
        raise ValueError("a Pixtral tower has no post norm")

    def states(self, pixels: Any) -> list[Any]:
        states = [self.pre_norm(self.embed(pixels))]
        for i in range(self.spec.num_layers):
            states.append(self.layer(i, states[-1]))
        return states

    def layer(self, index: int, x: Any) -> Any:
        s = self.spec
        prefix = f"{s.name_of('layers')}.{index}."
        norm = dict(s.norm.names)
        h = x + self._attention(
            prefix + s.name_of("attention"), self._norm(prefix + norm["attn_in"], x)
        )
        return h + self._mlp(prefix + s.name_of("mlp"), self._norm(prefix + norm["mlp_in"], h))

    def _norm(self, name: str, x: Any) -> Any:
        import torch

        eps = self.spec.norm.eps
        return (
            x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight(f"{name}.weight")
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
        return x * self.cos + turned * self.sin

    def _attention(self, name: str, x: Any) -> Any:
        a = self.spec.attention
        batch, seq, _ = x.shape

        def heads(projection: str, bias: bool) -> Any:
            out = self._linear(f"{name}.{projection}", x, bias)
            return out.view(batch, seq, a.num_heads, a.head_dim).transpose(1, 2)

        q, k = self._rotate(heads("q_proj", a.q_bias)), self._rotate(heads("k_proj", a.k_bias))
        v = heads("v_proj", a.v_bias)
        scores = ((q @ k.transpose(-1, -2)) * a.scale).masked_fill(~self.mask, float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, -1)
        return self._linear(f"{name}.{self.spec.name_of('o_proj')}", out, a.o_bias)

    def _mlp(self, name: str, x: Any) -> Any:
        from transformers.activations import ACT2FN

        m = self.spec.mlp
        gate, up, down = m.projections
        hidden = ACT2FN[m.activation](self._linear(f"{name}.{gate}", x, m.bias))
        return self._linear(
            f"{name}.{down}", hidden * self._linear(f"{name}.{up}", x, m.bias), m.bias
        )


def patch_merge(x: Any, grids: Sequence[tuple[int, int]], size: int) -> Any:
    """[patches, width] -> [blocks, width * size**2]: each image's grid cut into size x size
    blocks in reading order, each block's features channel-major (``F.unfold``'s order)."""
    import torch

    merged = []
    for image, (rows, columns) in zip(x.split([r * c for r, c in grids]), grids, strict=True):
        width = image.shape[-1]
        blocks = image.view(rows // size, size, columns // size, size, width)
        blocks = blocks.permute(0, 2, 4, 1, 3)  # block row, block column, channel, row, column
        merged.append(blocks.reshape(-1, width * size * size))
    return torch.cat(merged)
