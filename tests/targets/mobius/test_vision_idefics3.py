"""Idefics 3 (a SigLIP-like tower read after its post norm, a pixel shuffle and one linear,
Llama text) generated into mobius' vision-language task from transformers' default config.

HF takes ``pixel_values [rows, images per row, ...]`` padded with all-zero images; the host feeds
the generated encoder the real images. Parity runs rows of two, one and no image; a pixel shuffle
in the wrong order, a wrong scale factor or a skipped post norm fails it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius.plan import STYLE
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import config_classes, parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
# Idefics3-8B-Llama3's tower: 364-pixel tiles of 14-pixel patches (26 a side, which the scale
# factor 2 divides; the default config's 224 / 32 = 7 does not)
IDEFICS3_TOWER = {"image_size": 364, "patch_size": 14}


def _idefics3(root: Path, model_type: str = "idefics3", **tower) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir(model_type, root, vision_config=tower or IDEFICS3_TOWER)


def _new(tmp_path: Path, **options):
    model = _idefics3(tmp_path)
    return onboard_new(
        NewOptions(model=str(model), out=tmp_path / "out", treat_as_new=True, **options)
    )


def test_idefics3_is_generated_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path)
    text = passed_module(result, CHECKS)
    report = result.parity
    prefill = {c.provider: c.detail for c in report.checks if c.name == "prefill"}
    assert prefill == dict.fromkeys(("default", "cpu"), "rows of 2, 1, 0 images")
    assert report.weights.unread == ()  # the post norm is read, every layer too
    assert "pixel_shuffle_factor=top.scale_factor," in text
    assert "features = self._pixel_shuffle(op, features)" in text
    assert "self.modality_projection = Idefics3ModalityProjection(" in text
    assert "hidden_states = self.post_layernorm(op, hidden_states)" in text
    assert "the host feeds this encoder the real images" in text
    patch = (result.root / "onboard.patch").read_text()
    assert "Idefics3MultiModalModel" in patch


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        (  # blocks taken column-major and each block's patches transposed
            "perm=[0, 1, 3, 2, 4, 5]",
            "perm=[0, 3, 1, 4, 2, 5]",
            "image-features",
        ),
        (  # the blocks' patches side by side column-major
            "perm=[0, 1, 3, 2, 4, 5]",
            "perm=[0, 1, 3, 4, 2, 5]",
            "image-features",
        ),
        (  # the post norm skipped: its weights still held, its output unused
            "hidden_states = self.post_layernorm(op, hidden_states)",
            "hidden_states = op.Add(hidden_states, op.Mul(self.post_layernorm(op, "
            "hidden_states), op.Constant(value_float=0.0)))",
            "image-features",
        ),
        (  # mobius' own LLaVA embedding: every image token takes a feature row, so a decode
            # step that generates the image token (row 1's third step here) embeds zeros
            "op.Where(op.Unsqueeze(filled, [-1]), rows, embeddings)",
            "op.Where(op.Unsqueeze(is_image, [-1]), rows, embeddings)",
            "decode",
        ),
    ],
    ids=["shuffle-transposed", "shuffle-block-order", "post-norm-skipped", "image-token-zeroed"],
)
@pytest.mark.slow
def test_a_wrong_shuffle_or_norm_fails_parity(
    tmp_path: Path, old: str, new: str, failing: str
) -> None:
    report = parity_with(_new(tmp_path, parity=False), old, new)
    checks = statuses(report)
    assert checks["weights"] is Status.PASS
    assert checks[failing] is Status.FAIL
    if failing != "decode":
        assert checks["prefill"] is Status.FAIL


@pytest.mark.slow
def test_a_scale_factor_off_fails_parity(tmp_path: Path) -> None:
    """Blocks of 1 x 1 patches: the projector is built for the wrong width, so the checkpoint's
    linear does not fit it (HF's scale factor is 2)."""
    report = parity_with(
        _new(tmp_path, parity=False),
        "pixel_shuffle_factor=top.scale_factor,",
        "pixel_shuffle_factor=top.scale_factor - 1,",
    )
    assert not report.passed
    checks = statuses(report)
    assert checks["weights"] is Status.FAIL


def _aya(tmp_path: Path, **options):
    from tests.new_types import default_config_dir

    # Aya Vision 8B's tower: 364-pixel tiles of 14-pixel patches
    model = default_config_dir("aya_vision", tmp_path, vision_config=IDEFICS3_TOWER)
    return onboard_new(
        NewOptions(model=str(model), out=tmp_path / "out", treat_as_new=True, **options)
    )


def test_aya_vision_is_generated_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    """A pixel shuffle, a LayerNorm and a SwiGLU between two linears, over Cohere 2 text; the
    cpu EP's failures are mobius' T8 on the Cohere 2 decoder, confirmed by its counterfactual."""
    result = _aya(tmp_path)
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = statuses(report)
    assert default == dict.fromkeys(CHECKS, Status.PASS)
    cpu = {c.name: c for c in report.checks if c.provider == "cpu"}
    assert cpu["image-features"].status is Status.PASS
    assert {c.bug for c in cpu.values() if c.status is Status.XFAIL} == {"T8"}
    text = (result.root / result.plan.model_file).read_text() + config_classes(result)
    module = (result.root / result.plan.model_file).read_text()
    assert lint_python(module, filename="aya_vision.py", style=STYLE) == ""
    assert "pixel_shuffle_factor=top.downsample_factor," in text
    assert "value, gate = op.Split(features, axis=-1, num_outputs=2, _outputs=2)" in text
    # HF reads getattr(config, "alignment_intermediate_size", text hidden size)
    assert 'top, "alignment_intermediate_size", top.text_config.hidden_size' in text
    assert '_vision_field(config, "alignment_intermediate_size") // 2,' in text
    decoder = text.split("Decoder(")[1]
    assert "logit_scale" not in decoder.split("class ")[0]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # value and gate swapped
            "features = op.Mul(self._act(op, gate), value)",
            "features = op.Mul(self._act(op, value), gate)",
        ),
        (  # the text causal LM's logit scale, which Aya Vision's head does not apply
            "return self.lm_head(op, hidden_states), present_key_values",
            "return op.Mul(self.lm_head(op, hidden_states), self.config.logit_scale), "
            "present_key_values",
        ),
    ],
    ids=["swiglu-halves-swapped", "logit-scale-applied"],
)
@pytest.mark.slow
def test_a_wrong_aya_projector_or_head_fails_parity(tmp_path: Path, old: str, new: str) -> None:
    report = parity_with(_aya(tmp_path, parity=False), old, new)
    checks = statuses(report)
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is Status.FAIL


