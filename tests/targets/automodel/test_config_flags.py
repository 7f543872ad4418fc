"""The architecture's boolean flags in generated AutoModel code: parity runs with them flipped, so
code that ignores a flag fails; code generated from the analysed values alone refuses the flags'
other values in its __init__ (as mobius' generated config does): the values themselves, not
their truthiness, since a config class may admit more than True and False."""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from onboard.analysis import analyse
from onboard.analysis.config_flags import admitted_besides_bool, with_flags
from onboard.codegen import render_template
from onboard.flag_guards import guarded_flags
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.source import load_source
from onboard.spec import ConfigFlag, FlagSpecs
from onboard.targets.automodel import TARGET
from tests.hub_cache import fixture_config

SLIDING_MASK = "create_sliding_window_causal_mask(**mask_kwargs)"
FULL_MASK = "create_causal_mask(**mask_kwargs)"


# Laguna's gating: True (or "per-head") gates each head, False (or "per-element") each channel
GATING = ConfigFlag(
    key="gating",
    value=True,
    switches=(("attention.output_gate_proj", "softplus+per_head", "softplus"),),
    admits=("str",),
)


def _model_py(design) -> str:
    return render_template("automodel/model.py.j2", d=design, header="")


def _guards(text: str) -> Callable[[Any], None]:
    """The generated __init__'s flag guards, run alone on a config."""
    guards = [
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.If)
        and "getattr(config" in ast.unparse(node.test)
        and "was generated for" in ast.unparse(node)
    ]
    body = textwrap.indent("\n".join(ast.unparse(g) for g in guards) or "pass", "    ")
    namespace: dict[str, Any] = {}
    exec(f"def check(self, config):\n{body}\n", namespace)
    return lambda config: namespace["check"](SimpleNamespace(), config)


@pytest.fixture(scope="module")
def qwen3():
    source = load_source(str(fixture_config("Qwen/Qwen3-0.6B")))
    analysis = with_flags(source, analyse(source))
    proposal = TARGET.propose(analysis.spec, TARGET.open_library(None), treat_as_new=True)
    return analysis, TARGET.design(analysis, proposal)


def _gating_code(qwen3, flagged_from: FlagSpecs | None) -> Callable[[Any], None]:
    """Code whose only flag is Laguna's gating, read (``flagged_from``) or not."""
    analysis, design = qwen3
    spec = dataclasses.replace(analysis.spec, flags=(GATING,))
    guarded = dataclasses.replace(design, guards=guarded_flags(spec, flagged_from))
    return _guards(_model_py(guarded))


def test_a_flag_not_read_is_refused_at_any_value_but_the_analysed_one(qwen3) -> None:
    """Code proved with gating=True only: a per-element checkpoint ("per-element" is truthy)
    is refused, not run as per-head; "per-head" too (HF treats it as True, onboard never
    tried it)."""
    from transformers import LagunaConfig

    check = _gating_code(qwen3, None)
    check(LagunaConfig())
    for other in (False, "per-element", "per-head"):
        with pytest.raises(NotImplementedError, match="generated for gating=True only"):
            check(LagunaConfig(gating=other))


def test_a_flag_read_is_refused_at_values_besides_true_and_false(qwen3) -> None:
    from transformers import LagunaConfig

    analysis, _ = qwen3
    spec = dataclasses.replace(analysis.spec, flags=(GATING,))
    check = _gating_code(qwen3, FlagSpecs(spec, (("gating", spec),)))
    check(LagunaConfig(gating=True))
    check(LagunaConfig(gating=False))
    with pytest.raises(NotImplementedError, match="gating=False or gating=True only"):
        check(LagunaConfig(gating="per-element"))


def test_the_types_a_config_class_admits_beside_bool() -> None:
    from transformers import CohereConfig, LagunaConfig, Qwen3Config

    assert admitted_besides_bool(LagunaConfig(), "gating") == ("str",)
    assert admitted_besides_bool(CohereConfig(), "use_qk_norm") == ("None",)
    assert admitted_besides_bool(Qwen3Config(), "use_sliding_window") == ()


def test_code_from_the_analysed_values_refuses_the_other_values(qwen3) -> None:
    analysis, analysed = qwen3
    assert {f.key for f in analysis.spec.flags} >= {"attention_bias", "use_sliding_window"}
    assert all(f.admits == () for f in analysis.spec.flags)  # Qwen3Config: plain bools
    assert {g.key for g in analysed.guards} == {f.key for f in analysis.spec.flags}
    text = _model_py(analysed)
    assert 'if getattr(config, "use_sliding_window", False) is not False:' in text
    check = _guards(text)
    check(SimpleNamespace(use_sliding_window=False, attention_bias=False))
    with pytest.raises(NotImplementedError, match="use_sliding_window=False only"):
        check(SimpleNamespace(use_sliding_window=True, attention_bias=False))
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
