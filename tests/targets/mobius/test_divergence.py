"""A broken generated mobius layer: the parity report names the layer and module it starts in."""

from __future__ import annotations

from pathlib import Path

from onboard.parity.harness import scenarios_for
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius import TARGET, _import_file
from onboard.targets.mobius.parity import _localise
from tests.hub_cache import fixture_config
from tests.targets.mobius.sabotage import parity_with

LLAMA = "meta-llama/Llama-3.2-1B"
CLASS_BODY = "    config_class = LlamaConfig\n"
# Layer 1's MLP output scaled by 1.5, written into the generated class
SCALED_MLP = """
    def __init__(self, config):
        super().__init__(config)
        mlp = self.model.layers[1].mlp
        forward = mlp.forward
        mlp.forward = lambda op, x: op.Mul(forward(op, x), 1.5)
"""


def _generated(tmp_path: Path):
    model = str(fixture_config(LLAMA).parent)
    return onboard_new(NewOptions(model=model, treat_as_new=True, out=tmp_path, parity=False))


def test_a_scaled_layer_1_mlp_is_named_on_both_providers(tmp_path: Path) -> None:
    result = _generated(tmp_path)
    module = result.root / result.plan.model_file
    unbroken = TARGET.parity(
        result.analysis, result.proposal, (module, result.plan.model_class), result.library
    )
    assert unbroken.passed and unbroken.divergences == ()
    # Localising the passing model anyway finds nothing: the probes line up on both sides.
    module_class = getattr(_import_file(module), result.plan.model_class)
    scenarios = scenarios_for(result.analysis.spec.text)
    for provider in ("default", "cpu"):
        config = result.analysis.tiny.config
        assert _localise(module_class, config, provider, "cpu", scenarios) is None

    report = parity_with(result, CLASS_BODY, CLASS_BODY + SCALED_MLP)
    assert not report.passed and not report.bugs
    assert [(d.provider, d.layer, d.module) for d in report.divergences] == [
        ("default", 1, "mlp"),
        ("cpu", 1, "mlp"),
    ]
    first = report.divergences[0]
    assert first.phase == "the prefill" and first.agreed == "layer 1 attention"
    assert first.max_abs > 1e-2 and first.agreed_max_abs < 1e-5
    data = report.to_dict()["divergences"][0]
    assert (data["where"], data["layer"], data["module"]) == ("layer 1 mlp", 1, "mlp")
