"""Tiles of any resolution (LLaVA-NeXT's "anyres") for mobius: what the generated vision
encoder needs from ``TileGridSpec``, and what it cannot follow.

The packing is generated inside the ``vision_encoder`` graph. mobius keeps no packing for its own
``llava_next``, ``llava_next_video`` and ``llava_onevision`` registrations: they are its generic
``LLaVAModel``, whose vision encoder takes ``pixel_values [batch, 3, S, S]`` alone, returns every
tile's features and holds no ``image_newline`` (``vision_bugs.llava_tile_defects``). Its one
packing of a comparable kind, Phi-4-MM's HD transform (``_Phi4MMVisionModel``: a crop grid from
``image_sizes``, row separators, the global crop beside the grid), lives in the vision graph
too, which is where this one goes: the encoder takes one image's tiles with its original size,
so a host feeds it what HF's processor gives and the newline vector is a graph initializer the
weight proof covers (Phi-3-Vision's host-side numpy transform keeps its separators outside the
graphs, which no weight proof would see).
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.spec import ArchitectureSpec
from onboard.vision import PixtralTowerSpec, QwenVLTowerSpec, VisionSpec


@dataclass(frozen=True)
class TileNames:
    """What the generated tile grid reads and keeps."""

    newline: str  # the encoder's parameter (HF's attribute, image_newline); "": no newline
    newline_on_disk: str  # its checkpoint name
    unpad: bool
    downsample: bool  # LLaVA-OneVision: past the tile budget the grid is resized
    downsample_above: float  # HF's ratio threshold
    downsample_at: str  # where HF compares it (modeling_llava_onevision.py:320)


def tile_names(spec: ArchitectureSpec) -> TileNames | None:
    vision = spec.vision
    if vision is None or vision.tiles is None:
        return None
    tiles = vision.tiles
    threshold = [e.where for e in spec.evidence_for("vision.tiles.max_tiles") if e.kind == "source"]
    return TileNames(
        newline=tiles.newline,
        newline_on_disk=dict(vision.prefixes).get("newline", tiles.newline),
        unpad=tiles.unpad,
        downsample=bool(tiles.max_tiles),
        downsample_above=tiles.downsample_above,
        downsample_at=threshold[0] if threshold else "HF's pack_image_features",
    )


def tile_blockers(vision: VisionSpec) -> list[str]:
    """What the generated tile grid cannot follow."""
    if vision.tiles is None:
        return []
    found = []
    if isinstance(vision.tower, PixtralTowerSpec | QwenVLTowerSpec):
        found.append(
            f"tiles of any resolution over a {vision.towers.kind} tower (vision.tiles): the "
            "generated tile grid packs square tiles of a ViT"
        )
    if vision.image_rows or vision.merge.token_blocks or vision.deepstack:
        found.append(
            "tiles of any resolution beside rows of images, token-type blocks or DeepStack "
            "(vision.tiles): the generated task takes one image's tiles at a time and nothing else"
        )
    return found


def tile_fields(vision: VisionSpec) -> list[tuple[str, str, str, str, str]]:
    """The config fields of the tile grid: (name, annotation, default, expression, why)."""
    tiles = vision.tiles
    assert tiles is not None
    found = [
        (
            "image_grid_pinpoints",
            "tuple[tuple[int, int], ...]",
            repr(tiles.pinpoints),
            f"tuple((int(h), int(w)) for h, w in top.{tiles.pinpoints_key})",
            "the grids (height, width in pixels) an image's tiles may form",
        )
    ]
    if tiles.max_tiles:
        found.append(
            (
                "max_tiles",
                "int",
                str(tiles.max_tiles),
                f'int(top.{tiles.max_tiles_key}.removeprefix("anyres_max_"))',
                f"the tile budget past which a grid is downsampled ({tiles.max_tiles_key})",
            )
        )
    return found


def tile_changes(vision: VisionSpec) -> tuple[str, ...]:
    tiles = vision.tiles
    assert tiles is not None
    steps = ["the grid of the pinpoint the original size fits best"]
    if tiles.unpad:
        steps.append("cut back to the original aspect ratio")
    if tiles.max_tiles:
        steps.append(f"resized bilinearly past {tiles.max_tiles} tiles' features")
    if tiles.newline:
        steps.append(f"{tiles.newline} closing each row")
    return (
        "tiles of any resolution: the vision encoder takes one image's tiles (base tile first) "
        "with its original size (image_sizes) and packs them as HF's pack_image_features: the "
        f"base tile, then {', '.join(steps)}",
    )
