"""An attention output gate with a projection of its own (AFMoE: the heads' output x
sigmoid(gate_proj(x)) before o_proj), from the backlog: AFMoE, which mobius 0.1.0 lacks,
generated into mobius from transformers' default config with zero edits (its router passes the
block's expert_bias as the choice bias, and starts from zero weights, which the router probe
moves). The spec check proves the gate; generated code without it fails parity; AutoModel
refuses it by name."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius.plan import STYLE
from onboard.tiny_model import build_tiny_model, perturb
from tests.targets.automodel.kept import automodel_view
from tests.targets.mobius.checks import assert_default_checks_pass, onboarded_from_backlog
from tests.targets.mobius.sabotage import parity_with

GATED = "        attn_output = op.Mul(attn_output, gate)\n"


@pytest.fixture(scope="module")
def afmoe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("afmoe", tmp_path_factory.mktemp("hub"))


def test_spec_check_proves_the_gate_and_the_router(afmoe: Path) -> None:
    """Without the gate in the spec the interpreter names AFMoE's attention; the router read
    is sigmoid scores whose choice the block's expert_bias shifts."""
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(afmoe)))
    assert analysis.spec.unresolved == ()
    text = analysis.spec.text
    assert text.attention.output_gate_proj == "gate_proj"
    evidence = dict(analysis.spec.evidence)["text.attention.output_gate_proj"]
    assert any(re.search(r"modeling_afmoe\.py:\d+", e.where) for e in evidence), evidence
    router = text.moe.router
    assert (router.scoring, router.correction_bias) == ("sigmoid", True)
    assert text.moe.correction_names == ("mlp.expert_bias",)
    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    assert check_spec(text, model, config) == ()
    attention = dataclasses.replace(text.attention, output_gate_proj=None)
    deltas = check_spec(dataclasses.replace(text, attention=attention), model, config)
    assert any("AfmoeAttention computes something" in d.what for d in deltas), deltas


@pytest.mark.slow
def test_output_gate_projection_generates_into_mobius_with_zero_edits(
    afmoe: Path, tmp_path: Path
) -> None:
    result = onboarded_from_backlog(afmoe, tmp_path / "out")
    report = result.parity
    assert_default_checks_pass(report)
    text = (result.root / result.plan.model_file).read_text()
    assert lint_python(text, filename="afmoe.py", style=STYLE) == ""
    # the gate left out: its projection fills nothing
    left_out = parity_with(result, GATED, "")
    assert not left_out.passed
    assert any("gate_proj" in p for p in left_out.weights.problems), left_out.weights.problems
    # the gate kept but without its sigmoid: every weight placed, the logits wrong
    result.root.joinpath(result.plan.model_file).write_text(text)
    unsquashed = parity_with(
        result,
        "gate = op.Sigmoid(self.gate_proj(op, hidden_states))",
        "gate = self.gate_proj(op, hidden_states)",
    )
    checks = {c.name: c.status for c in unsquashed.checks if c.provider == "default"}
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is Status.FAIL


def test_automodel_keeps_hf_attention_for_the_gate_projection_and_refuses_the_experts(
    afmoe: Path, tmp_path: Path
) -> None:
    _, kept = automodel_view(afmoe)
    assert any("gate_proj" in item and "modeling_afmoe.py:" in item for item in kept), kept
    options = NewOptions(model=str(afmoe), out=tmp_path / "out", target="automodel")
    with pytest.raises(UnsupportedFeatureError) as raised:
        onboard_new(options)
    items = raised.value.items
    assert any("expert_bias" in item and "modeling_afmoe.py:" in item for item in items), items
    assert not (tmp_path / "out").exists()
