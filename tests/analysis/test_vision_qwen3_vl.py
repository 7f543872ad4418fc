"""Qwen3-VL: the tower's learned positions resampled to each grid, its DeepStack mergers and
their injection into the first text layers, and the interleaved M-RoPE, read from the published
config and proved against the tiny HF model; a spec that leaves any of them out fails the check."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from onboard.analysis import analyse
from onboard.source import load_source
from onboard.vision import QwenVLTowerSpec
from tests.analyses import tiny_vlm
from tests.analysis.qwen_vl_stages import stage_check, tiny_qwen_vl
from tests.hub_cache import fixture_config

MODEL = "Qwen/Qwen3-VL-2B-Instruct"


@cache
def _analysis():
    return analyse(load_source(str(fixture_config(MODEL).parent)))


@cache
def _tiny():
    """The tiny VLM the analysis reads, with its vision spec at tiny sizes and its trace."""
    return tiny_qwen_vl(*tiny_vlm(MODEL))


def _check(vision):
    return stage_check(vision, _tiny())


def test_qwen3_vl_reads_positions_deepstack_and_interleaved_mrope() -> None:
    spec = _analysis().spec
    assert spec.unresolved == ()
    assert spec.text.attention.qk_norm == "per_head"  # a Qwen3 text backbone
    vision = spec.vision
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec)
    assert (tower.hidden_size, tower.num_layers, tower.patch_size, tower.head_dim) == (
        1024,
        24,
        16,
        64,
    )
    assert tower.position_embeddings == 2304 and tower.name_of("positions") == "pos_embed"
    assert tower.window_size == 0 and tower.fullatt_layers == tuple(range(24))
    assert tower.mlp.kind == "plain" and tower.mlp.activation == "gelu_pytorch_tanh"
    assert tower.norm.kind == "layer" and tower.patch_bias
    ops = [s.op for s in vision.projector.steps]
    assert ops == ["layer_norm", "group_rows", "linear", "activation", "linear"]
    deepstack = vision.deepstack
    assert deepstack.layers == (5, 11, 17) and deepstack.name == "deepstack_merger_list"
    # each DeepStack merger normalises the grouped rows, not the tower's
    steps = [(s.op, s.in_features, s.out_features) for s in deepstack.projector.steps]
    assert steps == [
        ("group_rows", 0, 0),
        ("layer_norm", 0, 0),
        ("linear", 4096, 4096),
        ("activation", 0, 0),
        ("linear", 4096, 2048),
    ]
    mrope = vision.merge.mrope
    assert (mrope.sections, mrope.layout, mrope.default_at) == ((24, 20, 20), "interleaved", "")
    evidence = dict(spec.evidence)
    assert "interleaved" in evidence["vision.merge.mrope.layout"][0].detail
    assert evidence["vision.deepstack.layers"][0].where.endswith("deepstack_visual_indexes")
    assert evidence["vision.tower.position_embeddings"][0].where.endswith("num_position_embeddings")


def test_the_tiny_tower_keeps_every_deepstack_layer() -> None:
    vision, *_ = _tiny()
    assert vision.deepstack.layers == (0, 1, 2) and vision.tower.num_layers == 4


@pytest.mark.parametrize(
    ("change", "stage"),
    [
        (lambda v: dataclasses.replace(v, deepstack=None), "DeepStack"),
        (
            lambda v: dataclasses.replace(
                v,
                merge=dataclasses.replace(
                    v.merge, mrope=dataclasses.replace(v.merge.mrope, layout="chunks")
                ),
            ),
            "M-RoPE angles",
        ),
        (
            lambda v: dataclasses.replace(
                v, towers=v.towers.replace(dataclasses.replace(v.tower, position_embeddings=0))
            ),
            "first layer's input",
        ),
        (
            lambda v: dataclasses.replace(
                v, deepstack=dataclasses.replace(v.deepstack, layers=(1, 2, 3))
            ),
            "DeepStack merger 0",
        ),
    ],
    ids=["deepstack-left-out", "mrope-not-interleaved", "no-learned-positions", "layers-off"],
)
def test_a_spec_without_a_qwen3_vl_feature_fails_the_check(change, stage: str) -> None:
    vision, *_ = _tiny()
    assert _check(vision) == ()
    deltas = _check(change(vision))
    assert deltas and any(stage in d.what for d in deltas), [d.what for d in deltas]
    assert all("modeling_qwen3_vl.py:" in d.where for d in deltas)


def test_deepstack_left_out_names_the_text_layers_it_feeds() -> None:
    vision, *_ = _tiny()
    deltas = _check(dataclasses.replace(vision, deepstack=None))
    whats = [d.what for d in deltas]
    assert any("Qwen3VLTextModel: text layer 0's output" in w for w in whats), whats
