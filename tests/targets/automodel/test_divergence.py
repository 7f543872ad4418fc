"""A broken generated AutoModel layer: the parity report names the layer and module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.automodel import TARGET
from onboard.targets.automodel.plan import TESTS_DIR
from tests.hub_cache import fixture_config
from tests.targets.automodel.sabotage import parity_with

LLAMA = "meta-llama/Llama-3.2-1B"


@pytest.mark.slow
def test_a_wrong_attention_scale_in_layer_1_is_named(tmp_path: Path) -> None:
    model = str(fixture_config(LLAMA).parent)
    result = onboard_new(
        NewOptions(model=model, target="automodel", treat_as_new=True, out=tmp_path, parity=False)
    )
    # Without the package's own tests: the shared scenarios are what localise.
    shutil.rmtree(result.root / TESTS_DIR)
    generated = (result.root / result.plan.model_file, result.plan.model_class)
    unbroken = TARGET.parity(result.analysis, result.proposal, generated, result.library)
    assert unbroken.passed and unbroken.divergences == ()

    report = parity_with(
        result,
        "model.py",
        "scaling=self.scaling,",
        "scaling=self.scaling * (2.0 if self.layer_idx == 1 else 1.0),",
    )
    assert not report.passed
    assert [(d.provider, d.where) for d in report.divergences] == [("cpu", "layer 1 attention")]
    found = report.divergences[0]
    assert (found.layer, found.module) == (1, "attention")
    assert found.phase == "the prefill" and found.agreed == "layer 0 output"
    assert found.max_abs > 1e-2 and found.agreed_max_abs < 1e-5
