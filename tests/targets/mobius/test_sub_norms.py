"""Norms inside a block (BitNet: ``attn_sub_norm`` on the heads' output before o_proj,
``ffn_sub_norm`` on act(gate) x up before down_proj), from the backlog: BitNet, which mobius
0.1.0 lacks, generated into mobius from transformers' default config with zero edits. The spec
check proves where each norm sits; generated code that leaves either out fails parity
(AutoModel's: tests/targets/automodel/test_sub_norms.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.targets.mobius.plan import STYLE
from onboard.tiny_model import build_tiny_model, perturb
from tests.targets.mobius.checks import onboarded_from_backlog
from tests.targets.mobius.sabotage import parity_with

ATTENTION_NORM = "        attn_output = self.attn_sub_norm(op, attn_output)\n"
MLP_NORM = "self.down_proj(op, self.ffn_sub_norm(op, hidden))"
MLP_BODY = (
    "hidden = op.Mul(self.act_fn(op, self.gate_proj(op, x)), self.up_proj(op, x))\n"
    f"        return {MLP_NORM}"
)
MLP_NORM_ON_GATE = (
    "gate = self.ffn_sub_norm(op, self.act_fn(op, self.gate_proj(op, x)))\n"
    "        return self.down_proj(op, op.Mul(gate, self.up_proj(op, x)))"
)


@pytest.fixture(scope="module")
def bitnet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("bitnet", tmp_path_factory.mktemp("hub"))


def test_sub_norms_generate_into_mobius_with_zero_edits(bitnet: Path, tmp_path: Path) -> None:
    result = onboarded_from_backlog(bitnet, tmp_path / "out")
    report = result.parity
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    spec = result.analysis.spec
    assert spec.text.attention.sub_norm == "attn_sub_norm"
    assert spec.text.mlp.sub_norm == "ffn_sub_norm"
    for path in ("text.attention.sub_norm", "text.mlp.sub_norm"):
        evidence = dict(spec.evidence)[path]
        assert any(re.search(r"modeling_bitnet\.py:\d+", e.where) for e in evidence), evidence
    text = (result.root / result.plan.model_file).read_text()
    assert lint_python(text, filename="bitnet.py", style=STYLE) == ""
    # the attention's norm left out: its tensors fill nothing
    left_out = parity_with(result, ATTENTION_NORM, "")
    assert not left_out.passed
    assert any("attn_sub_norm" in p for p in left_out.weights.problems), left_out.weights.problems
    # the MLP's norm left out
    result.root.joinpath(result.plan.model_file).write_text(text)
    left_out = parity_with(result, MLP_NORM, "self.down_proj(op, hidden)")
    assert not left_out.passed
    assert any("ffn_sub_norm" in p for p in left_out.weights.problems), left_out.weights.problems
    # the MLP's norm kept but on the gate alone: every weight placed, the logits wrong
    result.root.joinpath(result.plan.model_file).write_text(text)
    misplaced = parity_with(result, MLP_BODY, MLP_NORM_ON_GATE)
    checks = {c.name: c.status for c in misplaced.checks if c.provider == "default"}
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is not Status.PASS


def test_spec_check_refuses_a_spec_without_the_sub_norms(bitnet: Path) -> None:
    """The interpreter is what proves the norms: without them in the spec it names the HF
    modules that compute something else."""
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(bitnet)))
    text = analysis.spec.text
    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    assert check_spec(text, model, config) == ()
    attention = dataclasses.replace(text.attention, sub_norm=None)
    without = dataclasses.replace(text, attention=attention)
    deltas = check_spec(without, model, config)
    assert any("BitNetAttention computes something" in d.what for d in deltas), deltas
    without = dataclasses.replace(text, mlp=dataclasses.replace(text.mlp, sub_norm=None))
    deltas = check_spec(without, model, config)
    assert any("BitNetMLP computes something" in d.what for d in deltas), deltas


def test_bitnet_quantized_linears_are_refused_by_name(tmp_path: Path) -> None:
    """A tiny model built from a config with BitNet quantization keeps float linears, so the
    spec check cannot see what transformers computes for the real checkpoint (packed ternary
    weights, int8 activations): the analysis names it instead of passing it unseen."""
    from onboard.analysis import analyse
    from onboard.source import load_source
    from tests.new_types import default_config_dir

    quantized = {"quant_method": "bitnet", "linear_class": "bitlinear"}
    folder = default_config_dir("bitnet", tmp_path / "hub", quantization_config=quantized)
    unresolved = analyse(load_source(str(folder))).spec.unresolved
    assert [d.where for d in unresolved] == ["config.json:quantization_config"], unresolved
    assert "bitnet-quantized linear layers" in unresolved[0].what
