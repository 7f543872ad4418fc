"""GLM-4V (glm4v, glm4v_moe): a Qwen-VL relative whose tower norms the patches after the
convolution, adds learned positions resampled bicubically to each grid, ends in an RMS norm and
a downsample convolution over each merge block, and hands a gated merger the result; its text
model turns half of each head in adjacent pairs, by M-RoPE sections."""

from __future__ import annotations

import dataclasses
import tempfile
from functools import cache
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.source import load_source
from onboard.tiny import shrink_config
from onboard.vision import QwenVLTowerSpec
from tests.analyses import tiny_vlm_at
from tests.analysis.qwen_vl_stages import stage_check, tiny_qwen_vl


@pytest.mark.parametrize(
    ("rope", "sections"),
    [
        ({"partial_rotary_factor": 0.5, "mrope_section": [8, 12, 12]}, [1, 2, 1]),
        ({"mrope_section": [16, 24, 24]}, [2, 3, 3]),
        # a rotated quarter of the tiny head is two frequencies: the column section gets none
        ({"partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10]}, [1, 1, 0]),
    ],
    ids=["half-rotated", "whole-head", "quarter-rotated"],
)
def test_tiny_mrope_sections_cover_the_rotated_half(rope, sections) -> None:
    """HF splits the rotated frequencies by the sections exactly (GLM-4V's split_with_sizes):
    the tiny sections sum to the tiny head's rotated half, not to half the head."""
    config = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, **rope},
    }
    tiny = shrink_config(config, None).config
    assert tiny["rope_parameters"]["mrope_section"] == sections


@cache
def _config_dir(model_type: str = "glm4v") -> str:
    from tests.published_vlms import published_vlm_dir

    return str(published_vlm_dir(model_type, Path(tempfile.mkdtemp(prefix="glm4v-"))))


@cache
def _analysis(model_type: str = "glm4v"):
    return analyse(load_source(_config_dir(model_type)))


@cache
def _tiny():
    """The tiny GLM-4V the analysis reads, its vision spec at tiny sizes, parts and trace."""
    return tiny_qwen_vl(*tiny_vlm_at(_config_dir()))


def _check(vision):
    return stage_check(vision, _tiny())


def test_glm4v_reads_its_tower_parts_merger_and_adjacent_mrope() -> None:
    spec = _analysis().spec
    assert spec.unresolved == ()
    vision = spec.vision
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec) and tower.glm is not None
    glm = tower.glm
    assert (glm.patch_norm.op, glm.end_norm.op, glm.resample) == ("rms_norm", "rms_norm", "bicubic")
    assert glm.downsample_bias and tower.patch_bias
    names = dict(tower.names)
    assert (names["patch_norm"], names["end_norm"], names["downsample"]) == (
        "post_conv_layernorm",
        "post_layernorm",
        "downsample",
    )
    # at the real sizes: the block MLP is out_hidden_size wide, the merger intermediate_size
    assert (tower.hidden_size, tower.out_hidden_size, tower.mlp.intermediate_size) == (
        1536,
        4096,
        4096,
    )
    assert tower.position_embeddings == (336 // 14) ** 2
    assert not tower.attention.q_bias and not tower.attention.o_bias
    assert tower.norm.eps == 1e-5 and tower.norm.eps_key == "rms_norm_eps"
    ops = [(s.op, s.name, s.activation) for s in vision.projector.steps]
    assert ops == [
        ("linear", "proj", ""),
        ("layer_norm", "post_projection_norm", ""),
        ("activation", "act1", "gelu"),
        ("gate_up", "gate_proj", "silu"),
        ("linear", "down_proj", ""),
    ]
    gate = vision.projector.steps[3]
    assert (gate.up, gate.in_features, gate.out_features) == ("up_proj", 4096, 13696)
    mrope = vision.merge.mrope
    assert (mrope.sections, mrope.layout, mrope.pairs) == ((8, 12, 12), "chunks", "adjacent")
    assert spec.text.rope[0][1].partial_rotary_factor == 0.5


def _resampled(mode):
    def change(vision):
        tower = vision.tower
        glm = dataclasses.replace(tower.glm, resample=mode)
        return dataclasses.replace(
            vision, towers=vision.towers.replace(dataclasses.replace(tower, glm=glm))
        )

    return change


def _merger_activation(vision):
    steps = tuple(
        dataclasses.replace(s, activation="silu") if s.op == "activation" else s
        for s in vision.projector.steps
    )
    return dataclasses.replace(vision, projector=dataclasses.replace(vision.projector, steps=steps))


def _gate_activation(vision):
    steps = tuple(
        dataclasses.replace(s, activation="gelu") if s.op == "gate_up" else s
        for s in vision.projector.steps
    )
    return dataclasses.replace(vision, projector=dataclasses.replace(vision.projector, steps=steps))


def _sections_on_halves(vision):
    mrope = dataclasses.replace(vision.merge.mrope, pairs="halves")
    return dataclasses.replace(vision, merge=dataclasses.replace(vision.merge, mrope=mrope))


def test_the_tiny_spec_passes_the_check() -> None:
    vision = _tiny()[0]
    assert _check(vision) == ()


@pytest.mark.parametrize(
    ("change", "stage"),
    [
        (_resampled("bilinear"), "first layer's input"),
        (_merger_activation, "merger"),
        (_gate_activation, "merger"),
        (_sections_on_halves, "M-RoPE angles"),
    ],
    ids=[
        "positions-bilinear",
        "merger-gelu-swapped",
        "gate-activation-swapped",
        "mrope-on-halves",
    ],
)
def test_a_wrong_glm_spec_fails_the_check(change, stage) -> None:
    deltas = _check(change(_tiny()[0]))
    assert deltas and any(stage in d.what for d in deltas), deltas


def test_a_tower_end_without_the_downsample_fails_the_check(monkeypatch) -> None:
    """The check's own tower end without the convolution: its stage and the whole tower fail."""
    from onboard.analysis.vision import qwen_vl_run

    monkeypatch.setattr(qwen_vl_run, "downsample", lambda _parts, _spec, _weight, x: x)
    whats = [d.what for d in _check(_tiny()[0])]
    assert any("tower's end" in w for w in whats) and any("whole tower" in w for w in whats)


def test_sections_that_do_not_cover_the_turned_half_are_refused(tmp_path) -> None:
    """transformers' default glm4v config turns whole 128-wide heads (64 frequencies) against
    HF's fallback sections [8, 12, 12] (32): HF's split fails at the real sizes."""
    from onboard.errors import InvalidConfigError
    from tests.new_types import default_config_dir

    root = default_config_dir("glm4v", tmp_path)
    with pytest.raises(
        InvalidConfigError, match=r"\[8, 12, 12\] cover 32 frequencies, but its heads turn 64"
    ):
        analyse(load_source(str(root)))
