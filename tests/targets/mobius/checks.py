"""What the generated-module tests assert about a parity report, written once."""

from __future__ import annotations

from pathlib import Path

from onboard.codegen import lint_python
from onboard.parity.report import ParityReport, Status
from onboard.pipeline import NewOptions, NewResult, onboard_new
from onboard.targets.mobius.plan import STYLE


def statuses(report: ParityReport, provider: str = "default") -> dict[str, Status]:
    """Each check's status on one execution provider."""
    return {c.name: c.status for c in report.checks if c.provider == provider}


def passed_module(result: NewResult, checks: set[str]) -> str:
    """The generated module's source, once parity ran exactly ``checks`` and passed each on both
    execution providers, and the module is formatted and lint-clean in mobius' style."""
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    for provider in ("default", "cpu"):
        assert statuses(report, provider) == dict.fromkeys(checks, Status.PASS), provider
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    return text


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
