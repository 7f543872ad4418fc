"""LLaVA (CLIP tower, MLP projector, Llama text) generated into AutoModel as a VLM class.

HF's tower and projector are reused, the text model is the dense generator's; parity compares the
image features, the merged embeddings, a batch of two rows with their own images, three decode
steps and a text-only prompt, after proving every checkpoint tensor (the tower's included) is
placed once. A generated class that gives the second row the first row's image, reads the wrong
hidden state, marks the wrong placeholder, or an adapter that drops a tower tensor fails it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.errors import UnsupportedFeatureError
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.automodel.plan import STYLE
from tests.hub_cache import fixture_config
from tests.new_types import default_config_dir
from tests.targets.automodel.sabotage import parity_with, statuses

LLAVA = "llava-hf/llava-1.5-7b-hf"
PACKAGE = "nemo_automodel/components/models/llava"
SCENARIOS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
# The generated vision tests, beside the text model's dense tests.
VISION_TESTS = {
    "test_registry_resolves_to_generated_class",
    "test_adapter_refuses_a_tensor_of_no_part",
    "test_adapter_reads_published_names",
    "test_vision_tower_matches_hf",
    "test_image_features_match_hf",
    "test_merged_embeddings_match_hf",
    "test_text_only_logits_match_hf",
    "test_decode_steps_match_hf",
    "test_llava_vision.py::test_logits_match_hf",
    "test_llava_vision.py::test_loss_and_gradients_match_hf",
}


def _new(out: Path, model: Path | None = None, **options):
    source = model or fixture_config(LLAVA).parent
    return onboard_new(
        NewOptions(model=str(source), out=out, target="automodel", treat_as_new=True, **options)
    )


def test_llava_generates_into_automodel_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path / "out")
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
    assert not proof.unread  # the tower's unread last layer is still a parameter: loaded too
    assert result.plan.model_class == "LlavaForConditionalGeneration"
    for change in result.plan.changes:
        if change.path.endswith(".py"):
            text = (result.root / change.path).read_text()
            assert lint_python(text, filename=Path(change.path).name, style=STYLE) == ""
    model = (result.root / f"{PACKAGE}/model.py").read_text()
    assert "self.vision_tower = AutoModel.from_config(config.vision_config)" in model
    assert "HFLlavaMultiModalProjector(config)" in model
    assert "layers = self.config.vision_feature_layer" in model
    patch = (result.root / "onboard.patch").read_text()
    assert '"LlavaForConditionalGeneration",' in patch
    assert "nemo_automodel.components.models.llava.model" in patch


def _broken(tmp_path: Path, file: str, old: str, new: str):
    """Parity of the generated package with one line of ``file`` broken."""
    return statuses(parity_with(_new(tmp_path / "out", parity=False), file, old, new))


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        # every row merges the first row's image
        (
            "features = self.get_image_features(pixel_values)",
            "features = self.get_image_features(pixel_values[:1].expand_as(pixel_values))",
            {"merged-embeddings", "prefill", "test_merged_embeddings_match_hf"},
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
    ids=["row-zero-image-reused", "feature-layer", "image-token"],
)
def test_a_wrong_vision_side_fails_parity(tmp_path: Path, old: str, new: str, failing) -> None:
    checks = _broken(tmp_path, "model.py", old, new)
    assert checks["weights"] is Status.PASS
    assert {name for name in failing if checks[name] is not Status.PASS} == failing


@pytest.mark.slow
def test_an_adapter_that_drops_a_tower_tensor_fails_the_weight_proof(tmp_path: Path) -> None:
    old = "native = {_routed(_aliased(key), ROUTES): value for key, value in hf_state_dict.items()}"
    new = (
        "native = {_routed(_aliased(key), ROUTES): value for key, value in hf_state_dict.items() "
        "if 'post_layernorm' not in key}"
    )
    checks = _broken(tmp_path, "state_dict_adapter.py", old, new)
    assert checks["weights"] is Status.FAIL
    assert checks["test_llava_vision.py::test_adapter_round_trip_is_exact"] is Status.FAIL


def _refusal(tmp_path: Path, model_type: str, **tower) -> str:
    folder = default_config_dir(model_type, tmp_path / "models")
    config = json.loads((folder / "config.json").read_text())
    config["vision_config"].update(tower)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedFeatureError) as raised:
        _new(tmp_path / "out", model=folder, parity=False)
    return "\n".join(raised.value.items)


def test_gemma3_bidirectional_image_blocks_are_refused_by_name(tmp_path: Path) -> None:
    # Gemma 3's published tower (896 px in 14 px patches) pools to its 256 tokens per image
    found = _refusal(tmp_path, "gemma3", image_size=896, patch_size=14)
    assert "attend to each other both ways" in found
    assert "modeling_gemma3.py:" in found  # where HF builds the bidirectional image mask
    assert "scaled inside the embedding before the merge" in found
    assert not (tmp_path / "out").exists()
