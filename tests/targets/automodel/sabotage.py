"""Break one line of a generated AutoModel file and run parity on the package again."""

from __future__ import annotations

from onboard.parity.report import ParityReport, Status
from onboard.pipeline import NewResult
from onboard.targets.automodel import TARGET


def parity_with(result: NewResult, file: str, old: str, new: str) -> ParityReport:
    """Parity of ``result``'s generated package with ``old`` (which must occur) in ``file``
    (relative to the model's package) replaced by ``new``."""
    module = result.root / result.plan.model_file
    path = module.parent / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return TARGET.parity(
        result.analysis, result.proposal, (module, result.plan.model_class), result.library
    )


def statuses(report: ParityReport) -> dict[str, Status]:
    return {c.name: c.status for c in report.checks}
