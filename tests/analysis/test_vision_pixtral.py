"""Pixtral towers (Mistral 3, LightOnOCR): the tower, the feature layer and the patch-merging
projector are read from transformers' default configs and proved against the tiny HF model on
two images of different sizes; a spec or a check that is wrong anywhere fails."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.vision import _read_vision, pixtral_run
from onboard.analysis.vision.check import check_vision
from onboard.analysis.vision.parts import find_parts
from onboard.analysis.vision.trace import trace_vlm
from onboard.hf_config import make_hf_config
from onboard.source import load_source
from onboard.tiny_model import build_tiny_model, perturb
from onboard.vision import PixtralTowerSpec
from tests.new_types import default_config_dir


@cache
def _analysis(model_type: str):
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="onboard-pixtral-"))
    return analyse(load_source(str(default_config_dir(model_type, root))))


def test_mistral3_reads_a_pixtral_tower_and_a_patch_merging_projector() -> None:
    from transformers import Mistral3Config

    real = Mistral3Config()
    spec = _analysis("mistral3").spec
    assert spec.unresolved == ()
    vision = spec.vision
    assert vision.towers.kind == "pixtral" and vision.towers.vit is None
    tower = vision.tower
    assert isinstance(tower, PixtralTowerSpec)
    v = real.vision_config
    assert (tower.hidden_size, tower.num_layers, tower.patch_size, tower.image_size) == (
        v.hidden_size,
        v.num_hidden_layers,
        v.patch_size,
        v.image_size,
    )
    assert tower.head_dim == v.head_dim == v.hidden_size // v.num_attention_heads
    assert tower.rope_theta == v.rope_parameters["rope_theta"]
    assert not tower.patch_bias and not tower.class_token and tower.pre_norm
    assert not any((tower.attention.q_bias, tower.attention.o_bias, tower.mlp.bias))
    assert tower.mlp.kind == "gated" and tower.mlp.activation == v.hidden_act
    assert tower.mlp.projections == ("gate_proj", "up_proj", "down_proj")
    assert (tower.norm.kind, tower.norm.eps) == ("rms", 1e-5)
    assert dict(tower.names)["pre_norm"] == "ln_pre"
    assert vision.select.layers == (real.vision_feature_layer,)
    assert vision.select.layer_key == "vision_feature_layer"
    merge_size, width, text = real.spatial_merge_size, v.hidden_size, real.text_config.hidden_size
    assert [(s.op, s.name, s.in_features, s.out_features) for s in vision.projector.steps] == [
        ("rms_norm", "norm", 0, 0),
        ("patch_merge", "patch_merger.merging_layer", width * merge_size**2, width),
        ("linear", "linear_1", width, text),
        ("activation", "act", 0, 0),
        ("linear", "linear_2", text, text),
    ]
    merge = vision.projector.steps[1]
    assert (merge.kernel, merge.kernel_key) == (merge_size, "spatial_merge_size")
    assert vision.projector.steps[0].eps == real.text_config.rms_norm_eps
    assert vision.merge.image_token_id == real.image_token_id


@pytest.mark.slow
def test_lighton_ocr_reads_the_same_tower_and_torchs_gelu() -> None:
    spec = _analysis("lighton_ocr").spec
    assert spec.unresolved == ()
    assert spec.vision.towers.kind == "pixtral"
    steps = spec.vision.projector.steps
    assert [s.op for s in steps] == ["rms_norm", "patch_merge", "linear", "activation", "linear"]
    assert steps[3].activation == "gelu"  # torch.nn.GELU(), exact
    assert dict(spec.vision.prefixes)["tower"] == "model.vision_encoder."  # as saved


def test_the_spec_survives_json() -> None:
    from onboard.spec import ArchitectureSpec

    spec = _analysis("mistral3").spec
    assert ArchitectureSpec.from_json(spec.to_json()) == spec


@cache
def _tiny():
    config = make_hf_config(_analysis("mistral3").tiny.config)
    model = perturb(build_tiny_model(config, auto_class="AutoModelForImageTextToText"))
    vision, _, deltas = _read_vision(model, config)
    assert deltas == ()
    parts = find_parts(model, config)
    return vision, model, parts, trace_vlm(model, parts, config, None, dynamic=True)


def _check(vision=None) -> tuple:
    tiny_vision, model, parts, trace = _tiny()
    return check_vision(vision or tiny_vision, model, parts, trace)


def test_the_trace_holds_two_images_of_different_sizes() -> None:
    trace = _tiny()[3]
    (wide_h, wide_w), (square_h, square_w) = trace.image_sizes.tolist()
    assert wide_w > wide_h == square_h == square_w
    assert _check() == ()


def test_the_check_fails_on_a_wrong_rope_theta() -> None:
    vision = _tiny()[0]
    tower = dataclasses.replace(vision.tower, rope_theta=vision.tower.rope_theta * 2)
    deltas = _check(dataclasses.replace(vision, towers=vision.towers.replace(tower)))
    layers = [d for d in deltas if "PixtralAttentionLayer" in d.what]
    assert len(layers) == tower.num_layers
    assert all(d.where.startswith("modeling_pixtral.py:") for d in layers)


def test_the_check_fails_on_rope_axes_swapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows and columns trade frequencies: only the patch grid's layout tells them apart."""
    right = pixtral_run.axial_angles

    def swapped(spec, grids):
        angles = right(spec, grids)
        quarter = angles.shape[-1] // 2
        return angles.roll(quarter, dims=-1)

    _tiny()  # analysed and cached before the sabotage, whichever test runs first
    monkeypatch.setattr(pixtral_run, "axial_angles", swapped)
    assert any("PixtralAttentionLayer" in d.what for d in _check())


