"""HY-V3's router (modeling_hy_v3.py HYV3TopKRouter): sigmoid scores, the choice shifted by the
MoE block's ``e_score_correction_bias``, the unbiased weights renormalised and scaled by
``config.router_scaling_factor`` (not DeepSeek's ``routed_scaling_factor``). Its checkpoints keep
the router, the bias and the shared expert under other names (``mlp.router.gate``,
``mlp.expert_bias``, ``mlp.shared_mlp``), which transformers renames on load. From the backlog:
mobius 0.1.0 lacks hy_v3; it generates from transformers' default config with zero edits, and a
copy that drops the scale or the bias' rename fails parity."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from tests.new_types import default_config_dir
from tests.targets.mobius.checks import onboarded_from_backlog
from tests.targets.mobius.sabotage import parity_with

SCALE = "            routed_scaling_factor=config.router_scaling_factor,\n"
BIAS_RENAME = '                ("mlp.expert_bias", "mlp.e_score_correction_bias"),\n'


@pytest.fixture(scope="module")
def hy_v3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return default_config_dir("hy_v3", tmp_path_factory.mktemp("hub"))


def test_hy_v3_router_reads_its_scale_key_and_saved_names(hy_v3: Path) -> None:
    from onboard.analysis import analyse
    from onboard.source import load_source

    spec = analyse(load_source(str(hy_v3))).spec
    assert spec.unresolved == ()
    router = spec.text.moe.router
    assert (router.scoring, router.correction_bias, router.renormalize) == ("sigmoid", True, True)
    assert router.scale_key == "router_scaling_factor"
    # transformers' renames on load lead the generated ones
    assert spec.weights.renames[:3] == (
        ("mlp.router.gate.weight", "mlp.gate.weight"),
        ("mlp.expert_bias", "mlp.e_score_correction_bias"),
        ("mlp.shared_mlp.", "mlp.shared_experts."),
    )


@pytest.mark.slow
def test_hy_v3_router_generates_and_fails_without_its_scale(hy_v3: Path, tmp_path: Path) -> None:
    result = onboarded_from_backlog(hy_v3, tmp_path / "out")
    report = result.parity
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    text = (result.root / result.plan.model_file).read_text()
    # the scale left out: mobius' config keeps its default of 1, every weight placed
    unscaled = parity_with(result, SCALE, "")
    checks = {c.name: c.status for c in unscaled.checks if c.provider == "default"}
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is Status.FAIL, checks
    # the choice bias' rename left out: the saved expert_bias fills nothing
    result.root.joinpath(result.plan.model_file).write_text(text)
    unrenamed = parity_with(result, BIAS_RENAME, "")
    assert not unrenamed.passed
    assert any("expert_bias" in p for p in unrenamed.weights.problems), unrenamed.weights.problems
