"""Qwen2.5-VL generated into mobius' ``qwen-vl`` task from the published config (offline, the
config bundled in tests/fixtures/hub): mobius' own entry hidden by --treat-as-new.

Parity feeds flattened patches with ``image_grid_thw`` for three images of different grids in a
batch of three rows (one image, two images, text only) and the host's ``position_ids
[3, B, S]``; HF computes its own positions. A generated module whose M-RoPE sections are wrong,
whose window layers attend over the whole image, or whose merger activation is swapped fails it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.hub_cache import fixture_config
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import config_classes, parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
MODEL = "Qwen/Qwen2.5-VL-3B-Instruct"


def _new(tmp_path: Path, **options):
    options.setdefault("treat_as_new", True)
    return onboard_new(
        NewOptions(model=str(fixture_config(MODEL).parent), out=tmp_path / "out", **options)
    )


def test_qwen2_5_vl_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path)
    assert result.proposal.already_supported is None  # hidden by --treat-as-new
    text = passed_module(result, CHECKS)
    report = result.parity
    assert report.weights.unread == ()
    assert 'default_task = "qwen-vl"' in text
    assert 'mrope_section=list(top.text_config.rope_parameters["mrope_section"])' in text
    assert "fullatt_block_indexes=list(top.vision_config.fullatt_block_indexes)" in text
    assert "class Qwen25VLVisionTransformer(Qwen25VLVisionModel):" in text
    patch = (result.root / "onboard.patch").read_text()
    assert 'ModelRegistration(Qwen25VLMultiModalModel, task="qwen-vl")' in patch


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        (
            'mrope_section=list(top.text_config.rope_parameters["mrope_section"])',
            'mrope_section=list(reversed(top.text_config.rope_parameters["mrope_section"]))',
            {"prefill"},
        ),
        (
            'fullatt_block_indexes=_vision_field(config, "fullatt_block_indexes")',
            "fullatt_block_indexes=list(range(vision.num_hidden_layers))",
            {"image-features", "prefill"},
        ),
        (
            'MergerActivation("gelu")',
            'MergerActivation("silu")',
            {"image-features", "prefill"},
        ),
    ],
    ids=["mrope-sections-reversed", "window-attention-as-full", "merger-activation-silu"],
)
@pytest.mark.slow
def test_a_wrong_qwen_vl_side_fails_parity(
    tmp_path: Path, old: str, new: str, failing: set[str]
) -> None:
    report = parity_with(_new(tmp_path, parity=False), old, new)
    checks = statuses(report)
    assert checks["weights"] is Status.PASS
    assert {name for name in failing if checks[name] is Status.FAIL} == failing
    assert checks["text-only"] is Status.PASS  # text alone rotates every section alike


def _qwen2_vl_config(root: Path) -> Path:
    """transformers' default qwen2_vl config with the M-RoPE sections published Qwen2-VL
    checkpoints set (the default leaves them to the rotary module's fallback), and the merger's
    width made the text's, as in every published checkpoint (the default's 3584 against 8192
    could not run, and onboard refuses it as bad input)."""
    import json

    from tests.new_types import default_config_dir

    folder = default_config_dir("qwen2_vl", root)
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["rope_parameters"]["mrope_section"] = [16, 24, 24]
    config["vision_config"]["hidden_size"] = config["text_config"]["hidden_size"]
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_qwen2_vl_generates_through_mobius_tower_without_windows(tmp_path: Path) -> None:
    """Qwen2-VL: the same tower kind with LayerNorms, a plain fc1 / fc2 MLP and no windows,
    generated on mobius' Qwen2VLVisionModel."""
    source = _qwen2_vl_config(tmp_path / "hub")
    result = onboard_new(NewOptions(model=str(source), out=tmp_path / "out", treat_as_new=True))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert {c.name for c in report.checks} == CHECKS
    text = (result.root / result.plan.model_file).read_text() + config_classes(result)
    assert "class Qwen2VLVisionTransformer(Qwen2VLVisionModel):" in text
    assert "window_size" not in text
    assert 'name = name.replace(".mlp.fc1.", ".mlp.up_proj.")' in text
    sabotaged = parity_with(result, 'MergerActivation("gelu")', 'MergerActivation("quick_gelu")')
    checks = statuses(sabotaged)
    assert checks["image-features"] is Status.FAIL


def test_mobius_own_qwen2_5_vl_is_reported_for_its_per_row_feature_count(tmp_path: Path) -> None:
    """mobius' own Qwen25VLCausalLMModel: image features right, merged embeddings wrong where a
    second row has images (its embedding graph counts features row by row); the report names
    the defect, and text alone passes."""
    result = _new(tmp_path, treat_as_new=False)
    report = result.parity
    assert result.proposal.already_supported is not None
    assert report is not None and not report.passed
    checks = statuses(report)
    assert checks["image-features"] is Status.PASS
    assert checks["merged-embeddings"] is Status.FAIL
    assert checks["text-only"] is Status.PASS
    (bug,) = [b for b in report.bugs if b.id == "qwen-vl E1"]
    assert "Qwen25VLCausalLMModel" in bug.title
    assert "CumSum" in bug.evidence
