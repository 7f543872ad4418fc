"""Aria's experts (modeling_aria.py AriaExperts, ``is_transposed=True``): each expert held
(in, out), the layout grouped GEMMs read, in memory ``experts.gate_up_proj [E, H, 2I]`` and
``experts.down_proj [E, I, H]``, saved as ``experts.fc1.weight`` / ``experts.fc2.weight``. The
MoE reader finds the saved tensors by value; from the backlog (mobius 0.1.0 lacks aria_text) it
generates with zero edits, and a copy that splits them as (out, in) fails parity."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from tests.new_types import default_config_dir
from tests.targets.mobius.checks import onboarded_from_backlog
from tests.targets.mobius.sabotage import parity_with

SPLIT = "gate, up = weights.T.chunk(2, dim=0)"


@pytest.fixture(scope="module")
def aria_text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return default_config_dir("aria_text", tmp_path_factory.mktemp("hub"))


def test_transposed_experts_are_found_saved_fused(aria_text: Path) -> None:
    from onboard.analysis import analyse
    from onboard.source import load_source

    spec = analyse(load_source(str(aria_text))).spec
    assert spec.unresolved == ()
    moe = spec.text.moe
    assert moe.fused_transposed
    assert moe.fused_on_disk == (
        ("gate_up", "mlp.experts.fc1.weight"),
        ("down", "mlp.experts.fc2.weight"),
    )
    evidence = dict(spec.evidence)["text.moe.experts"]
    assert any("each expert (in, out)" in e.detail for e in evidence), evidence


@pytest.mark.slow
def test_transposed_experts_generate_and_fail_split_untransposed(
    aria_text: Path, tmp_path: Path
) -> None:
    result = onboarded_from_backlog(aria_text, tmp_path / "out")
    report = result.parity
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    # split as if each expert were (out, in): no weight lands where it should
    untransposed = parity_with(result, SPLIT, "gate, up = weights.chunk(2, dim=0)")
    assert not untransposed.passed
    failed = {c.name for c in untransposed.failures}
    assert failed & {"weights", "build", "prefill"}, failed
