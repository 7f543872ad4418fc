"""Qwen-VL models (Qwen3-VL, Qwen2.5-VL) generated into AutoModel with zero hand edits.

The generated class subclasses HF's VLM (its tower, mergers and forward) and swaps in the
generated text model, which adds M-RoPE (interleaved sections for Qwen3-VL, chunks for
Qwen2.5-VL) and Qwen3-VL's DeepStack step. Parity feeds flattened patches with their grids and
host-computed ``position_ids [3, B, S]`` while HF computes its own; the generated tests run
beside it. A generated text model that leaves DeepStack out or turns the frequencies by the
wrong axes fails both.
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

QWEN3_VL = "Qwen/Qwen3-VL-2B-Instruct"
QWEN2_5_VL = "Qwen/Qwen2.5-VL-3B-Instruct"
SCENARIOS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
# The generated vision tests every Qwen-VL model gets, beside the text model's dense tests
VISION_TESTS = {
    "test_registry_resolves_to_generated_class",
    "test_adapter_refuses_a_tensor_of_no_part",
    "test_vision_tower_matches_hf",
    "test_mrope_table_matches_hf",
    "test_text_model_takes_every_position_shape",
    "test_merged_embeddings_match_hf",
    "test_logits_with_host_positions_match_hf",
    "test_text_only_logits_match_hf",
    "test_decode_steps_match_hf",
}
# model -> (package, class, checkpoint tensors of the tiny model, M-RoPE layout, DeepStack)
CASES = {
    QWEN3_VL: ("qwen3_vl", "Qwen3VLForConditionalGeneration", 99, "interleaved", True),
    QWEN2_5_VL: ("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", 80, "chunks", False),
}


def _new(out: Path, model: str | Path, **options):
    source = fixture_config(model).parent if isinstance(model, str) else model
    return onboard_new(
        NewOptions(model=str(source), out=out, target="automodel", treat_as_new=True, **options)
    )


@pytest.mark.parametrize("model", list(CASES), ids=["qwen3_vl", "qwen2_5_vl"])
def test_qwen_vl_generates_into_automodel_with_zero_edits(tmp_path: Path, model: str) -> None:
    package, model_class, tensors, layout, deepstack = CASES[model]
    result = _new(tmp_path / "out", model)
    report = result.parity
    failures = [(c.name, c.detail) for c in report.checks if c.status is not Status.PASS]
    assert report.passed and not failures, failures
    names = {c.name.split("(")[0] for c in report.checks}
    assert names >= SCENARIOS | VISION_TESTS
    assert ("test_deepstack_matches_hf" in names) is deepstack
    for check in report.checks:
        if check.metrics is not None:
            assert check.metrics.max_abs == 0.0, (check.name, check.metrics)
    proof = report.weights
    assert proof.ok and proof.checkpoint_tensors == proof.parameters == tensors
    assert result.plan.model_class == model_class
    for change in result.plan.changes:
        if change.path.endswith(".py"):
            text = (result.root / change.path).read_text()
            assert lint_python(text, filename=Path(change.path).name, style=STYLE) == ""
    root = result.root / f"nemo_automodel/components/models/{package}"
    model_py = (root / "model.py").read_text()
    assert f"class {model_class}(HFCheckpointingMixin, HF{model_class}):" in model_py
    assert "self.model.language_model = " in model_py
    assert "Only images were exercised" in model_py  # videos are not claimed
    assert f'LAYOUT = "{layout}"' in (root / "mrope.py").read_text()
    if model == QWEN2_5_VL:  # AutoModel's registry already maps Qwen3-VL to this module
        patch = (result.root / "onboard.patch").read_text()
        assert f'"{model_class}",' in patch


def _broken(tmp_path: Path, model: str, file: str, old: str, new: str):
    """Parity of the generated package with one line of ``file`` broken."""
    return statuses(parity_with(_new(tmp_path / "out", model, parity=False), file, old, new))


@pytest.mark.slow
def test_deepstack_left_out_fails_parity(tmp_path: Path) -> None:
    checks = _broken(
        tmp_path,
        QWEN3_VL,
        "model.py",
        "hidden_states = add_deepstack(hidden_states, visual_pos_masks, "
        "deepstack_visual_embeds[index])",
        "hidden_states = hidden_states",
    )
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.PASS  # the tower is HF's: only the text differs
    failing = {"prefill", "test_deepstack_matches_hf", "test_logits_with_host_positions_match_hf"}
    assert {name for name in failing if checks[name] is not Status.PASS} == failing
    assert checks["text-only"] is Status.PASS  # no images, no DeepStack


@pytest.mark.parametrize(
    ("model", "old", "new"),
    [
        (QWEN3_VL, 'LAYOUT = "interleaved"', 'LAYOUT = "chunks"'),
        (QWEN2_5_VL, 'LAYOUT = "chunks"', 'LAYOUT = "interleaved"'),
    ],
    ids=["qwen3_vl-interleaved-as-chunks", "qwen2_5_vl-chunks-as-interleaved"],
)
@pytest.mark.slow
def test_a_wrong_mrope_layout_fails_parity(tmp_path: Path, model: str, old: str, new: str) -> None:
    checks = _broken(tmp_path, model, "mrope.py", old, new)
    assert checks["weights"] is Status.PASS
    # image positions differ by axis, text positions do not
    failing = {"prefill", "decode", "test_mrope_table_matches_hf"}
    assert {name for name in failing if checks[name] is not Status.PASS} == failing
    assert checks["text-only"] is Status.PASS


def test_wrong_mrope_sections_fail_parity(tmp_path: Path) -> None:
    """Qwen2.5-VL's chunks cut at other places (the config's sections read backwards)."""
    checks = _broken(
        tmp_path,
        QWEN2_5_VL,
        "mrope.py",
        'sections = list(parameters.get("mrope_section", DEFAULT_SECTIONS))',
        'sections = list(parameters.get("mrope_section", DEFAULT_SECTIONS))[::-1]',
    )
    failing = {"prefill", "test_mrope_table_matches_hf"}
    assert {name for name in failing if checks[name] is not Status.PASS} == failing


def test_a_moe_text_backbone_stays_refused_by_name(tmp_path: Path) -> None:
    # the default tower's merger is sized for a wider text model than the default MoE text
    folder = default_config_dir(
        "qwen3_vl_moe", tmp_path / "models", vision_config={"out_hidden_size": 2048}
    )
    assert json.loads((folder / "config.json").read_text())["text_config"]["num_local_experts"] > 1
    with pytest.raises(UnsupportedFeatureError) as raised:
        _new(tmp_path / "out", folder, parity=False)
    assert any(
        "qwen3_vl_moe_text text backbone with experts" in item for item in raised.value.items
    )
    assert not (tmp_path / "out").exists()
