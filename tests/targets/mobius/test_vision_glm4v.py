"""GLM-4V generated into mobius from transformers' default config with GLM-4.1V-9B-Thinking's
published RoPE (tests/published_vlms.py), mobius' own entry hidden by --treat-as-new.

mobius has no GLM-4V tower, so the whole tower is generated: the patch norm, learned positions
resampled bicubically through ONNX GridSample, RMS pre-norm layers on mobius' packed attention,
the end norm, the downsample convolution and the gated merger. Parity feeds three rows (one
image, two images, text only) with the host's ``position_ids [3, B, S]``; each tower part left
out or computed otherwise fails it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
POSITIONS = "x = op.Add(x, self.embeddings(op, rows, columns, heights, widths))"
CUBIC = 'mode="cubic", align_corners=0, padding_mode="border"'
DOWNSAMPLE = "self.downsample(op, blocks), op.Constant(value_ints=[-1, self._out_hidden_size])"
# the block's mean, three times over: the downsample's shape without its convolution
AVERAGED = (
    "op.Tile(op.ReduceMean(blocks, op.Constant(value_ints=[2, 3])), op.Constant(value_ints=[1, 3, "
    "1, 1])), op.Constant(value_ints=[-1, self._out_hidden_size])"
)
BLOCK_ORDER = "perm=[0, 3, 1, 2],"
MERGER_GELU = 'self._act1 = Glm4vMergerActivation("gelu")'


@cache
def _source() -> str:
    import tempfile

    from tests.published_vlms import published_vlm_dir

    return str(published_vlm_dir("glm4v", Path(tempfile.mkdtemp(prefix="glm4v-hub-"))))


def _new(tmp_path: Path, **options):
    return onboard_new(NewOptions(model=_source(), out=tmp_path / "out", **options))


def test_glm4v_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path, treat_as_new=True)
    text = passed_module(result, CHECKS)
    assert result.parity.weights.unread == ()
    assert "class Glm4vVisionTransformer(nn.Module):" in text
    assert POSITIONS in text and CUBIC in text and DOWNSAMPLE in text and MERGER_GELU in text
    assert "vision_norm_eps=top.vision_config.rms_norm_eps" in text
    assert 'mrope_section=list(top.text_config.rope_parameters["mrope_section"])' in text
    patch = (result.root / "onboard.patch").read_text()
    assert '+    "glm4v": ModelRegistration(Glm4vMultiModalModel' in patch


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        # the table then fills no parameter: the weight proof fails before the features
        pytest.param(
            POSITIONS, "x = x", "weights", id="positions-not-added", marks=pytest.mark.slow
        ),
        pytest.param(
            CUBIC, CUBIC.replace("cubic", "linear"), "image-features", id="positions-bilinear"
        ),
        # the convolution skipped (each block's mean in its place): its weights fill nothing
        pytest.param(
            DOWNSAMPLE, AVERAGED, "weights", id="downsample-skipped", marks=pytest.mark.slow
        ),
        # each block's patches read column-major: the convolution sees the block transposed
        pytest.param(
            BLOCK_ORDER,
            BLOCK_ORDER.replace("[0, 3, 1, 2]", "[0, 3, 2, 1]"),
            "image-features",
            id="downsample-block-transposed",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            MERGER_GELU,
            MERGER_GELU.replace("gelu", "silu"),
            "image-features",
            id="merger-silu",
            marks=pytest.mark.slow,
        ),
        # the M-RoPE angles on halves of the turned channels, not on adjacent pairs
        pytest.param(
            "rope_interleave=True", "rope_interleave=False", "prefill", id="mrope-on-halves"
        ),
    ],
)
@pytest.mark.slow
def test_a_wrong_glm4v_tower_fails_parity(tmp_path: Path, old: str, new: str, failing: str) -> None:
    report = parity_with(_new(tmp_path, treat_as_new=True, parity=False), old, new)
    checks = statuses(report)
    assert checks[failing] is Status.FAIL
    if failing == "image-features":
        assert checks["weights"] is Status.PASS
        assert checks["text-only"] is Status.PASS  # no image: the tower is not run


def test_mobius_own_glm4v_is_reported_for_its_square_image_registration(tmp_path: Path) -> None:
    result = _new(tmp_path)
    report = result.parity
    assert result.proposal.already_supported is not None
    assert report is not None and not report.passed
    (bug,) = [b for b in report.bugs if b.id == "glm4v G1"]
    assert "registers glm4v to LLaVAModel with the vision-language task" in bug.title
    assert "mobius/_registry.py:573 'glm4v'" in bug.evidence


def test_glm4v_moe_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    """GLM-4.5V's MoE text model (GLM-4.5V's 128-wide heads, half of each turned) under the
    same tower."""
    import tempfile

    from tests.published_vlms import published_vlm_dir

    source = published_vlm_dir("glm4v_moe", Path(tempfile.mkdtemp(prefix="glm4v-moe-hub-")))
    result = onboard_new(NewOptions(model=str(source), out=tmp_path / "out", treat_as_new=True))
    text = passed_module(result, CHECKS)
    assert result.parity.weights.unread == ()
    assert "class Glm4vMoEVisionTransformer(nn.Module):" in text
