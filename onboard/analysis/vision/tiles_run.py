"""LLaVA-NeXT's tile packing computed from its spec (``TileGridSpec``), for the vision check and
the parity inputs: which grid an image gets, how much of it unpadding keeps, whether it is
downsampled, and the packed features. Written from the spec's rule, not from HF's code, so the
check proves the rule against HF's ``pack_image_features``.

The arithmetic is Python's, as HF's is: the grid choice scales in floats and truncates
(``int(W * s)``, which can fall one short of the pinpoint's side), the downsampling ratio is a
float square root and its sizes a float floor division.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.vision import TileGridSpec


@dataclass(frozen=True)
class ImageGrid:
    """One image's layout in features: its grid of tiles, the box unpadding keeps, the size the
    kept grid is resized to."""

    rows: int  # tiles
    columns: int
    side: int  # features a tile side
    top: int  # kept feature rows [top, bottom), columns [left, right)
    bottom: int
    left: int
    right: int
    height: int  # after any downsampling
    width: int

    @property
    def tiles(self) -> int:
        """Tiles the image takes in pixel_values: the base tile and the grid's."""
        return 1 + self.rows * self.columns

    @property
    def unpadded(self) -> bool:
        return (self.bottom - self.top, self.right - self.left) != (
            self.rows * self.side,
            self.columns * self.side,
        )

    @property
    def downsampled(self) -> bool:
        return (self.height, self.width) != (self.bottom - self.top, self.right - self.left)

    @property
    def tokens(self) -> int:
        """Placeholders the image fills: the base tile, the grid, a newline per grid row."""
        return self.side**2 + self.height * (self.width + 1)


def best_pinpoint(pinpoints: Sequence[Sequence[int]], size: Sequence[int]) -> tuple[int, int]:
    """The (height, width) the image of original ``size`` (height, width) fits best."""
    height, width = (int(v) for v in size)
    best, kept, wasted = None, 0, math.inf
    for pin_h, pin_w in pinpoints:
        scale = min(pin_w / width, pin_h / height)
        effective = min(int(width * scale) * int(height * scale), width * height)
        waste = pin_w * pin_h - effective
        if effective > kept or (effective == kept and waste < wasted):
            best, kept, wasted = (int(pin_h), int(pin_w)), effective, waste
    if best is None:
        raise ValueError(f"no pinpoint keeps any pixel of an image of {tuple(size)}")
    return best


def image_grid(spec: TileGridSpec, tile_size: int, side: int, size: Sequence[int]) -> ImageGrid:
    """The layout of an image of original ``size`` with tiles of ``tile_size`` pixels, ``side``
    features a side."""
    pin_h, pin_w = best_pinpoint(spec.pinpoints, size)
    rows, columns = pin_h // tile_size, pin_w // tile_size
    grid_h, grid_w = rows * side, columns * side
    height, width = (int(v) for v in size)
    top, bottom, left, right = 0, grid_h, 0, grid_w
    if spec.unpad:
        if width * grid_h > grid_w * height:  # wider than the grid: rows go
            pad = (grid_h - height * grid_w // width) // 2
            top, bottom = pad, grid_h - pad
        else:
            pad = (grid_w - width * grid_h // height) // 2
            left, right = pad, grid_w - pad
    kept_h, kept_w = bottom - top, right - left
    new_h, new_w = kept_h, kept_w
    if spec.max_tiles:
        ratio = math.sqrt(kept_h * kept_w / (spec.max_tiles * side**2))
        if ratio > spec.downsample_above:
            new_h, new_w = int(kept_h // ratio), int(kept_w // ratio)
    return ImageGrid(rows, columns, side, top, bottom, left, right, new_h, new_w)


def pack_image(grid: ImageGrid, tiles: Any, newline: Any | None) -> Any:
    """``[grid.tokens, hidden]`` from one image's projected tiles ``[tiles, side**2, hidden]``
    (base tile first)."""
    import torch
    import torch.nn.functional as F

    side, hidden = grid.side, tiles.shape[-1]
    base, rest = tiles[0], tiles[1 : grid.tiles]
    # [rows, columns, side, side, hidden] -> [rows * side, columns * side, hidden]
    features = rest.reshape(grid.rows, grid.columns, side, side, hidden)
    features = features.permute(0, 2, 1, 3, 4).reshape(grid.rows * side, grid.columns * side, -1)
    features = features[grid.top : grid.bottom, grid.left : grid.right]
    if grid.downsampled:
        resized = F.interpolate(
            features.permute(2, 0, 1)[None], [grid.height, grid.width], mode="bilinear"
        )
        features = resized[0].permute(1, 2, 0)
    if newline is not None:
        closing = newline.reshape(1, 1, hidden).expand(features.shape[0], 1, hidden)
        features = torch.cat([features, closing.to(features.dtype)], dim=1)
    return torch.cat([base, features.reshape(-1, hidden)])


def pack(
    spec: TileGridSpec,
    tile_size: int,
    tiles: Any,
    image_sizes: Sequence[Sequence[int]],
    newline: Any | None,
) -> Any:
    """Every image's packed features, one after another: ``tiles`` is the projector's output
    over every image's tiles, ``[tiles, side**2, hidden]``, image after image."""
    import torch

    side = math.isqrt(tiles.shape[1])
    out, start = [], 0
    for size in image_sizes:
        grid = image_grid(spec, tile_size, side, size)
        out.append(pack_image(grid, tiles[start : start + grid.tiles], newline))
        start += grid.tiles
    if start != tiles.shape[0]:
        raise ValueError(f"{tiles.shape[0]} tiles for images that take {start}")
    return torch.cat(out)
