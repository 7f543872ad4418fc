"""Tiles of any resolution (LLaVA-NeXT's "anyres") in the tiny model and its test images.

The tiny tower's tiles are narrower than the real ones (``TINY_PATCHES_PER_SIDE`` patches a
side), so the pinpoints are scaled with them: every grid of the real config stays a grid of the
tiny one. The two test images are chosen by the spec's own rule so that what a wrong packing
gets wrong shows: their grids differ, one is cut back to its aspect ratio by rows and the other
by columns, and with a tile budget (LLaVA-OneVision) exactly one of them is downsampled, under
a tiny budget (the rule is the same at any budget; the spec records the real one).
"""

from __future__ import annotations

from typing import Any

from onboard.errors import InvalidConfigError, UnsupportedFeatureError

# The composite config keys HF reads the grid pinpoints and the tile budget from
PINPOINTS_KEYS = ("image_grid_pinpoints",)
MAX_TILES_KEYS = ("vision_aspect_ratio",)
_MAX_TILES_PREFIX = "anyres_max_"
# The tiny tile budget: one tile's features, so a grid of two tiles is downsampled already and
# the test prompts stay within the tiny text model's positions (a budget of 9 needs 175 features)
TINY_MAX_TILES = 1
# Original sizes are tried on this fraction of a tile: fine enough that unpadding cuts whole
# feature rows, coarse enough to search every size up to the largest pinpoint quickly
_SIZE_STEPS_PER_TILE = 8


def pinpoints_key(config: Any) -> str | None:
    """The key of the grid pinpoints in the composite config (``image_grid_pinpoints``)."""
    return next((k for k in PINPOINTS_KEYS if getattr(config, k, None)), None)


def max_tiles_key(config: Any) -> str | None:
    return next((k for k in MAX_TILES_KEYS if getattr(config, k, None) is not None), None)


def max_tiles(config: Any, key: str) -> int:
    """``anyres_max_9`` -> 9, as HF reads it (``int(value.strip("anyres_max_"))``)."""
    value = getattr(config, key)
    number = value.removeprefix(_MAX_TILES_PREFIX) if isinstance(value, str) else ""
    if not (value.startswith(_MAX_TILES_PREFIX) and number.isdigit() and int(number) > 0):
        raise InvalidConfigError(
            f"config.json:{key} {value!r} is not {_MAX_TILES_PREFIX}<tiles>: HF reads the tile "
            "budget past which a grid is downsampled from it"
        )
    return int(number)


def shrink_pinpoints(tiny: dict[str, Any], hf_config: Any, tile_size: int) -> None:
    """Scale ``tiny``'s pinpoints from the real tiles to tiles of ``tile_size`` pixels; each must
    be whole tiles a side (HF counts a grid's tiles by ceiling and cuts it by floor)."""
    key = pinpoints_key(hf_config)
    if key is None:
        return
    real = int(hf_config.vision_config.image_size)
    pinpoints = getattr(hf_config, key)
    if not all(
        isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(v, int) for v in p)
        for p in pinpoints
    ):
        raise InvalidConfigError(
            f"config.json:{key} {pinpoints!r:.80} is not (height, width) pairs"
        )
    odd = [list(p) for p in pinpoints if p[0] <= 0 or p[1] <= 0 or p[0] % real or p[1] % real]
    if odd:
        raise InvalidConfigError(
            f"config.json:{key} {odd[:3]} are not whole tiles of vision_config.image_size {real} "
            "a side: HF counts such a grid's tiles and cuts its features differently"
        )
    tiny[key] = [[h // real * tile_size, w // real * tile_size] for h, w in pinpoints]
    budget = max_tiles_key(hf_config)
    if budget is not None:
        max_tiles(hf_config, budget)  # a value HF cannot read is bad input here already
        tiny[budget] = f"{_MAX_TILES_PREFIX}{TINY_MAX_TILES}"


def tile_test_images(spec: Any, vision: Any) -> tuple[list[tuple[int, int]], list[int]]:
    """The two test images of the tiny tower ``vision`` (a vision config): their original
    (height, width) sizes (``tile_image_sizes``) and how many tiles each takes, base included."""
    from onboard.analysis.vision.tiles_run import image_grid

    size, side = vision.image_size, vision.image_size // vision.patch_size
    sizes = tile_image_sizes(spec, size, side)
    return sizes, [image_grid(spec, size, side, s).tiles for s in sizes]


def tile_image_sizes(spec: Any, tile_size: int, side: int) -> list[tuple[int, int]]:
    """Two original (height, width) sizes for the tiny model's test images: different grids,
    the first cut by rows, the second by columns, and with a tile budget one of them
    downsampled; among those the fewest tiles. ``spec`` is a ``TileGridSpec``."""
    from onboard.analysis.vision.tiles_run import image_grid

    step = max(1, tile_size // _SIZE_STEPS_PER_TILE)
    largest = max(max(p) for p in spec.pinpoints)
    by_kind: dict[tuple[Any, ...], tuple[int, tuple[int, int]]] = {}
    for height in range(step, largest + 1, step):
        for width in range(step, largest + 1, step):
            grid = image_grid(spec, tile_size, side, (height, width))
            cut = "rows" if grid.top else "columns" if grid.left else None
            if cut is None or grid.height <= 0 or grid.width <= 0:
                continue
            kind = (cut, grid.rows, grid.columns, grid.downsampled)
            if kind not in by_kind or grid.tiles < by_kind[kind][0]:
                by_kind[kind] = (grid.tiles, (height, width))
    pairs = [
        (a[0] + b[0], a[1], b[1], ka[1:3] != kb[1:3])
        for ka, a in by_kind.items()
        if ka[0] == "rows"
        for kb, b in by_kind.items()
        if kb[0] == "columns" and (not spec.max_tiles or ka[3] != kb[3])
    ]
    if not pairs:
        raise UnsupportedFeatureError(
            f"no two images of different layouts under the pinpoints {list(spec.pinpoints)[:6]}: "
            "the tiny test needs an image cut by rows and one cut by columns"
            + (" with one of them downsampled" if spec.max_tiles else "")
        )
    # different grids first, then the fewest tiles
    _, first, second, _ = min(pairs, key=lambda p: (not p[3], p[0], p[1], p[2]))
    return [first, second]
