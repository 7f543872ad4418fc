"""Fuyu generated into mobius from transformers' default config, mobius' own entry hidden by
--treat-as-new.

Fuyu has no tower: the vision encoder is HF's patch linear alone over ``image_patches
[patches, P * P * C]`` as the processor makes them (channel-last), through a task of the
module's own; the embedding fills the placeholders over the whole batch and the text model
(Persimmon) runs on embeddings. Parity feeds two images of different patch grids, flattened by
HF's image processor, into two rows whose placeholders the processor's newline tokens cut.
mobius' own registration (LLaVAModel) does not build from Fuyu's config (fuyu F1).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius.plan import STYLE
from tests.targets.mobius.checks import statuses
from tests.targets.mobius.sabotage import config_classes, parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
PATCH_LINEAR = "self.vision_embed_tokens = Linear(width, config.hidden_size, bias=True)"
ENCODE = "return self.vision_embed_tokens(op, image_patches)"
# The encoder reading each patch channel-first (3 x 30 x 30) and reordering it to the
# channel-last order its weights take: what an encoder written for channel-first patches does
CHANNEL_FIRST = (
    "patches = op.Reshape(image_patches, op.Constant(value_ints=[-1, 3, 30, 30]))\n"
    "        patches = op.Transpose(patches, perm=[0, 2, 3, 1])\n"
    "        patches = op.Reshape(patches, op.Constant(value_ints=[-1, 2700]))\n"
    "        return self.vision_embed_tokens(op, patches)"
)


@cache
def _source() -> str:
    import tempfile

    from tests.published_vlms import published_vlm_dir

    return str(published_vlm_dir("fuyu", Path(tempfile.mkdtemp(prefix="fuyu-hub-"))))


def _new(tmp_path: Path, **options):
    return onboard_new(NewOptions(model=_source(), out=tmp_path / "out", **options))


def test_fuyu_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path, treat_as_new=True)
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert statuses(report) == dict.fromkeys(CHECKS, Status.PASS)
    # the cpu EP's GroupQueryAttention rejects Persimmon's partial RoPE (M3, its counterfactual
    # confirmed), as for the text model alone
    (cpu,) = [c for c in report.checks if c.provider == "cpu"]
    assert (cpu.name, cpu.status, cpu.bug) == ("build", Status.XFAIL, "M3")
    weights = report.weights
    assert weights.ok and weights.unread == ()
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    text += config_classes(result)
    assert "class FuyuVisionEncoder(nn.Module):" in text and PATCH_LINEAR in text
    assert '"image_patches", dtype=config.dtype, shape=[ir.SymbolicDim("patches"), width]' in text
    assert "patch_size=top.patch_size," in text and "num_channels=top.num_channels," in text
    assert "(channel-last: value (row * patch_size + column) * channels + channel)" in text
    assert "CLIPVisionModel" not in text and "MultiModalProjector" not in text
    patch = (result.root / "onboard.patch").read_text()
    assert '+    "fuyu": ModelRegistration(FuyuMultiModalModel),' in patch


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        # the checkpoint's bias then fills no parameter: the weight proof fails
        (PATCH_LINEAR, PATCH_LINEAR.replace("bias=True", "bias=False"), "weights"),
        (ENCODE, CHANNEL_FIRST, "image-features"),
    ],
    ids=["bias-dropped", "patches-read-channel-first"],
)
@pytest.mark.slow
def test_a_wrong_fuyu_encoder_fails_parity(
    tmp_path: Path, old: str, new: str, failing: str
) -> None:
    report = parity_with(_new(tmp_path, treat_as_new=True, parity=False), old, new)
    checks = statuses(report)
    assert checks[failing] is Status.FAIL
    if failing == "image-features":
        assert checks["weights"] is Status.PASS
        assert checks["merged-embeddings"] is Status.FAIL
        assert checks["text-only"] is Status.PASS  # no image: the encoder is not run


def test_mobius_own_fuyu_is_reported_for_its_llava_registration(tmp_path: Path) -> None:
    result = _new(tmp_path)
    report = result.parity
    assert result.proposal.already_supported is not None
    assert report is not None and not report.passed
    assert {c.name for c in report.checks} == {"build"}
    (bug,) = [b for b in report.bugs if b.id == "fuyu F1"]
    assert "registers fuyu to LLaVAModel with the vision-language task" in bug.title
    assert "mobius/_registry.py:568 'fuyu'" in bug.evidence
