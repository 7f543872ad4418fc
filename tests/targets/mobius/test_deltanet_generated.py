"""Qwen3-Next (gated DeltaNet and gated attention beside MoE layers) onboarded into mobius.

mobius 0.1.0 has its own qwen3_next, whose GatedDeltaNet L2-normalises q and k without HF's
epsilon (hybrid notes, M7): parity fails it and blames mobius' class. The generated module
computes its own DeltaNet, passes, and fails again when any of the differences it carries is
undone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, NewResult, onboard_new
from onboard.targets.mobius import TARGET
from onboard.targets.mobius import plan as mobius_plan
from onboard.targets.mobius.plan import STYLE
from tests.hub_cache import fixture_config
from tests.targets.mobius.sabotage import parity_with

QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"


def _new(out: Path, **options) -> NewResult:
    folder = fixture_config(QWEN3_NEXT).parent
    return onboard_new(NewOptions(model=str(folder), out=out, **options))


def test_qwen3_next_re_onboards_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path / "out", treat_as_new=True)
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = {
        c.name: c for c in report.checks if c.provider == "default" and not c.name.endswith("+")
    }
    assert set(default) == {"weights", "prefill", "decode", "states", "pad-left", "pad-right"}
    assert all(c.status is Status.PASS for c in default.values())
    assert "(conv_state, key, recurrent_state, value)" in default["states"].detail
    # past HF's 64-token chunk: its chunked prefill and the generated step-by-step scan agree
    assert "3 steps after a 73-token prompt" in default["decode"].detail
    # the cpu EP's GroupQueryAttention cannot take the tiny model's narrow partial RoPE: a
    # known mobius bug, confirmed by its counterfactual, not a failure of the generated code
    assert {b.id for b in report.bugs} == {"M3", "M7"}
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    assert "class Qwen3NextGatedDeltaNet(nn.Module)" in text
    assert "GatedDeltaNet(config)" not in text.replace("Qwen3NextGatedDeltaNet(config)", "")
    assert "self.self_attn = Qwen35Attention(config)" in text
    assert "linear_num_value_heads=" not in text  # mobius' base config reads it as HF does
    # attention and DeltaNet layers take their experts from one generated helper
    assert "return Qwen3NextMoELayer(config, gate=gate)" in text
    assert text.count("self.mlp = _feed_forward(config, index)") == 2
    design = TARGET.design(result.analysis.spec, result.proposal)
    entry = mobius_plan.test_config_entry(design, result.analysis.spec)
    assert '"layer_types": ["full_attention", "linear_attention"]' in entry
    assert '"linear_num_key_heads": 2' in entry and '"linear_value_head_dim": 24' in entry


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> NewResult:
    return _new(tmp_path_factory.mktemp("qwen3_next") / "out", treat_as_new=True, parity=False)


@pytest.mark.parametrize(
    ("old", "new", "fails"),
    [
        # HF's epsilon dropped, as mobius' own GatedDeltaNet does
        ("op.Constant(value_float=1e-06)", "op.Constant(value_float=0.0)", "prefill"),
        # each key head's group read in the wrong order
        ("query, key, value, gate = (", "key, query, value, gate = (", "prefill"),
        # padded positions reach the projections, the convolution and the state
        ("self._project(op, op.Mul(hidden_states, keep))", "self._project(op, hidden_states)",
         "pad-left"),
    ],
    ids=["l2-epsilon", "group-order", "padding-leak"],
)  # fmt: skip
def test_a_sabotaged_deltanet_fails_parity(
    generated: NewResult, old: str, new: str, fails: str
) -> None:
    module = generated.root / generated.plan.model_file
    original = module.read_text()
    try:
        report = parity_with(generated, old, new)
    finally:
        module.write_text(original)
    checks = {c.name: c for c in report.checks if c.provider == "default"}
    assert checks["weights"].status is Status.PASS
    assert checks[fails].status is Status.FAIL, checks[fails].to_dict()


def test_mobius_own_qwen3_next_fails_and_is_named_the_culprit(tmp_path: Path) -> None:
    """mobius' GatedDeltaNet divides q and k by their bare L2 norm (hybrid notes, M7): off
    by 1e-4 on the prompt, and a padded position's zero key becomes NaN."""
    from rich.console import Console

    from onboard.report import print_new

    result = _new(tmp_path / "out")
    assert result.proposal.already_supported is not None and result.plan is None
    default = {c.name: c for c in result.parity.checks if c.provider == "default"}
    assert default["weights"].status is Status.PASS
    assert default["prefill"].status is Status.FAIL
    assert default["pad-left"].status is Status.FAIL
    console = Console(record=True, width=200)
    print_new(result, console)
    assert "the library's own Qwen3NextCausalLMModel computes something else" in (
        console.export_text()
    )
