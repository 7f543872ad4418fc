"""Attention that differs by layer kind, and values unlike the keys (MiMo-V2-Flash, from the
backlog): its sliding layers have twice the key/value heads of its full layers and a sink logit
per head, which the full layers lack; its value heads are ``config.v_head_dim`` wide, narrower
than its query/key heads; its values are scaled by ``config.attention_value_scale`` after
v_proj. The spec check fails without each; mobius gets a generated attention built per layer
kind and a task whose cache takes each layer's heads, which passes parity with zero edits,
while a copy that gives the sliding layers the full layers' heads, drops the sinks or the value
scale fails. AutoModel refuses them by name."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.targets.automodel.propose import blockers as automodel_blockers
from onboard.targets.mobius.plan import STYLE
from onboard.tiny_model import build_tiny_model, perturb
from tests.targets.mobius.checks import assert_default_checks_pass, onboarded_from_backlog, statuses
from tests.targets.mobius.sabotage import parity_with

SLIDING_HEADS = "        return 2 * config.num_key_value_heads\n"
SINKS = (
    '        if layer_type in ("sliding_attention",):\n'
    "            self.sinks = nn.Parameter([self.num_attention_heads])\n"
)
SINK = "op.Reshape(op.CastLike(self.sinks, scores), [1, -1, 1, 1])"
ZERO_SINK = (
    "op.Reshape(op.Sub(op.CastLike(self.sinks, scores), op.CastLike(self.sinks, scores)), "
    "[1, -1, 1, 1])"
)
VALUE_SCALE = (
    "        value = op.Mul(value, op.CastLike(self._value_scale, value))  # cached as scaled\n"
)


@pytest.fixture(scope="module")
def mimo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("mimo_v2_flash", tmp_path_factory.mktemp("hub"))


def test_spec_check_fails_without_each_part(mimo: Path) -> None:
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(mimo)))
    text = analysis.spec.text
    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    assert check_spec(text, model, config) == ()
    attention = text.attention
    (sliding,) = attention.kinds
    dropped = {
        "the sliding layers' heads": (dataclasses.replace(sliding, kv_heads_factor=1),),
        "the sliding layers' sinks": (dataclasses.replace(sliding, sinks=None),),
    }
    for what, kinds in dropped.items():
        without = dataclasses.replace(attention, kinds=kinds)
        deltas = check_spec(dataclasses.replace(text, attention=without), model, config)
        assert deltas, what
    for field in ("v_head_dim", "value_scale"):
        without = dataclasses.replace(attention, **{field: None})
        deltas = check_spec(dataclasses.replace(text, attention=without), model, config)
        assert deltas, field
    # AutoModel's attention is one for every layer, values as wide as the keys: refused
    found = " | ".join(automodel_blockers(analysis.spec))
    assert "attention that differs by layer kind (sliding_attention layers: 2x the" in found
    assert "value heads of another width than the query/key heads (config.v_head_dim)" in found
    assert "the values scaled by config.attention_value_scale after v_proj" in found


@pytest.mark.slow
def test_per_kind_attention_generates_into_mobius_and_fails_without(mimo: Path, tmp_path: Path):
    result = onboarded_from_backlog(mimo, tmp_path / "out")
    assert_default_checks_pass(result.parity)
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    assert "class MiMoV2FlashTask(CausalLMTask):" in text

    def broken(old: str, new: str) -> tuple[dict[str, Status], str]:
        module.write_text(text)
        report = parity_with(result, old, new)
        assert not report.passed
        return statuses(report), " | ".join(c.detail for c in report.failures)

    # the sliding layers given the full layers' key/value heads: their weights do not fit
    checks, why = broken(SLIDING_HEADS, "        return config.num_key_value_heads\n")
    assert checks == {"build": Status.FAIL}, checks
    assert "Weight shape mismatch for 'model.layers.1.self_attn.k_proj.weight'" in why, why
    # the sinks left out: their tensors fill nothing
    checks, why = broken(SINKS, "")
    assert checks["weights"] is Status.FAIL and "sinks" in why, why
    # the sink column kept, its learned logit ignored (zero)
    checks, _ = broken(SINK, ZERO_SINK)
    assert checks["weights"] is Status.PASS and checks["prefill"] is Status.FAIL, checks
    # the values as v_proj gives them
    checks, _ = broken(VALUE_SCALE, "")
    assert checks["weights"] is Status.PASS and checks["prefill"] is Status.FAIL, checks