# HF's getattr(config, "alignment_intermediate_size", config.text_config.hidden_size), formatted
_GETATTR_OR_TEXT = (
    "getattr(\n"
    '                top, "alignment_intermediate_size", top.text_config.hidden_size\n'
    "            )"
)


@pytest.mark.parametrize(
    ("model_type", "overrides", "read"),
    [
        (
            "aya_vision",
            {"alignment_intermediate_size": 28672, "vision_config": IDEFICS3_TOWER},
            _GETATTR_OR_TEXT,
        ),
        ("cohere2_vision", {}, "top.alignment_intermediate_size"),
    ],
    ids=["aya-vision-with-the-key", "cohere2-vision"],
)
@pytest.mark.slow
def test_a_projector_width_of_its_own_follows_its_config_key(
    tmp_path: Path, model_type: str, overrides: dict, read: str
) -> None:
    """alignment_intermediate_size: the width between the projector's linears, neither the
    tower's nor the text's; read from the text's hidden size, no checkpoint tensor fits."""
    from tests.new_types import default_config_dir

    model = default_config_dir(model_type, tmp_path / "hub", **overrides)
    options = NewOptions(model=str(model), out=tmp_path / "out", treat_as_new=True)
    result = onboard_new(options)
    assert result.parity is not None and result.parity.passed
    assert statuses(result.parity) == dict.fromkeys(CHECKS, Status.PASS)
    text = (result.root / result.plan.model_file).read_text() + config_classes(result)
    assert f"alignment_intermediate_size={read}," in text
    report = parity_with(
        result,
        f"alignment_intermediate_size={read},",
        "alignment_intermediate_size=top.text_config.hidden_size,",
    )
    assert statuses(report)["weights"] is Status.FAIL
