"""LLaVA-NeXT (tiles of any resolution with image_sizes) generated into mobius from
transformers' default llava_next config.

Parity feeds two rows whose images take different grids, one cut back to its aspect ratio by
rows and the other by columns; the generated encoder takes each image's tiles with its size and
packs them in the graph. A module that leaves the newline out, skips unpadding or puts the base
tile last fails it. mobius' own LLaVAModel fails it and the report names why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

_FLAT = "op.Reshape(grid, op.Constant(value_ints=[-1, hidden]))"  # the grid's rows, flattened
CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}


def _new(tmp_path: Path, model_type: str = "llava_next", **options):
    source = default_config_dir(model_type, tmp_path / "hub")
    options.setdefault("treat_as_new", True)
    return onboard_new(NewOptions(model=str(source), out=tmp_path / "out", **options))


def test_llava_next_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path)
    text = passed_module(result, CHECKS)
    report = result.parity
    # the tower's last layer and its post norm: HF computes them and never reads the result
    assert len(report.weights.unread) == 18
    assert "default_task = LlavaNextVisionLanguageTask()" in text
    assert "class LlavaNextTileGrid(nn.Module)" in text
    assert "self.image_newline = nn.Parameter((config.hidden_size,))" in text
    assert 'result["vision_encoder.image_newline"] = tensor' in text
    assert "tuple((int(h), int(w)) for h, w in top.image_grid_pinpoints)" in text
    assert "_downsample" not in text  # llava_next has no tile budget
    patch = (result.root / "onboard.patch").read_text()
    assert '"llava_next": ModelRegistration(LlavaNextMultiModalModel),' in patch


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(
            "grid = op.Concat(grid, closing, axis=1)",
            "grid = op.Concat(closing, grid, axis=1)",
            id="newline-opening-rows",
        ),
        pytest.param(
            "grid = self._unpad(op, grid, height, width, grid_h, grid_w)",
            "grid = op.Identity(grid)",
            id="unpadding-skipped",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            f"return op.Concat(base, {_FLAT}, axis=0)",
            f"return op.Concat({_FLAT}, base, axis=0)",
            id="base-tile-last",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_wrong_tile_packing_fails_parity(tmp_path: Path, old: str, new: str) -> None:
    checks = statuses(parity_with(_new(tmp_path, parity=False), old, new))
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.FAIL
    assert checks["prefill"] is Status.FAIL


def test_a_newline_left_out_fails_the_weight_proof(tmp_path: Path) -> None:
    """The checkpoint's image_newline then fills nothing: parity stops at the weights."""
    old = "grid = op.Concat(grid, closing, axis=1)"
    report = parity_with(_new(tmp_path, parity=False), old, "grid = op.Identity(grid)")
    weights = next(c for c in report.checks if c.name == "weights")
    assert weights.status is Status.FAIL
    assert "image_newline" in weights.detail


def test_mobius_own_llava_model_is_reported_with_its_tile_defects(tmp_path: Path) -> None:
    result = _new(tmp_path, treat_as_new=False)
    assert result.proposal.already_supported is not None
    report = result.parity
    assert report is not None and not report.passed
    ids = {b.id for b in report.bugs}
    assert ids == {"hybrid M1", "llava-next N1", "llava-next N2", "llava-next N3"}
    weights = next(c for c in report.checks if c.name == "weights")
    assert weights.status is Status.FAIL


def test_llava_onevision_generates_with_its_downsampling(tmp_path: Path) -> None:
    """A grid past the tile budget is resized bilinearly (the tiny budget is one tile, so the
    second test image's two-tile grid is downsampled); leaving the resize out fails parity."""
    result = _new(tmp_path / "ok", "llava_onevision")
    text = passed_module(result, CHECKS)
    assert 'max_tiles=int(top.vision_aspect_ratio.removeprefix("anyres_max_")),' in text
    assert "self._downsample_above = 1.1" in text
    old = "grid = self._downsample(op, grid)"
    report = parity_with(_new(tmp_path / "bad", "llava_onevision", parity=False), old, "pass")
    checks = statuses(report)
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.FAIL


def _tile_grid_session(module, pinpoints, max_tiles: int, hidden: int):
    """The generated tile grid alone as an onnxruntime session: features [tiles, 16, hidden]
    and image_sizes [1, 2] in, the packed features out."""
    from types import SimpleNamespace

    import onnx_ir as ir
    import onnxruntime as ort
    from mobius.tasks._base import _make_graph, _make_model

    vision = SimpleNamespace(image_size=56, patch_size=14)
    config = SimpleNamespace(
        vision=vision, hidden_size=hidden, image_grid_pinpoints=pinpoints, max_tiles=max_tiles
    )
    grid = module.LlavaOnevisionTileGrid(config)
    graph, builder = _make_graph(name="tiles")
    features = builder.input("features", dtype=ir.DataType.FLOAT, shape=["tiles", 16, hidden])
    sizes = builder.input("image_sizes", dtype=ir.DataType.INT64, shape=[1, 2])
    newline = builder.input("newline", dtype=ir.DataType.FLOAT, shape=[hidden])
    builder.add_output(grid(builder.op, features, sizes, newline), "packed")
    proto = ir.to_proto(_make_model(graph)).SerializeToString()
    return ort.InferenceSession(proto, providers=["CPUExecutionProvider"])


def test_the_generated_tile_grid_packs_any_image_size_as_the_spec(tmp_path: Path) -> None:
    """The grid choice (float64, as HF's Python floats), the integer unpadding and the
    downsampling sizes of the generated graph, against the spec's packing on 200 sizes."""
    import random

    import numpy as np
    import torch

    from onboard.analysis.vision.tiles_run import image_grid, pack_image
    from onboard.targets.mobius import _import_file
    from onboard.vision import TileGridSpec

    result = _new(tmp_path, "llava_onevision", parity=False)
    module = _import_file(result.root / result.plan.model_file)
    pinpoints = tuple((h * 56, w * 56) for h in range(1, 7) for w in range(1, 7))
    spec = TileGridSpec(pinpoints, "k", "n", max_tiles=4, max_tiles_key="v", downsample_above=1.1)
    session = _tile_grid_session(module, pinpoints, spec.max_tiles, hidden=8)
    rng, generator = random.Random(0), np.random.default_rng(0)
    newline = generator.standard_normal(8).astype(np.float32)
    kinds = set()
    for _ in range(200):
        size = (rng.randint(1, 400), rng.randint(1, 400))
        grid = image_grid(spec, 56, 4, size)
        tiles = generator.standard_normal((grid.tiles, 16, 8)).astype(np.float32)
        want = pack_image(grid, torch.from_numpy(tiles), torch.from_numpy(newline)).numpy()
        feeds = {"features": tiles, "image_sizes": np.array([size]), "newline": newline}
        (got,) = session.run(None, feeds)
        assert got.shape == want.shape, size
        assert np.abs(got - want).max() < 1e-4, size
        kinds.add((grid.top > 0, grid.left > 0, grid.downsampled))
    assert len(kinds) >= 4  # cut by rows, by columns, downsampled or not
