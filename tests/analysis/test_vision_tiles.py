"""LLaVA-NeXT's tiles of any resolution: the tile layout is read from transformers' default
llava_next config and proved against the tiny HF model on two images whose grids and cuts
differ; a packing that leaves the newline out, skips unpadding or puts the base tile last fails
the check, and pinpoints that are not whole tiles are bad input."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.vision import tiles_run
from onboard.analysis.vision.check import check_vision
from onboard.analysis.vision.tiles import provisional_tiles
from onboard.analysis.vision.trace import trace_vlm
from onboard.errors import InvalidConfigError
from onboard.source import load_source
from tests.analyses import read_tiny_vlm
from tests.new_types import default_config_dir


@cache
def _analysis(model_type: str = "llava_next"):
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="onboard-tiles-"))
    return analyse(load_source(str(default_config_dir(model_type, root))))


def test_llava_next_reads_its_tile_layout() -> None:
    from transformers import LlavaNextConfig

    spec = _analysis().spec
    assert spec.unresolved == ()
    tiles = spec.vision.tiles
    assert tiles.pinpoints == tuple(tuple(p) for p in LlavaNextConfig().image_grid_pinpoints)
    assert (tiles.pinpoints_key, tiles.newline, tiles.unpad) == (
        "image_grid_pinpoints",
        "image_newline",
        True,
    )
    assert (tiles.max_tiles, tiles.max_tiles_key) == (0, None)  # no tile budget
    assert dict(spec.vision.prefixes)["newline"] == "image_newline"
    evidence = dict(spec.evidence)
    assert evidence["vision.tiles.unpad"][0].where.startswith("modeling_llava_next.py:")
    assert evidence["vision.tiles.pinpoints"][1].where.startswith("image_processing_utils.py:")


def test_the_spec_survives_json() -> None:
    from onboard.spec import ArchitectureSpec

    spec = _analysis().spec
    assert ArchitectureSpec.from_json(spec.to_json()) == spec


@cache
def _tiny():
    config, model, vision, parts = read_tiny_vlm(_analysis())
    trace = trace_vlm(model, parts, config, None, tiles=provisional_tiles(model, config))
    return vision, model, parts, trace


def _check(vision=None) -> tuple:
    tiny_vision, model, parts, trace = _tiny()
    return check_vision(vision or tiny_vision, model, parts, trace)


def _packs(deltas: tuple) -> list:
    return [d for d in deltas if d.where.startswith("modeling_llava_next.py:")]


@pytest.mark.slow
def test_the_test_images_differ_in_grid_and_cut() -> None:
    vision, _, _, trace = _tiny()
    size = vision.tower.image_size
    grids = [
        tiles_run.image_grid(vision.tiles, size, size // vision.tower.patch_size, s)
        for s in trace.image_sizes.tolist()
    ]
    assert (grids[0].rows, grids[0].columns) != (grids[1].rows, grids[1].columns)
    assert grids[0].top > 0 and grids[1].left > 0  # one cut by rows, one by columns
    assert _check() == ()


@pytest.mark.parametrize(
    "change", [{"unpad": False}, {"newline": ""}], ids=["unpad-skipped", "newline-left-out"]
)
def test_the_check_fails_on_a_wrong_tile_spec(change: dict) -> None:
    vision = _tiny()[0]
    wrong = dataclasses.replace(vision, tiles=dataclasses.replace(vision.tiles, **change))
    deltas = _packs(_check(wrong))
    assert any("LlavaNextModel computes" in d.what for d in deltas)


def test_the_check_fails_on_the_base_tile_last(monkeypatch: pytest.MonkeyPatch) -> None:
    right = tiles_run.pack_image

    def base_last(grid, tiles, newline):
        packed = right(grid, tiles, newline)
        base = grid.side**2
        return packed.roll(-base, dims=0)

    _tiny()  # analysed and cached before the sabotage, whichever test runs first
    monkeypatch.setattr(tiles_run, "pack_image", base_last)
    deltas = _packs(_check())
    assert any("LlavaNextModel computes" in d.what for d in deltas)


def test_pinpoints_that_are_not_whole_tiles_are_bad_input(tmp_path: Path) -> None:
    folder = default_config_dir(
        "llava_next", tmp_path, image_grid_pinpoints=[[336, 672], [500, 336]]
    )
    with pytest.raises(InvalidConfigError, match=r"image_grid_pinpoints \[\[500, 336\]\] are not"):
        analyse(load_source(str(folder)))
