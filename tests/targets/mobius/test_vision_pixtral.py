"""Mistral 3 and LightOnOCR (Pixtral tower, patch-merging projector) generated into mobius'
``pixtral-vl`` task from transformers' default configs.

Parity feeds two images of different sizes (padded, with ``image_sizes``) in a batch of two rows;
the generated encoder takes each image alone at its size. A generated module whose RoPE trades
rows for columns, whose patch merge reads blocks transposed, or whose tower MLP is silu as mobius'
own is, fails it. mobius' own Pixtral path fails it and the report names why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}


def _new(tmp_path: Path, model_type: str = "mistral3", **options):
    source = default_config_dir(model_type, tmp_path / "hub")
    options.setdefault("treat_as_new", True)
    return onboard_new(NewOptions(model=str(source), out=tmp_path / "out", **options))


def test_mistral3_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path)
    text = passed_module(result, CHECKS)
    report = result.parity
    assert report.weights.unread == ()  # the last layer is the one read
    assert 'default_task = "pixtral-vl"' in text
    # what mobius' own Pixtral path reads from the wrong place (pixtral P1-P3)
    assert "activation=vision.hidden_act" in text
    assert 'vision_rope_theta=top.vision_config.rope_parameters["rope_theta"]' in text
    assert "spatial_merge_size=top.spatial_merge_size" in text
    patch = (result.root / "onboard.patch").read_text()
    assert 'ModelRegistration(Mistral3MultiModalModel, task="pixtral-vl")' in patch


def _sabotaged(tmp_path: Path, old: str, new: str) -> dict:
    report = parity_with(_new(tmp_path, parity=False), old, new)
    return statuses(report)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "angles = op.Concat(row_angles, column_angles, axis=-1)",
            "angles = op.Concat(column_angles, row_angles, axis=-1)",
        ),
        ("perm=[0, 1, 3, 5, 2, 4]", "perm=[0, 1, 3, 5, 4, 2]"),
        pytest.param("activation=vision.hidden_act", 'activation="silu"', marks=pytest.mark.slow),
    ],
    ids=["rope-axes-swapped", "patch-merge-transposed", "tower-mlp-silu-as-mobius"],
)
def test_a_wrong_pixtral_side_fails_parity(tmp_path: Path, old: str, new: str) -> None:
    checks = _sabotaged(tmp_path, old, new)
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.FAIL
    assert checks["prefill"] is Status.FAIL


def test_mobius_own_pixtral_path_is_reported_with_its_defects(tmp_path: Path) -> None:
    result = _new(tmp_path, treat_as_new=False)
    assert result.proposal.already_supported is not None
    report = result.parity
    assert report is not None and not report.passed
    # the default config: gelu tower MLP, a head tied by the composite config, two image rows
    assert {b.id for b in report.bugs} == {"pixtral P1", "pixtral P4", "pixtral P5"}
    tied = next(b for b in report.bugs if b.id == "pixtral P4")
    weights = next(c for c in report.checks if c.name == "weights")
    assert "decoder.lm_head.weight is filled by no checkpoint tensor" in weights.detail
    assert "_base.py" in tied.evidence


@pytest.mark.slow
def test_lighton_ocr_a_pixtral_vlm_mobius_lacks_onboards(tmp_path: Path) -> None:
    """LightOnOCR: Pixtral tower, Qwen3 text, torch's GELU, tower and text of equal width."""
    result = _new(tmp_path, "lighton_ocr", treat_as_new=False)
    assert result.proposal.already_supported is None
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
