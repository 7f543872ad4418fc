"""Qwen2.5-VL: the text backbone without a causal-LM class is read through a view of its base
model, the windowed tower, the patch merger and the M-RoPE positions from the published config,
each proved against the tiny HF model on three images of different grids; a spec that is wrong
anywhere fails the check."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest

from onboard.analysis import analyse
from onboard.source import load_source
from onboard.vision import QwenVLTowerSpec
from tests.analyses import tiny_vlm
from tests.hub_cache import fixture_config

MODEL = "Qwen/Qwen2.5-VL-3B-Instruct"


@cache
def _analysis():
    return analyse(load_source(str(fixture_config(MODEL).parent)))


@cache
def _tiny():
    """The tiny VLM the analysis reads (its spec at tiny sizes), its parts and its trace."""
    from onboard.analysis.vision.merger import called_leaves, read_merger
    from onboard.analysis.vision.mrope_read import mrope_spec
    from onboard.analysis.vision.qwen_vl import qwen_vl_parts, read_qwen_vl_tower, trace_qwen_vl

    config, model = tiny_vlm(MODEL)
    parts = qwen_vl_parts(model)
    tower = read_qwen_vl_tower(parts.module(model, "tower"), config.vision_config)
    merger = parts.module(model, "projector")
    probe = torch_zeros(4, tower.hidden_size)
    projector = read_merger(merger, tower.hidden_size, called_leaves(merger, lambda: merger(probe)))
    trace = trace_qwen_vl(model, parts, config)
    mrope = mrope_spec(config.text_config)
    return tower, projector, mrope, model, parts, trace, config.image_token_id


def torch_zeros(*shape: int):
    import torch

    return torch.zeros(*shape)


def test_qwen2_5_vl_reads_a_windowed_tower_a_merger_and_mrope() -> None:
    spec = _analysis().spec
    assert spec.unresolved == ()
    assert spec.text.attention.q_bias and not spec.text.attention.o_bias  # Qwen2's text model
    vision = spec.vision
    assert vision.towers.kind == "qwen_vl" and vision.towers.vit is None
    tower = vision.tower
    assert isinstance(tower, QwenVLTowerSpec)
    assert (tower.hidden_size, tower.num_layers, tower.patch_size, tower.temporal_patch_size) == (
        1280,
        32,
        14,
        2,
    )
    assert (tower.window_size, tower.fullatt_layers, tower.spatial_merge_size) == (
        112,
        (7, 15, 23, 31),
        2,
    )
    assert tower.window_blocks == 4 and tower.patch_width == 3 * 2 * 14 * 14
    assert tower.out_hidden_size == spec.text.hidden_size == 2048
    assert (tower.head_dim, tower.rope_theta) == (80, 10000.0)
    assert tower.mlp.kind == "gated" and tower.mlp.bias and tower.mlp.activation == "silu"
    assert (tower.norm.kind, tower.norm.eps) == ("rms", 1e-6)
    assert dict(tower.names)["qkv"] == "qkv" and dict(tower.names)["merger"] == "merger"
    assert dict(tower.keys)["fullatt_layers"] == "fullatt_block_indexes"
    ops = [(s.op, s.name, s.in_features, s.out_features) for s in vision.projector.steps]
    assert ops == [
        ("rms_norm", "ln_q", 0, 0),
        ("group_rows", "", 0, 0),
        ("linear", "mlp.0", 5120, 5120),
        ("activation", "mlp.1", 0, 0),
        ("linear", "mlp.2", 5120, 2048),
    ]
    assert vision.projector.steps[1].kernel == 4
    assert vision.projector.steps[3].activation == "gelu"
    merge = vision.merge
    assert merge.positions == "mrope" and merge.image_token_id == 151655
    assert merge.mrope.sections == (16, 24, 24)
    assert merge.mrope.key == "rope_parameters.mrope_section"
    evidence = dict(spec.evidence)
    assert "text_config.rope_parameters.mrope_section" in evidence["vision.merge.mrope"][0].where
    assert evidence["vision.tower.window_size"][0].where.endswith("vision_config.window_size")
    assert dict(vision.prefixes) == {
        "text": "model.",
        "projector": "visual.merger.",
        "tower": "visual.",
    }


def test_the_host_rule_gives_hfs_mrope_positions() -> None:
    """Text runs on; an image's tokens take (p + t, p + row, p + column) over its merged grid;
    the text after it resumes at p + max(rows, columns)."""
    from onboard.parity.mrope import mrope_positions

    ids = np.array([[1, 2, 9, 9, 9, 9, 9, 9, 3]])
    positions, deltas = mrope_positions(ids, 9, [(1, 4, 6)], 2)
    assert positions[:, 0, :2].tolist() == [[0, 1]] * 3
    assert positions[1, 0, 2:8].tolist() == [2, 2, 2, 3, 3, 3]  # rows
    assert positions[2, 0, 2:8].tolist() == [2, 3, 4, 2, 3, 4]  # columns
    assert positions[:, 0, 8].tolist() == [5, 5, 5]
    assert deltas.tolist() == [6 - 9]


@pytest.mark.parametrize(
    ("change", "stage"),
    [
        (lambda t: dataclasses.replace(t, fullatt_layers=()), "layer 1 (window attention)"),
        (lambda t: dataclasses.replace(t, window_size=t.window_size * 2), "window attention"),
        (lambda t: dataclasses.replace(t, rope_theta=t.rope_theta * 2), "layer 0"),
    ],
    ids=["full-layers-as-window", "windows-too-wide", "rope-base"],
)
def test_a_wrong_tower_spec_fails_the_check(change, stage: str) -> None:
    from onboard.analysis.vision.qwen_check import check_qwen_vl

    tower, projector, mrope, model, parts, trace, token = _tiny()
    deltas = check_qwen_vl(change(tower), projector, mrope, token, model, parts, trace)
    assert deltas and any(stage in d.what for d in deltas), [d.what for d in deltas]


def test_wrong_mrope_sections_or_merger_fail_the_check() -> None:
    from onboard.analysis.vision.qwen_check import check_qwen_vl

    tower, projector, mrope, model, parts, trace, token = _tiny()
    swapped = dataclasses.replace(mrope, sections=tuple(reversed(mrope.sections)))
    deltas = check_qwen_vl(tower, projector, swapped, token, model, parts, trace)
    assert [d.what for d in deltas] == [
        "Qwen2_5_VLRotaryEmbedding: the M-RoPE angles from the sections is not what the vision "
        "spec describes"
    ]
    steps = tuple(
        dataclasses.replace(s, activation="silu") if s.op == "activation" else s
        for s in projector.steps
    )
    wrong = dataclasses.replace(projector, steps=steps)
    deltas = check_qwen_vl(tower, wrong, mrope, token, model, parts, trace)
    assert any("merger" in d.what for d in deltas)


def test_a_backbone_view_is_refused_when_there_is_no_base_model(monkeypatch) -> None:
    from onboard.analysis.vision import backbone
    from onboard.errors import UnsupportedFeatureError

    monkeypatch.setattr(backbone, "register_causal_view", lambda _config: False)
    with pytest.raises(UnsupportedFeatureError, match="qwen2_5_vl_text has no causal-LM class"):
        analyse(load_source(str(fixture_config(MODEL).parent)))


def test_sections_left_to_hfs_fallback_are_read_from_its_line(tmp_path) -> None:
    """transformers' default Qwen3-VL config sets no mrope_section: HF's rotary module falls
    back to its own sections, which the spec takes from that line (and says so). The default's
    merger width (3584) is not its text width (4096), so that one key is made to agree."""
    from tests.new_types import default_config_dir

    root = default_config_dir("qwen3_vl", tmp_path, vision_config={"out_hidden_size": 4096})
    spec = analyse(load_source(str(root))).spec
    assert spec.unresolved == ()
    mrope = spec.vision.merge.mrope
    assert mrope.sections == (24, 20, 20) and mrope.layout == "interleaved"
    assert mrope.default_at.startswith("modeling_qwen3_vl.py:")


def test_sections_without_a_fallback_hf_names_are_refused(tmp_path, monkeypatch) -> None:
    from onboard.analysis.vision import mrope_read
    from onboard.errors import UnsupportedFeatureError
    from tests.new_types import default_config_dir

    monkeypatch.setattr(mrope_read, "hf_mrope_default", lambda _model_type: None)
    root = default_config_dir("qwen3_vl", tmp_path, vision_config={"out_hidden_size": 4096})
    with pytest.raises(UnsupportedFeatureError, match="no mrope_section and HF's qwen3_vl_text"):
        analyse(load_source(str(root)))
