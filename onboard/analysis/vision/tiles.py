"""Read how a tiny VLM packs tiles of any resolution (LLaVA-NeXT's "anyres") into each image's
features, as ``TileGridSpec``.

A VLM tiles when its ``get_image_features`` needs ``image_sizes`` beside a ViT of one image size
and its config names grid pinpoints. The rule is read by trial: each reading of the flags no key
announces (unpadding, a newline vector closing each grid row, downsampling past the tile
budget when a key sets one) runs the spec's packing (``tiles_run``) on the projector's output
for two images whose grids and cuts differ, and the first that gives exactly what
``get_image_features`` returned is kept. None: a delta at HF's ``pack_image_features``.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.vision.parts import VLMParts
from onboard.analysis.vision.tiles_run import pack
from onboard.analysis.vision.trace import same_values
from onboard.spec import Delta, Evidence
from onboard.tiny_model import takes_image_sizes
from onboard.tiny_tiles import max_tiles, max_tiles_key, pinpoints_key
from onboard.vision import TileGridSpec

_PACKS = "pack_image_features"
# The ratio past which HF resizes a grid, in its packing method's source
_THRESHOLD = re.compile(r"ratio\s*>\s*([0-9]*\.?[0-9]+)")


@dataclass(frozen=True)
class TilesReading:
    spec: TileGridSpec | None
    evidence: tuple[tuple[str, tuple[Evidence, ...]], ...] = ()
    deltas: tuple[Delta, ...] = ()


def takes_tiles(model: Any, config: Any) -> bool:
    """Whether the VLM takes tiles with ``image_sizes``: its image features need the sizes and
    its config names grid pinpoints (a tower of one image size; Pixtral's sizes are its own)."""
    return pinpoints_key(config) is not None and takes_image_sizes(model)


def provisional_tiles(model: Any, config: Any) -> TileGridSpec:
    """The layout the config announces (every flag on), which picks the test images; the
    reading then decides each flag."""
    key = pinpoints_key(config)
    assert key is not None
    budget = max_tiles_key(config)
    threshold = _threshold(model) if budget else None
    return TileGridSpec(
        pinpoints=tuple((int(h), int(w)) for h, w in getattr(config, key)),
        pinpoints_key=key,
        newline=_newline(model, config) or "",
        max_tiles=max_tiles(config, budget) if budget and threshold else 0,
        max_tiles_key=budget if threshold else None,
        downsample_above=threshold[0] if threshold else 0.0,
    )


def read_tiles(model: Any, parts: VLMParts, trace: Any, provisional: TileGridSpec) -> TilesReading:
    """The first reading whose packing of the projector's output is HF's, with its evidence."""
    import torch

    base = model.base_model
    packs = source_location(getattr(type(base), _PACKS, None)) or type(base).__name__
    size = trace.pixel_values.shape[-1]
    newline = getattr(base, provisional.newline) if provisional.newline else None
    budgets = (True, False) if provisional.max_tiles else (False,)
    for unpad, closes, budget in itertools.product((True, False), (True, False), budgets):
        if closes and newline is None:
            continue
        spec = TileGridSpec(
            provisional.pinpoints,
            provisional.pinpoints_key,
            newline=provisional.newline if closes else "",
            unpad=unpad,
            max_tiles=provisional.max_tiles if budget else 0,
            max_tiles_key=provisional.max_tiles_key if budget else None,
            downsample_above=provisional.downsample_above if budget else 0.0,
        )
        try:
            with torch.no_grad():
                packed = pack(spec, size, trace.projector_out, trace.image_sizes.tolist(), newline)
        except (ValueError, RuntimeError):  # this reading does not even fit the tiles
            continue
        if same_values(packed, trace.packed):
            return TilesReading(spec, _evidence(model, spec, trace, packs))
    return TilesReading(
        None,
        deltas=(
            Delta(
                f"{type(base).__name__} packs each image's tiles in a way the tile spec does "
                "not describe",
                packs,
                "no reading (base tile first, then the best pinpoint's grid row by row, cut back "
                "to the original aspect ratio or not, a newline closing each row or not, "
                "downsampled past the tile budget or not) gives get_image_features' output",
            ),
        ),
    )


def tile_packer(vision: Any, model: Any, trace: Any) -> Callable[[Any], Any] | None:
    """The spec's packing of projected tiles ``[tiles, side**2, hidden]`` for the trace's images,
    with the tiny model's newline vector; None: the VLM does not tile."""
    tiles = vision.tiles
    if tiles is None:
        return None
    newline = getattr(model.base_model, tiles.newline) if tiles.newline else None
    size = vision.tower.image_size
    sizes = trace.image_sizes.tolist()
    return lambda features: pack(tiles, size, features, sizes, newline)


def newline_on_disk(model: Any, spec: TileGridSpec, saved: dict[str, Any]) -> str:
    """The checkpoint name of the newline vector (image_newline), found by its value."""
    value = getattr(model.base_model, spec.newline).detach()
    found = [n for n, t in saved.items() if t.shape == value.shape and t.equal(value)]
    if len(found) != 1:
        raise ValueError(f"the checkpoint holds the newline vector under {found}")
    return found[0]


def _newline(model: Any, config: Any) -> str | None:
    """The base model's own vector of the text's width (image_newline), if it has one."""
    width = config.text_config.hidden_size
    own = [
        name
        for name, parameter in model.base_model.named_parameters(recurse=False)
        if tuple(parameter.shape) == (width,)
    ]
    return own[0] if len(own) == 1 else None


def _threshold(model: Any) -> tuple[float, str] | None:
    """HF's downsampling ratio threshold and its line, from the packing method's source."""
    method = getattr(type(model.base_model), _PACKS, None)
    if method is None:
        return None
    lines, start = inspect.getsourcelines(inspect.unwrap(method))
    for offset, line in enumerate(lines):
        if match := _THRESHOLD.search(line):
            where = (source_location(method) or "").rsplit(":", 1)[0]
            return float(match.group(1)), f"{where}:{start + offset}"
    return None


def _evidence(
    model: Any, spec: TileGridSpec, trace: Any, packs: str
) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    module = inspect.getmodule(type(model.base_model))
    chooses = source_location(getattr(module, "select_best_resolution", None)) or packs
    unpads = source_location(getattr(module, "unpad_image", None)) or packs
    sizes = [tuple(s) for s in trace.image_sizes.tolist()]
    found = [
        (
            "vision.tiles",
            (
                Evidence(
                    "probe",
                    packs,
                    f"get_image_features on images of original sizes {sizes}: the base tile's "
                    "features first, then the grid's row by row",
                ),
            ),
        ),
        (
            "vision.tiles.pinpoints",
            (
                Evidence(
                    "config", f"config.json:{spec.pinpoints_key}", f"{len(spec.pinpoints)} grids"
                ),
                Evidence("source", chooses, "the pinpoint the original size fits best"),
            ),
        ),
        (
            "vision.tiles.unpad",
            (
                Evidence(
                    "source" if spec.unpad else "probe",
                    unpads if spec.unpad else packs,
                    "the grid is cut back to the original aspect ratio"
                    if spec.unpad
                    else "the grid is kept whole",
                ),
            ),
        ),
        (
            "vision.tiles.newline",
            (
                Evidence(
                    "probe",
                    f"{model.base_model_prefix}.{spec.newline}" if spec.newline else packs,
                    "closes each row of the grid" if spec.newline else "no row is closed",
                ),
            ),
        ),
    ]
    if spec.max_tiles:
        threshold = _threshold(model)
        found.append(
            (
                "vision.tiles.max_tiles",
                (
                    Evidence(
                        "config", f"config.json:{spec.max_tiles_key}", f"{spec.max_tiles} tiles"
                    ),
                    Evidence(
                        "source",
                        threshold[1] if threshold else packs,
                        f"a grid past {spec.downsample_above} times the budget is resized",
                    ),
                ),
            )
        )
    return tuple(found)
