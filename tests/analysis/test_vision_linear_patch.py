"""Fuyu: a VLM with no vision tower. Its processor flattens each image into patches and one
linear (``vision_embed_tokens``) embeds them straight into the text's width; the rows replace
the image placeholders. Read as a tower kind of its own (``LinearPatchTowerSpec``) from
transformers' default config, whose text model is Persimmon."""

from __future__ import annotations

import dataclasses
import tempfile
from functools import cache
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.vision.linear_patch import (
    check_linear_patch,
    flatten_patches,
    image_processor,
    processor_patches,
    read_linear_patch_vision,
    trace_patches,
)
from onboard.analysis.vision.parts import find_parts
from onboard.source import load_source
from onboard.vision import LinearPatchTowerSpec
from tests.analyses import tiny_vlm_at


@cache
def _config_dir() -> str:
    from tests.published_vlms import published_vlm_dir

    return str(published_vlm_dir("fuyu", Path(tempfile.mkdtemp(prefix="fuyu-"))))


@cache
def _analysis():
    return analyse(load_source(_config_dir()))


@cache
def _tiny():
    """The tiny Fuyu the analysis reads, its vision spec at tiny sizes, parts and trace."""
    config, model = tiny_vlm_at(_config_dir())
    vision, _, deltas = read_linear_patch_vision(model, config)
    assert deltas == ()
    parts = find_parts(model, config)
    processor = image_processor(config.model_type)
    return vision, model, parts, trace_patches(model, parts, config, processor), processor


def test_fuyu_reads_one_linear_over_flattened_patches() -> None:
    spec = _analysis().spec
    assert spec.unresolved == ()
    vision = spec.vision
    tower = vision.tower
    assert isinstance(tower, LinearPatchTowerSpec) and vision.towers.kind == "linear_patch"
    # at the real sizes: 30 x 30 x 3 patches into the 4096-wide text
    assert (tower.patch_size, tower.num_channels, tower.hidden_size) == (30, 3, 4096)
    assert tower.patch_width == 2700 and tower.patch_bias and tower.layout == "hwc"
    assert dict(tower.names) == {"patch": "vision_embed_tokens"}
    assert dict(tower.keys) == {
        "patch_size": "patch_size",
        "num_channels": "num_channels",
        "hidden_size": "hidden_size",
    }
    assert vision.projector.steps == () and vision.select.layers == (0,)
    assert (vision.merge.image_token_id, vision.merge.image_token_key) == (71011, "image_token_id")
    assert not vision.merge.scaled_before_merge and vision.merge.token_blocks == ""
    assert dict(vision.prefixes)["tower"] == "vision_embed_tokens."
    assert [name for name, _ in vision.tensors] == [
        "vision_embed_tokens.bias",
        "vision_embed_tokens.weight",
    ]
    assert spec.text.attention.fused_qkv and spec.text.norm.kind == "layer"
    evidence = dict(spec.evidence)
    built, probed = evidence["vision.tower.names"]
    assert built.where.startswith("modeling_fuyu.py:") and "config.hidden_size" in built.detail
    assert probed.where.startswith("modeling_fuyu.py:")
    (layout,) = evidence["vision.tower.layout"]
    assert "patchify_image" in layout.detail and "channel-last" in layout.detail


def test_the_tiny_composite_restates_the_tiny_text_width() -> None:
    """FuyuModel builds its patch linear to the composite config's hidden_size, which the
    default config restates from the text config: the tiny one follows the tiny text."""
    config, model = tiny_vlm_at(_config_dir())
    assert config.hidden_size == config.text_config.hidden_size
    assert model.model.vision_embed_tokens.out_features == config.text_config.hidden_size
    assert (config.patch_size, config.num_channels) == (30, 3)  # a patch is 2700 values


def test_the_spec_flattens_patches_as_the_processor_does() -> None:
    """The processor's patches are channel-last; read channel-first they differ."""
    import torch

    processor = image_processor("fuyu")
    images = [torch.randn(1, 3, 4, 6), torch.randn(1, 3, 6, 2)]
    made = processor_patches(processor, images, 2)
    assert made.shape == (6 + 3, 12)
    assert torch.equal(flatten_patches(images, 2, "hwc"), made)
    assert not torch.equal(flatten_patches(images, 2, "chw"), made)


def test_the_tiny_spec_passes_the_check() -> None:
    vision, model, parts, trace, processor = _tiny()
    assert check_linear_patch(vision, model, parts, trace, processor) == ()


def _tower(**changes):
    def change(vision):
        tower = dataclasses.replace(vision.tower, **changes)
        return dataclasses.replace(vision, towers=vision.towers.replace(tower))

    return change


def _image_token(vision):
    merge = dataclasses.replace(vision.merge, image_token_id=vision.merge.image_token_id - 1)
    return dataclasses.replace(vision, merge=merge)


@pytest.mark.parametrize(
    ("change", "stages"),
    [
        # read channel-first, the processor's patches are not the spec's: the layout stage and
        # the chain from the pixels fail
        (_tower(layout="chw"), ("patch layout", "from the pixels")),
        (_tower(patch_bias=False), ("image features", "merged embeddings from the pixels")),
        (_image_token, ("merged embeddings",)),
    ],
    ids=["channel-first", "bias-dropped", "other-placeholder"],
)
def test_a_wrong_linear_patch_spec_fails_the_check(change, stages) -> None:
    vision, model, parts, trace, processor = _tiny()
    deltas = check_linear_patch(change(vision), model, parts, trace, processor)
    for stage in stages:
        assert any(stage in d.detail for d in deltas), deltas
