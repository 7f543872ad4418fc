"""Break one line of a generated mobius module and run parity on it again."""

from __future__ import annotations

from onboard.parity.report import ParityReport
from onboard.pipeline import NewResult
from onboard.targets.mobius import TARGET


def parity_with(result: NewResult, old: str, new: str) -> ParityReport:
    """Parity of ``result``'s generated module with ``old`` (which must occur) replaced."""
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert old in text
    module.write_text(text.replace(old, new, 1))
    return TARGET.parity(
        result.analysis, result.proposal, (module, result.plan.model_class), result.library
    )
