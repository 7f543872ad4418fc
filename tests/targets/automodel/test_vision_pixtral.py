"""Mistral 3 (Pixtral tower, patch-merging projector, Mistral text) generated into AutoModel as a
VLM class, as AutoModel's own ``Mistral3ForConditionalGeneration`` is built: HF's tower and
projector, ``pixel_values`` and ``image_sizes`` keyword-only, the dense generator's text model.

Parity feeds two images of different sizes (a wide and a square one, padded into one pixel
tensor with ``image_sizes``) in a batch of two rows, and so do the generated tests. A generated
class that crops every image to a square, reads the wrong hidden state or marks the wrong
placeholder fails both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.automodel.plan import STYLE
from tests.new_types import default_config_dir
from tests.targets.automodel.sabotage import parity_with, statuses

SCENARIOS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
VISION_TESTS = {
    "test_vision_tower_matches_hf",
    "test_image_features_match_hf",
    "test_merged_embeddings_match_hf",
    "test_text_only_logits_match_hf",
    "test_decode_steps_match_hf",
    "test_mistral3_vision.py::test_logits_match_hf",
    "test_mistral3_vision.py::test_loss_and_gradients_match_hf",
}


def _new(tmp_path: Path, **options):
    source = default_config_dir("mistral3", tmp_path / "hub")
    options = {"target": "automodel", "treat_as_new": True, **options}
    return onboard_new(NewOptions(model=str(source), out=tmp_path / "out", **options))


@pytest.mark.slow
def test_mistral3_generates_into_automodel_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path)
    report = result.parity
    failures = [(c.name, c.detail) for c in report.checks if c.status is not Status.PASS]
    assert report.passed and not failures, failures
    names = {c.name.split("(")[0] for c in report.checks}
    assert names >= SCENARIOS | VISION_TESTS
    for check in report.checks:
        if check.metrics is not None:
            assert check.metrics.max_abs <= 1e-6, (check.name, check.metrics)
    proof = report.weights
    assert proof.ok and proof.checkpoint_tensors == proof.parameters
    assert not proof.unread
    assert result.plan.model_class == "Mistral3ForConditionalGeneration"
    for change in result.plan.changes:
        if change.path.endswith(".py"):
            text = (result.root / change.path).read_text()
            assert lint_python(text, filename=Path(change.path).name, style=STYLE) == ""
    package = (result.root / result.plan.model_file).parent
    model = (package / "model.py").read_text()
    assert "self.vision_tower = AutoModel.from_config(config.vision_config)" in model
    assert "apply_pixtral_forward_backport(self.vision_tower)" in model
    assert "HFMistral3MultiModalProjector(config)" in model
    assert "layers = self.config.vision_feature_layer" in model
    assert "*,\n        pixel_values:" in model  # keyword-only, as AutoModel's own Mistral 3
    assert "image_sizes=image_sizes" in model
    assert "state[:, 1:]" not in model  # a Pixtral tower has no class token
    # the tiny head is tied (the composite config's flag): an untied one's checkpoint name is
    # still routed, from transformers' conversion mapping
    adapter = (package / "state_dict_adapter.py").read_text()
    assert '("language_model.lm_head.", "lm_head.")' in adapter
    tests = next(c for c in result.plan.changes if c.path.endswith("test_mistral3_vision.py"))
    assert "IMAGE_SIZES = [[56, 84], [56, 56]]" in tests.content


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        # every image cropped to a square of its shorter side: image_sizes not honoured
        (
            "        outputs = self.vision_tower(pixel_values, image_sizes=image_sizes,",
            "        image_sizes = image_sizes.amin(dim=-1, keepdim=True).expand_as(image_sizes)\n"
            "        outputs = self.vision_tower(pixel_values, image_sizes=image_sizes,",
            {"prefill", "test_image_features_match_hf", "test_merged_embeddings_match_hf"},
        ),
        pytest.param(
            "layers = self.config.vision_feature_layer\n",
            "layers = self.config.vision_feature_layer - 1\n",
            {"image-features", "prefill", "test_image_features_match_hf"},
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "placeholders = input_ids == self.config.image_token_id",
            "placeholders = input_ids == self.config.image_token_id - 1",
            {"prefill", "test_merged_embeddings_match_hf"},
            marks=pytest.mark.slow,
        ),
    ],
    ids=["image-sizes-square-crop", "feature-layer", "image-token"],
)
def test_a_wrong_mistral3_vision_side_fails_parity(
    tmp_path: Path, old: str, new: str, failing: set[str]
) -> None:
    checks = statuses(parity_with(_new(tmp_path, parity=False), "model.py", old, new))
    assert checks["weights"] is Status.PASS
    assert {name for name in failing if checks[name] is not Status.PASS} == failing
