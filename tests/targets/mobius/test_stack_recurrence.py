"""HRM's two stacks run in cycles (text.recurrence), generated for mobius from transformers'
default config with zero edits: one list of layers a stack, reused by every call, and one past
key/value input per call (CausalLMTask's num_hidden_layers). Each part of the recurrence left out
or miscounted fails parity; the tiny config's z_L_init is perturbed away from HF's zeros."""

from __future__ import annotations

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, NewResult, onboard_new
from tests.targets.mobius.sabotage import parity_with

LOW_CALL = "low = run_stack(self.layers, op.Add(low, high))"
INNER = "for _ in range(self.config.L_cycles):"
INITIAL = "op.CastLike(self.low_state_init, hidden_states)"
PAST = "past_key_value=next(past_kvs),"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> NewResult:
    from tests.new_types import default_config_dir

    folder = default_config_dir("hrm_text", tmp_path_factory.mktemp("hub"))
    out = tmp_path_factory.mktemp("out")
    return onboard_new(NewOptions(model=str(folder), out=out, treat_as_new=True))


def _failed(report, *names: str) -> bool:
    failed = {c.name.rstrip("+") for c in report.checks if c.status is Status.FAIL}
    return not report.passed and all(n in failed for n in names)


@pytest.mark.slow
def test_generated_recurrence_passes_parity(generated: NewResult) -> None:
    report = generated.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    kv = [c for c in report.checks if c.name == "kv-cache"]
    assert kv and "8 layers" in kv[0].detail  # 2 cycles x (3 low calls + 1 high), 1 layer
    text = (generated.root / generated.plan.model_file).read_text()
    assert all(line in text for line in (LOW_CALL, INNER, INITIAL, PAST))
    assert ".py:" not in text.split('"""', 2)[1]  # no HF line numbers in the library's code


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sabotage", "old", "new", "fails"),
    [
        ("cycles miscounted", INNER, INNER.replace("L_cycles", "L_cycles - 1"), "prefill"),
        ("input sum left out", LOW_CALL, "low = run_stack(self.layers, low)", "prefill"),
        (
            "z_L_init ignored",
            INITIAL,
            f"op.Mul({INITIAL}, op.Constant(value_float=0.0))",
            "prefill",
        ),
        (
            "one slot's past reused by every call",
            PAST,
            "past_key_value=(next(past_kvs), past_key_values and past_key_values[0])[1],",
            "decode",
        ),
    ],
)
def test_a_wrong_recurrence_fails_parity(
    generated: NewResult, sabotage: str, old: str, new: str, fails: str
) -> None:
    module = generated.root / generated.plan.model_file
    text = module.read_text()
    try:
        report = parity_with(generated, old, new)
    finally:
        module.write_text(text)
    assert _failed(report, fails), (sabotage, [(c.name, c.status) for c in report.checks])
