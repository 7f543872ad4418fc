"""Qwen3-VL generated into mobius from the published config (offline, the config bundled in
tests/fixtures/hub): mobius' own entry hidden by --treat-as-new.

The tower is mobius' Qwen3VLVisionModel (learned positions resampled to each grid, its merger
and DeepStack mergers under HF's names); the text model adds the DeepStack features to the first
layers' outputs, and rotates by interleaved M-RoPE. Parity feeds three rows (one image, two
images, text only) with the host's ``position_ids [3, B, S]``. mobius' own 3-model Qwen3-VL
drops DeepStack: the report names it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.hub_cache import fixture_config
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
MODEL = "Qwen/Qwen3-VL-2B-Instruct"
DEEPSTACK_ADD = "hidden_states = op.Add(hidden_states, deepstack[index])"


def _new(tmp_path: Path, **options):
    return onboard_new(
        NewOptions(model=str(fixture_config(MODEL).parent), out=tmp_path / "out", **options)
    )


def test_qwen3_vl_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path, treat_as_new=True)
    text = passed_module(result, CHECKS)
    assert result.parity.weights.unread == ()
    assert "class Qwen3VLVisionTransformer(Qwen3VLVisionModel):" in text
    assert "deepstack_visual_indexes=list(top.vision_config.deepstack_visual_indexes)" in text
    assert "mrope_interleaved=True" in text
    assert DEEPSTACK_ADD in text
    assert "default_task = Qwen3VLVisionLanguageTask()" in text
    patch = (result.root / "onboard.patch").read_text()
    assert '+    "qwen3_vl": ModelRegistration(Qwen3VLMultiModalModel),' in patch


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        (DEEPSTACK_ADD, "hidden_states = hidden_states", {"prefill"}),
        (
            "op.Gather(deepstack_features, k, axis=0)",
            "op.Gather(deepstack_features, self._mergers - 1 - k, axis=0)",
            {"prefill"},
        ),
        ("mrope_interleaved=True", "mrope_interleaved=False", {"prefill"}),
    ],
    ids=["deepstack-left-out", "deepstack-mergers-reversed", "mrope-in-chunks"],
)
@pytest.mark.slow
def test_a_wrong_qwen3_vl_side_fails_parity(
    tmp_path: Path, old: str, new: str, failing: set[str]
) -> None:
    report = parity_with(_new(tmp_path, treat_as_new=True, parity=False), old, new)
    checks = statuses(report)
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.PASS
    assert {name for name in failing if checks[name] is Status.FAIL} == failing
    assert checks["text-only"] is Status.PASS  # no image: no DeepStack, every section alike


def test_mobius_own_qwen3_vl_is_reported_for_dropping_deepstack(tmp_path: Path) -> None:
    result = _new(tmp_path)
    report = result.parity
    assert result.proposal.already_supported is not None
    assert report is not None and not report.passed
    (bug,) = [b for b in report.bugs if b.id == "qwen3-vl Q1"]
    assert "Qwen3VL3ModelCausalLMModel" in bug.title
    assert "DeepStack checkpoint tensors fill no parameter" in bug.evidence


def _qwen3_vl_moe_config(root: Path) -> Path:
    """transformers' default qwen3_vl_moe config with the values Qwen3-VL-30B-A3B publishes where
    the default cannot run (the merger 3584 wide against a 2048 text; no M-RoPE sections). Its
    composite config unties the head while its text config ties it, as the defaults are."""
    from tests.published_vlms import published_vlm_dir

    return published_vlm_dir("qwen3_vl_moe", root)


TIE_BY_COMPOSITE = 'tie_word_embeddings=bool(getattr(top, "tie_word_embeddings", False))'


def test_qwen3_vl_moe_generates_with_the_composite_configs_tie(tmp_path: Path) -> None:
    """An MoE text backbone under the Qwen3-VL tower; HF ties the head by the composite config's
    flag (False here), not text_config's (True): read from the text config, the checkpoint's
    lm_head would fill nothing."""
    source = _qwen3_vl_moe_config(tmp_path / "hub")
    result = onboard_new(NewOptions(model=str(source), out=tmp_path / "out", treat_as_new=True))
    text = passed_module(result, CHECKS)
    assert TIE_BY_COMPOSITE in text
    assert DEEPSTACK_ADD in text
    by_text = "tie_word_embeddings=base.tie_word_embeddings"
    assert statuses(parity_with(result, TIE_BY_COMPOSITE, by_text))["weights"] is Status.FAIL
