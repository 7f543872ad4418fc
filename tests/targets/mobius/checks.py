"""What the generated-module tests assert about a parity report, written once."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from onboard.codegen import lint_python
from onboard.parity.report import ParityReport, Status
from onboard.pipeline import NewOptions, NewResult, onboard_new
from onboard.targets.mobius.config_home import staged_config_source
from onboard.targets.mobius.plan import STYLE


def statuses(report: ParityReport, provider: str = "default") -> dict[str, Status]:
    """Each check's status on one execution provider."""
    return {c.name: c.status for c in report.checks if c.provider == provider}


def passed_module(result: NewResult, checks: set[str]) -> str:
    """The generated code (the module, then the config classes it adds to ``mobius._configs``),
    once parity ran exactly ``checks`` and passed each on both execution providers, and the
    module is formatted and lint-clean in mobius' style."""
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    for provider in ("default", "cpu"):
        assert statuses(report, provider) == dict.fromkeys(checks, Status.PASS), provider
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    return text + staged_config_source(module)


def assert_default_checks_pass(report: ParityReport) -> None:
    """Every check on the default execution provider passes: nothing excused. A generated model
    the static cache cannot take says so, as a skip with its reason, and only there."""
    default = [c for c in report.checks if c.provider == "default"]
    unpassed = [
        c.to_dict()
        for c in default
        if c.status is not Status.PASS
        and not (
            c.name.rstrip("+") == "static-cache"
            and c.status is Status.SKIP
            and "no static-cache path" in c.detail
        )
    ]
    assert not unpassed, unpassed


def onboarded_from_backlog(config_dir: Path, out: Path) -> NewResult:
    """``onboard new`` of a type mobius lacks (no --treat-as-new), once parity passed."""
    result = onboard_new(NewOptions(model=str(config_dir), out=out))
    assert result.proposal.already_supported is None  # from the backlog: mobius lacks it
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    return result


# mobius' tiny test sizes (tests/_test_configs.py, TINY_* and _base_config's defaults)
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "rope_type": "default",
    "rope_theta": 10_000.0,
    "pad_token_id": 0,
}


def built_from_test_entry(result: NewResult, entry: str) -> tuple[str, Any, Any]:
    """The model type, config and model mobius' own harness builds from the generated test
    entry: its tiny sizes, then the entry's overrides, into the entry's ``_config_cls``."""
    from onboard.targets.mobius import _import_file

    module = _import_file(result.root / result.plan.model_file)
    model_type, overrides, _ = eval(entry, vars(module))  # the entry as the harness reads it
    config_class = overrides.pop("_config_cls")
    fields = {f.name for f in dataclasses.fields(config_class)}
    config = config_class(**{k: v for k, v in (TINY | overrides).items() if k in fields})
    return model_type, config, getattr(module, result.plan.model_class)(config)
