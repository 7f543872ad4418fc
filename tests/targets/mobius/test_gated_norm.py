"""AXK2's gated norms and latent query gate (modeling_axk2.py). ``AXK2GatedRMSNorm``
(:87-101) returns ``y * sigmoid(fc2(silu(fc1(y))))``, ``y`` the plain RMSNorm of ``x``: every
layer's input norm, and the MLP norm only before experts (:679-684). ``AXK2Attention`` has no
q_b_proj: ``q_gate_proj`` (:541) reads ``cat([q_resid, q_compressed])`` (:601), the normed and
the raw q latent, and each head's output splits into its query and a gate that scales the heads'
output by its sigmoid before o_proj (:667). From the backlog: mobius 0.1.0 lacks axk2; the spec
check proves both, the generated code passes parity with zero edits, and copies that leave
either out or get it subtly wrong fail. AutoModel refuses both by name."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.hf_config import make_hf_config
from onboard.parity.report import ParityReport, Status
from onboard.pipeline import NewResult
from onboard.targets.automodel.kept_attention import attention_features
from onboard.targets.automodel.propose import blockers as automodel_blockers
from onboard.targets.mobius.plan import STYLE
from onboard.tiny_model import build_tiny_model, perturb
from tests.targets.mobius.checks import onboarded_from_backlog
from tests.targets.mobius.sabotage import parity_with

GATED_INPUT = "        self.input_layernorm = AXK2GatedNorm(config)\n"
PLAIN_INPUT = (
    "        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)\n"
)
GATE_OF_Y = "        gate = self.mlp(op, normed)\n"
BOTH = "        both = op.Concat(q_resid, q_latent, axis=-1)\n"
OUTPUT_GATED = (
    "        attn_output = op.Mul(attn_output, op.Sigmoid(op.Reshape(gate, [0, 0, -1])))\n"
)


@pytest.fixture(scope="module")
def axk2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("axk2", tmp_path_factory.mktemp("hub"))


@pytest.fixture(scope="module")
def analysed(axk2: Path):
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(axk2)))
    config = make_hf_config(analysis.tiny.config)
    return analysis, perturb(build_tiny_model(config)), config


def _with_norm_gate(text, **change):
    gate = dataclasses.replace(text.norm.gate, **change) if change else None
    return dataclasses.replace(text, norm=dataclasses.replace(text.norm, gate=gate))


def _with_query_gate(text, **change):
    mla = text.attention.mla
    gate = dataclasses.replace(mla.query_gate, **change) if change else None
    attention = dataclasses.replace(text.attention, mla=dataclasses.replace(mla, query_gate=gate))
    return dataclasses.replace(text, attention=attention)


def _computes_otherwise(deltas) -> bool:
    return any("computes something" in d.what for d in deltas)


def test_spec_check_proves_the_gated_norms(analysed) -> None:
    analysis, model, config = analysed
    text = analysis.spec.text
    gate = text.norm.gate
    assert (gate.rank, gate.rank_key, gate.activation, gate.reads) == (
        16,
        "gated_norm_rank",
        "silu",
        "normed",
    )
    assert (gate.norm, gate.down, gate.up) == ("norm", "mlp.fc1", "mlp.fc2")
    assert gate.roles == (("attn_in", ("dense", "moe")), ("mlp_in", ("moe",)))
    evidence = dict(analysis.spec.evidence)["text.norm.gate"]
    assert any(e.where == "modeling_axk2.py:101" for e in evidence), evidence
    assert check_spec(text, model, config) == ()
    # a plain norm in place of the gated one reads weights the model does not have
    assert check_spec(_with_norm_gate(text), model, config) != ()
    # the gate of the norm's input instead of its output: every gated norm differs
    assert _computes_otherwise(check_spec(_with_norm_gate(text, reads="input"), model, config))
    # the dense layer's MLP norm gated too: it has no gate
    everywhere = (("attn_in", ("dense", "moe")), ("mlp_in", ("dense", "moe")))
    assert check_spec(_with_norm_gate(text, roles=everywhere), model, config) != ()
    # another activation inside the gate
    assert _computes_otherwise(check_spec(_with_norm_gate(text, activation="gelu"), model, config))


def test_spec_check_proves_the_latent_query_gate(analysed) -> None:
    analysis, model, config = analysed
    text = analysis.spec.text
    assert text.attention.mla.query_gate.proj == "q_gate_proj"
    assert text.attention.mla.query_gate.inputs == ("normed", "raw")
    evidence = dict(analysis.spec.evidence)["text.attention.mla.query_gate"]
    lines = {e.where for e in evidence}
    assert {"modeling_axk2.py:601", "modeling_axk2.py:667"} <= lines, lines
    # the latents in the other order
    swapped = _with_query_gate(text, inputs=("raw", "normed"))
    assert _computes_otherwise(check_spec(swapped, model, config))
    # no query gate: q_b_proj, which AXK2 does not have
    assert check_spec(_with_query_gate(text), model, config) != ()


def test_automodel_refuses_the_gated_norms_and_keeps_hf_attention_for_the_query_gate(
    analysed,
) -> None:
    analysis, _, _ = analysed
    found = automodel_blockers(analysis.spec)
    assert any(b.startswith("gated norms (") and "modeling_axk2.py:101" in b for b in found), found
    # the fused query-and-gate projection lives in the attention, which AutoModel keeps as HF's
    assert not any("one projection of both q latents" in b for b in found), found
    kept = [str(r) for r in attention_features(analysis.spec)]
    assert any("(q_gate_proj)" in r and "modeling_axk2.py:601" in r for r in kept), kept


def _sabotaged(result: NewResult, text: str, old: str, new: str) -> ParityReport:
    result.root.joinpath(result.plan.model_file).write_text(text)
    return parity_with(result, old, new)


def _default_checks(report: ParityReport) -> dict[str, Status]:
    return {c.name: c.status for c in report.checks if c.provider == "default"}


@pytest.mark.slow
def test_gates_generate_into_mobius_and_fail_without(axk2: Path, tmp_path: Path) -> None:
    result = onboarded_from_backlog(axk2, tmp_path / "out")
    report = result.parity
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    text = (result.root / result.plan.model_file).read_text()
    assert lint_python(text, filename="axk2.py", style=STYLE) == ""
    assert re.search(r"if _is_moe_layer\(config, index\)\n", text)  # the MLP norm's rule
    # a plain norm in place of the gated input norm: its gate's tensors fill nothing
    plain = _sabotaged(result, text, GATED_INPUT, PLAIN_INPUT)
    assert not plain.passed
    assert any("input_layernorm.mlp.fc1" in p for p in plain.weights.problems), plain.weights
    # the gate of the norm's input instead of its output: every weight placed, logits wrong
    of_x = _sabotaged(result, text, GATE_OF_Y, "        gate = self.mlp(op, hidden_states)\n")
    checks = _default_checks(of_x)
    assert checks["weights"] is Status.PASS and checks["prefill"] is Status.FAIL, checks
    # the q latents in the other order
    swapped = _sabotaged(
        result, text, BOTH, "        both = op.Concat(q_latent, q_resid, axis=-1)\n"
    )
    checks = _default_checks(swapped)
    assert checks["weights"] is Status.PASS and checks["prefill"] is Status.FAIL, checks
    # the normed latent twice, the raw one never joined
    normed_twice = _sabotaged(
        result, text, BOTH, "        both = op.Concat(q_resid, q_resid, axis=-1)\n"
    )
    assert _default_checks(normed_twice)["prefill"] is Status.FAIL
    # the output gate dropped
    ungated = _sabotaged(result, text, OUTPUT_GATED, "")
    checks = _default_checks(ungated)
    assert checks["weights"] is Status.PASS and checks["prefill"] is Status.FAIL, checks
