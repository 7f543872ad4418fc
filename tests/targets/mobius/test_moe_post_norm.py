"""A.X-K1's norm of the MoE block's output (modeling_axk1.py AXK1MoE.post_mlp_layernorm: routed
plus shared experts, then the norm, before the residual add; dense layers have none). Its
checkpoints keep the norm on the layer (``post_mlp_layernorm``), which transformers moves into
the block on load. From the backlog: mobius 0.1.0 lacks axk1 (latent attention, DeepSeek-V3's
router); the spec check proves where the norm sits, the generated code passes parity with zero
edits, and a copy without the norm, or with it on the routed experts alone, fails. AutoModel
refuses it by name."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.targets.automodel.propose import blockers as automodel_blockers
from onboard.targets.mobius.plan import STYLE
from onboard.tiny_model import build_tiny_model, perturb
from tests.targets.mobius.checks import onboarded_from_backlog
from tests.targets.mobius.sabotage import parity_with

NORMED = "        return self.post_mlp_layernorm(op, op.Add(routed, shared))\n"


@pytest.fixture(scope="module")
def axk1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("axk1", tmp_path_factory.mktemp("hub"))


def test_spec_check_proves_the_moe_output_norm(axk1: Path) -> None:
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(axk1)))
    text = analysis.spec.text
    assert text.moe.post_norm == "post_mlp_layernorm"
    evidence = dict(analysis.spec.evidence)["text.moe.post_norm"]
    assert any(re.search(r"modeling_axk1\.py:\d+", e.where) for e in evidence), evidence
    # the saved layer-level name, renamed on load, and undone on a name renamed already
    assert analysis.spec.weights.renames[:2] == (
        ("post_mlp_layernorm", "mlp.post_mlp_layernorm"),
        ("mlp.mlp.post_mlp_layernorm", "mlp.post_mlp_layernorm"),
    )
    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    assert check_spec(text, model, config) == ()
    without = dataclasses.replace(text, moe=dataclasses.replace(text.moe, post_norm=None))
    deltas = check_spec(without, model, config)
    assert any("computes something" in d.what for d in deltas), deltas
    # AutoModel's MoE has no such norm: refused by name, with the HF line
    wanted = "a norm of the MoE block's output (post_mlp_layernorm) (modeling_axk1.py:"
    assert any(wanted in b for b in automodel_blockers(analysis.spec)), wanted


@pytest.mark.slow
def test_moe_output_norm_generates_into_mobius_and_fails_without(axk1: Path, tmp_path: Path):
    result = onboarded_from_backlog(axk1, tmp_path / "out")
    report = result.parity
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    text = (result.root / result.plan.model_file).read_text()
    assert lint_python(text, filename="axk1.py", style=STYLE) == ""
    # the norm left out: its tensors fill nothing
    left_out = parity_with(result, NORMED, "        return op.Add(routed, shared)\n")
    assert not left_out.passed
    problems = left_out.weights.problems
    assert any("post_mlp_layernorm" in p for p in problems), problems
    # the norm on the routed experts alone: every weight placed, the logits wrong
    result.root.joinpath(result.plan.model_file).write_text(text)
    routed_only = "        return op.Add(self.post_mlp_layernorm(op, routed), shared)\n"
    misplaced = parity_with(result, NORMED, routed_only)
    checks = {c.name: c.status for c in misplaced.checks if c.provider == "default"}
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is Status.FAIL, checks
