"""The architecture's boolean flags in generated AutoModel code: parity runs with them flipped, so
code that ignores a flag fails; code generated from the analysed values alone refuses the flags'
other values in its __init__ (as mobius' generated config does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.config_flags import with_flags
from onboard.codegen import render_template
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.source import load_source
from onboard.targets.automodel import TARGET
from tests.hub_cache import fixture_config

SLIDING_MASK = "create_sliding_window_causal_mask(**mask_kwargs)"
FULL_MASK = "create_causal_mask(**mask_kwargs)"


def _model_py(design) -> str:
    return render_template("automodel/model.py.j2", d=design, header="")


def test_code_from_the_analysed_values_refuses_the_other_values() -> None:
    source = load_source(str(fixture_config("Qwen/Qwen3-0.6B")))
    analysis = with_flags(source, analyse(source))
    assert {f.key for f in analysis.spec.flags} >= {"attention_bias", "use_sliding_window"}
    proposal = TARGET.propose(analysis.spec, TARGET.open_library(None), treat_as_new=True)
    analysed = TARGET.design(analysis, proposal)
    assert {f.key for f in analysed.guards} == {f.key for f in analysis.spec.flags}
    text = _model_py(analysed)
    assert 'if bool(getattr(config, "use_sliding_window", False)) is not False:' in text
    # the variant with every flag flipped: its code reads them all, so refuses none
    variant = analysis.variants[0]
    library = TARGET.open_library(None)
    flipped = TARGET.design(variant, TARGET.propose(variant.spec, library, treat_as_new=True))
    assert flipped.guards == ()
    assert "was generated for use_sliding_window" not in _model_py(flipped)


@pytest.mark.slow
def test_qwen3_flags_pass_flipped_and_code_ignoring_the_window_fails(tmp_path: Path) -> None:
    model = str(fixture_config("Qwen/Qwen3-0.6B").parent)
    options = NewOptions(model=model, target="automodel", treat_as_new=True, out=tmp_path / "out")
    result = onboard_new(options)
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    flipped = {c.name: c.status for c in report.checks if c.name.endswith("+")}
    assert {"prefill+", "decode+", "weights+"} <= set(flipped)
    assert Status.FAIL not in flipped.values()
    # generated from the variant with the flags flipped: it refuses none of them
    assert "was generated for" not in (result.root / result.plan.model_file).read_text()
    # sliding layers masked as full ones: the flipped config's sliding layers catch it, in
    # onboard's scenarios and in the generated tests (whose tiny config is the flipped one)
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert SLIDING_MASK in text
    module.write_text(text.replace(SLIDING_MASK, FULL_MASK))
    generated = (module, result.plan.model_class)
    variant = result.analysis.variants[0]
    assert "use_sliding_window" in {key for key, _ in variant.flagged_from.single}
    broken = TARGET.parity(variant, result.proposal, generated, result.library)
    failed = {c.name for c in broken.checks if c.status is Status.FAIL}
    assert {"prefill", "decode"} <= failed, failed
    # onboard's own scenarios on the checkpoint's config (no layer slides) cannot tell
    analysed = TARGET.parity(result.analysis, result.proposal, generated, result.library)
    assert analysed.failures and all(c.name.startswith("test_") for c in analysed.failures)
