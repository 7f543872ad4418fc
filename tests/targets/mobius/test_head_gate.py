"""An attention output gate squashed by softplus, one value per head (Laguna:
``o_proj(attn * softplus(g_proj(x)))`` with g_proj from the hidden states to the head count),
from the backlog: Laguna, which mobius 0.1.0 lacks. The spec check proves the squashing and the
granularity; generated mobius code passes parity with zero edits, and fails it with the gate left
out or squashed by sigmoid; AutoModel refuses the gate by name.

The config is transformers' default Laguna (every layer full attention, MoE from layer 1, its
checkpoint's mlp.shared_expert renamed to mlp.shared_experts on load) with one RoPE for both
layer kinds: its default per-kind RoPE (partial rotary on full layers, which mobius reads only at
the config's top level) is another feature; this test is the gate's.
"""

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
from tests.targets.automodel.kept import automodel_view
from tests.targets.mobius.checks import assert_default_checks_pass, onboarded_from_backlog
from tests.targets.mobius.sabotage import parity_with

ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}
GATE = "gate = op.Softplus(self.g_proj(op, hidden_states))"
GATED = "attn_output = op.Reshape(op.Mul(heads, op.Unsqueeze(gate, [-1])), [0, 0, -1])"


@pytest.fixture(scope="module")
def laguna(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    rope = {"full_attention": ROPE, "sliding_attention": ROPE}
    return default_config_dir("laguna", tmp_path_factory.mktemp("hub"), rope_parameters=rope)


def test_spec_check_proves_the_softplus_per_head_gate(laguna: Path) -> None:
    """The gate read with its evidence; the interpreter names Laguna's attention when the
    gate is left out or squashed by sigmoid."""
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(laguna)))
    assert analysis.spec.unresolved == ()
    tiny = analysis.tiny.config  # the per-layer head counts shrink with the heads
    assert tiny["num_attention_heads_per_layer"] == [tiny["num_attention_heads"]] * len(
        tiny["layer_types"]
    )
    text = analysis.spec.text
    attention = text.attention
    assert attention.output_gate_proj == "g_proj"
    assert (attention.output_gate_activation, attention.output_gate_per_head) == ("softplus", True)
    evidence = dict(analysis.spec.evidence)
    softplus = evidence["text.attention.output_gate_activation"]
    assert any(re.search(r"modeling_laguna\.py:\d+", e.where) for e in softplus), softplus
    assert any("softplus" in e.detail for e in softplus), softplus
    assert evidence["text.attention.output_gate_per_head"], evidence
    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    assert check_spec(text, model, config) == ()
    for wrong in (
        {"output_gate_proj": None},
        {"output_gate_activation": "sigmoid"},
    ):
        changed = dataclasses.replace(text, attention=dataclasses.replace(attention, **wrong))
        deltas = check_spec(changed, model, config)
        assert any("LagunaAttention computes something" in d.what for d in deltas), (wrong, deltas)


@pytest.mark.slow
def test_head_gate_generates_into_mobius_with_zero_edits(laguna: Path, tmp_path: Path) -> None:
    result = onboarded_from_backlog(laguna, tmp_path / "out")
    report = result.parity
    assert_default_checks_pass(report)
    text = (result.root / result.plan.model_file).read_text()
    assert lint_python(text, filename="laguna.py", style=STYLE) == ""
    assert "Linear(self.hidden_size, self.num_attention_heads, bias=False)" in text
    # gating=False gives a gate per channel, which this code does not read: refused by name
    assert "generated for gating=True only" in text
    # the gate left out: g_proj fills nothing
    left_out = parity_with(result, GATED, "")
    assert not left_out.passed
    assert any("g_proj" in p for p in left_out.weights.problems), left_out.weights.problems
    # the gate squashed by sigmoid: every weight placed, the logits wrong
    result.root.joinpath(result.plan.model_file).write_text(text)
    sigmoid = parity_with(result, GATE, GATE.replace("Softplus", "Sigmoid"))
    checks = {c.name: c.status for c in sigmoid.checks if c.provider == "default"}
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is Status.FAIL


def test_automodel_keeps_hf_attention_for_the_head_gate(laguna: Path) -> None:
    """The head gate lives in the attention, which the AutoModel target keeps as HF's."""
    found, kept = automodel_view(laguna)
    assert not any("g_proj" in i for i in found), found
    named = [i for i in kept if "g_proj" in i and "modeling_laguna.py:" in i]
    assert named and "softplus" in named[0] and "one value per head" in named[0], kept
