"""Sliding layers that rotate another share of each head than full layers (Laguna's
rope_parameters): the generated per-kind tables take each kind's partial_rotary_factor, which
NeMo's default RoPE reads from the config, not from rope_parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.sliding_rope import LAGUNA_ROPE, laguna_rotation, mellum_dir
from tests.targets.automodel.sabotage import assert_generated_tests_catch

KIND_ENTRY = "view.rope_parameters = dict(config.rope_parameters[layer_type])"
SABOTAGE = {
    # the full layers' RoPE on every layer
    "full-rope": (
        KIND_ENTRY,
        'view.rope_parameters = dict(config.rope_parameters["full_attention"])',
        "test_rotary_embedding_matches_hf and sliding_attention",
    ),
    # each kind's theta, but the config's rotated share (all of each head)
    "share": (
        "view.partial_rotary_factor = view.rope_parameters.get(",
        "view.partial_rotary_factor = {}.get(",
        "test_rotary_embedding_matches_hf and full_attention",
    ),
}


@pytest.mark.slow
def test_laguna_like_rope_generates_into_automodel_with_zero_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    laguna_rotation(monkeypatch, tmp_path / "site")
    folder = mellum_dir(tmp_path / "mellum", LAGUNA_ROPE)
    options = NewOptions(model=str(folder), target="automodel", out=tmp_path / "out")
    report = onboard_new(options).parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert {c.status for c in report.checks} == {Status.PASS}
    names = {c.name for c in report.checks}
    assert {f"test_rotary_embedding_matches_hf({k})" for k in LAGUNA_ROPE} <= names


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(SABOTAGE))
def test_generated_tests_catch_a_kind_rotating_as_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    laguna_rotation(monkeypatch, tmp_path / "site")
    folder = mellum_dir(tmp_path / "mellum", LAGUNA_ROPE)
    out = tmp_path / "out"
    options = NewOptions(model=str(folder), target="automodel", out=out, parity=False)
    result = onboard_new(options)
    rope_utils = (out / result.plan.model_file).parent / "rope_utils.py"
    old, new, keyword = SABOTAGE[how]
    assert_generated_tests_catch(out, rope_utils, old, new, keyword)
