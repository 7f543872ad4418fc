"""VipLLaVA (CLIP tower read at several layers, concatenated; a LayerNorm-first projector)
generated into mobius and AutoModel from transformers' default config with ``--treat-as-new``.

HF reads ``hidden_states[l]`` for each of ``vision_feature_layers`` (-2, -5, -8, -11, 6), drops
the class token and concatenates them along the width. A generated model that reads one layer of
the list one state later fails parity in both targets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir
from tests.targets.automodel import sabotage as automodel_sabotage
from tests.targets.mobius import sabotage as mobius_sabotage

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}


def _new(tmp_path: Path, target: str, **options):
    source = default_config_dir("vipllava", tmp_path / "hub")
    options = {"target": target, "treat_as_new": True, **options}
    return onboard_new(NewOptions(model=str(source), out=tmp_path / "out", **options))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["mobius", "automodel"])
def test_vipllava_generates_with_zero_edits(tmp_path: Path, target: str) -> None:
    result = _new(tmp_path, target)
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert {c.name for c in report.checks} >= CHECKS
    for check in report.checks:
        if check.metrics is not None:
            assert check.metrics.max_abs <= 1e-5, (check.name, check.metrics)
    # mobius leaves out only what HF never reads: the last layer and the post norm
    assert report.weights.ok


# One layer of the list read one hidden state later (6 -> 7), in each target's generated code
SWAPPED = {
    "mobius": (
        "vision_feature_layers=tuple(top.vision_feature_layers),",
        "vision_feature_layers=(*top.vision_feature_layers[:-1], "
        "top.vision_feature_layers[-1] + 1),",
    ),
    "automodel": (
        "layers = self.config.vision_feature_layers\n",
        "layers = [*self.config.vision_feature_layers[:-1], "
        "self.config.vision_feature_layers[-1] + 1]\n",
    ),
}


@pytest.mark.parametrize("target", ["mobius", pytest.param("automodel", marks=pytest.mark.slow)])
def test_one_feature_layer_swapped_fails_parity(tmp_path: Path, target: str) -> None:
    result = _new(tmp_path, target, parity=False)
    old, new = SWAPPED[target]
    if target == "mobius":
        report = mobius_sabotage.parity_with(result, old, new)
    else:
        report = automodel_sabotage.parity_with(result, "model.py", old, new)
    checks = {c.name: c.status for c in report.checks if c.provider in ("default", "cpu")}
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.FAIL
    assert checks["prefill"] is Status.FAIL