def test_the_check_fails_on_a_transposed_patch_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    def transposed(x, grids, size):
        import torch

        out = []
        for image, (rows, columns) in zip(x.split([r * c for r, c in grids]), grids, strict=True):
            width = image.shape[-1]
            blocks = image.view(rows // size, size, columns // size, size, width)
            out.append(blocks.permute(0, 2, 4, 3, 1).reshape(-1, width * size * size))
        return torch.cat(out)

    _tiny()  # analysed and cached before the sabotage, whichever test runs first
    monkeypatch.setattr("onboard.analysis.vision.check.patch_merge", transposed)
    deltas = _check()
    assert any("Mistral3MultiModalProjector computes" in d.what for d in deltas)
    assert all(d.where.startswith("modeling_mistral3.py:") for d in deltas)


def test_the_check_fails_on_the_wrong_feature_layer() -> None:
    vision = _tiny()[0]
    deltas = _check(
        dataclasses.replace(vision, select=dataclasses.replace(vision.select, layers=(-2,)))
    )
    assert any("receives" in d.what and "modeling_mistral3.py" in d.where for d in deltas)


def test_the_check_fails_on_a_wrong_merge_size() -> None:
    vision = _tiny()[0]
    steps = tuple(
        dataclasses.replace(s, kernel=1) if s.op == "patch_merge" else s
        for s in vision.projector.steps
    )
    deltas = _check(
        dataclasses.replace(vision, projector=dataclasses.replace(vision.projector, steps=steps))
    )
    assert any("Mistral3MultiModalProjector" in d.what for d in deltas)


def _blockers(target: str, spec) -> tuple[str, ...]:
    from onboard.targets.base import load_target

    loaded = load_target(target)
    return loaded.propose(spec, loaded.open_library(None), treat_as_new=True).blockers


def test_both_build_mistral3_and_mobius_names_a_pixtral_tower_it_cannot() -> None:
    spec = _analysis("mistral3").spec
    assert _blockers("mobius", spec) == ()
    tower = spec.vision.tower
    biased = dataclasses.replace(tower, mlp=dataclasses.replace(tower.mlp, bias=True))
    vision = dataclasses.replace(spec.vision, towers=spec.vision.towers.replace(biased))
    blockers = _blockers("mobius", dataclasses.replace(spec, vision=vision))
    assert any("Pixtral MLP" in b and "vision.tower.mlp" in b for b in blockers)
    # AutoModel reuses HF's tower with image_sizes (tests/targets/automodel/test_vision_pixtral.py)
    assert _blockers("automodel", spec) == ()
