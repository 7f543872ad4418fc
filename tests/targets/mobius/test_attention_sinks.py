"""Attention sinks (a learned logit per head, one more softmax column that reads no value),
from the backlog: Granite SWA and its MoE sibling, which mobius 0.1.0 lacks, generated into
mobius from transformers' default configs with zero edits. A generated attention that leaves
the sink out fails parity; AutoModel keeps HF's attention whole for it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius.plan import STYLE
from tests.targets.automodel.kept import automodel_view
from tests.targets.mobius.sabotage import parity_with

SOFTMAX_WITH_SINK = (
    "probs = op.Softmax(op.Concat(scores, sink, axis=-1), axis=-1)\n"
    "        probs = op.Slice(probs, [0], [-1], [3])"
)

SINK = "op.Reshape(op.CastLike(self.sinks, scores), [1, -1, 1, 1])"
ZERO_SINK = (
    "op.Reshape(op.Sub(op.CastLike(self.sinks, scores), op.CastLike(self.sinks, scores)), "
    "[1, -1, 1, 1])"
)


def _config(tmp_path: Path, model_type: str) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir(model_type, tmp_path / "hub")


@pytest.mark.parametrize("model_type", ["granite_swa", "granitemoe_swa"])
def test_attention_sinks_generate_into_mobius_with_zero_edits(
    tmp_path: Path, model_type: str
) -> None:
    model = _config(tmp_path, model_type)
    result = onboard_new(NewOptions(model=str(model), out=tmp_path / "out"))
    assert result.proposal.already_supported is None  # from the backlog: mobius lacks it
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    attention = result.analysis.spec.text.attention
    assert attention.sinks == "sinks"
    evidence = dict(result.analysis.spec.evidence)["text.attention.sinks"]
    assert any(re.search(rf"modeling_{model_type}\.py:\d+", e.where) for e in evidence), evidence
    text = (result.root / result.plan.model_file).read_text()
    assert "self.sinks = nn.Parameter([self.num_attention_heads])" in text
    assert lint_python(text, filename=f"{model_type}.py", style=STYLE) == ""
    if model_type != "granite_swa":
        return
    # the sink left out: its tensor fills nothing, and every softmax row sums to one again
    left_out = parity_with(result, SOFTMAX_WITH_SINK, "probs = op.Softmax(scores, axis=-1)")
    assert not left_out.passed
    assert any("sinks" in p for p in left_out.weights.problems), left_out.weights.problems
    # the sink's column kept but its learned logit ignored (zero)
    result.root.joinpath(result.plan.model_file).write_text(text)
    zeroed = parity_with(result, SINK, ZERO_SINK)
    checks = {c.name: c.status for c in zeroed.checks if c.provider == "default"}
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is Status.FAIL


def test_automodel_keeps_hf_attention_for_the_sinks(tmp_path: Path) -> None:
    found, kept = automodel_view(_config(tmp_path, "granite_swa"))
    assert not any("attention sinks" in item for item in found), found
    assert any("attention sinks" in item for item in kept), kept
