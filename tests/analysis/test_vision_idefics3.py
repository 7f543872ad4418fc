"""Idefics 3 and SmolVLM: rows of images, a tower read after its post norm and a pixel shuffle
before the projector's linear, read from transformers' default configs (with a published tower
size) and proved against the tiny HF model; a wrong shuffle order or factor fails the check."""

from __future__ import annotations

import dataclasses
import tempfile
from functools import cache
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.vision.check import check_vision
from onboard.analysis.vision.trace import trace_vlm
from onboard.source import load_source
from tests.analyses import read_tiny_vlm
from tests.new_types import default_config_dir

# Idefics3-8B-Llama3's tower; the default 224 / 32 = 7 patches a side no factor 2 divides
TOWER = {"image_size": 364, "patch_size": 14}


@cache
def _analysis(model_type: str = "idefics3"):
    root = Path(tempfile.mkdtemp(prefix="onboard-idefics3-"))
    return analyse(load_source(str(default_config_dir(model_type, root, vision_config=TOWER))))


@pytest.mark.parametrize("model_type", ["idefics3", "smolvlm"])
def test_rows_of_images_a_post_normed_tower_and_a_pixel_shuffle_are_read(model_type: str) -> None:
    spec = _analysis(model_type).spec
    assert spec.unresolved == ()
    vision = spec.vision
    assert vision.image_rows
    tower = vision.tower
    assert (tower.image_size, tower.patch_size, tower.hidden_size) == (364, 14, 1152)
    assert not tower.class_token and not tower.pre_norm and tower.post_norm
    assert vision.select.post_norm and not vision.select.drop_class_token
    shuffle, linear = vision.projector.steps
    assert (shuffle.op, shuffle.kernel, shuffle.kernel_key) == ("pixel_shuffle", 2, "scale_factor")
    assert (shuffle.in_features, shuffle.out_features) == (1152, 1152 * 4)
    assert (linear.op, linear.name, linear.bias) == ("linear", "modality_projection.proj", False)
    assert (linear.in_features, linear.out_features) == (1152 * 4, spec.text.hidden_size)
    assert vision.merge.image_token_key == "image_token_id"
    assert dict(vision.prefixes)["tower"] == "model.vision_model."
    assert dict(spec.evidence)["vision.image_rows"]


def test_the_spec_survives_json() -> None:
    from onboard.spec import ArchitectureSpec

    spec = _analysis().spec
    assert ArchitectureSpec.from_json(spec.to_json()) == spec


@cache
def _tiny():
    config, model, vision, parts = read_tiny_vlm(_analysis())
    post = vision.tower.name_of("post_norm")
    return vision, model, parts, trace_vlm(model, parts, config, post, rows=True)


def _check(vision=None) -> tuple:
    tiny_vision, model, parts, trace = _tiny()
    return check_vision(vision or tiny_vision, model, parts, trace)


def test_the_tiny_grid_is_two_shuffle_blocks_a_side() -> None:
    vision = _tiny()[0]
    assert vision.tower.image_size // vision.tower.patch_size == 2 * 2
    assert _check() == ()


def test_the_check_fails_on_a_transposed_pixel_shuffle(monkeypatch: pytest.MonkeyPatch) -> None:
    def transposed(x, kernel):
        images, count, width = x.shape
        blocks = int(count**0.5) // kernel
        grid = x.reshape(images, blocks, kernel, blocks, kernel, width)
        return grid.permute(0, 3, 1, 4, 2, 5).reshape(images, blocks * blocks, -1)

    _tiny()  # analysed and cached before the sabotage, whichever test runs first
    monkeypatch.setattr("onboard.analysis.vision.check.pixel_shuffle", transposed)
    deltas = _check()
    assert any("Idefics3Connector computes" in d.what for d in deltas)
    assert all(d.where.startswith("modeling_idefics3.py:") for d in deltas)


def test_the_check_fails_on_a_wrong_shuffle_factor() -> None:
    vision = _tiny()[0]
    steps = tuple(
        dataclasses.replace(s, kernel=1) if s.op == "pixel_shuffle" else s
        for s in vision.projector.steps
    )
    deltas = _check(
        dataclasses.replace(vision, projector=dataclasses.replace(vision.projector, steps=steps))
    )
    assert any("Idefics3Connector" in d.what for d in deltas)


def test_the_check_fails_when_the_post_norm_is_skipped() -> None:
    vision = _tiny()[0]
    select = dataclasses.replace(vision.select, post_norm=False, layers=(-1,))
    deltas = _check(dataclasses.replace(vision, select=select))
    assert any("receives" in d.what for d in deltas)


@cache
def _aya():
    root = Path(tempfile.mkdtemp(prefix="onboard-aya-"))
    return analyse(load_source(str(default_config_dir("aya_vision", root, vision_config=TOWER))))


def test_aya_vision_reads_a_pixel_shuffle_a_norm_and_a_swiglu_projector() -> None:
    spec = _aya().spec
    assert spec.unresolved == ()
    vision = spec.vision
    assert not vision.image_rows  # one image (tile) per row of pixel_values
    steps = vision.projector.steps
    assert [s.op for s in steps] == ["pixel_shuffle", "layer_norm", "linear", "glu", "linear"]
    assert (steps[0].kernel, steps[0].kernel_key) == (2, "downsample_factor")
    text = spec.text.hidden_size
    assert (steps[2].in_features, steps[2].out_features) == (1152 * 4, text)
    assert steps[3].activation == "silu"
    assert (steps[4].in_features, steps[4].out_features) == (text // 2, text)
    assert not vision.select.post_norm and vision.select.layers == (-1,)


def test_aya_vision_keeps_no_logit_scale_its_head_does_not_apply() -> None:
    """Cohere 2's causal LM scales the logits; Aya Vision's own head does not."""
    spec = _aya().spec
    assert spec.vision.text_model_type == "cohere2"
    assert spec.text.scale_at("logits") is None
    (evidence,) = dict(spec.evidence)["text.scales.logits"]
    assert "without the text model's logit_scale" in evidence.detail


def test_a_shuffle_factor_that_does_not_fold_the_grid_is_bad_input(tmp_path: Path) -> None:
    """Aya Vision's default tower: 384 / 14 = 27 patches a side, downsample_factor 2."""
    from onboard.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="downsample_factor 2 does not fold"):
        analyse(load_source(str(default_config_dir("aya_vision", tmp_path))))
