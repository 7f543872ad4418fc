"""Which analysis ``onboard new`` generates from, in order, and what it says of the flags.

The analysis with every config flag flipped comes first (its code reads the flags), then each
flag alone, then the analysed values alone (``analysis/config_flags.py``). The first whose code
passes parity on both tiny configs wins; each one passed over leaves a notice.
"""

from __future__ import annotations

from dataclasses import replace

from onboard.analysis import Analysis
from onboard.errors import UnsupportedFeatureError
from onboard.parity.report import ParityReport
from onboard.targets.base import Library, Proposal, Target

__all__ = [
    "attempts",
    "fallback_notice",
    "flipped_label",
    "library_flag_notes",
    "unproved_notice",
    "unwritable_notice",
]


def attempts(
    analysis: Analysis, proposal: Proposal, target: Target, library: Library, regenerate: bool
) -> list[tuple[Analysis, Proposal]]:
    """What to generate from, in order: code that reads all the architecture's flags (from the
    variant with all flipped), then each flag alone, then the analysed values alone. The first
    that passes parity wins; its config refuses the other values of the flags it does not read."""
    attempts = []
    for variant in analysis.variants if target.reads_flags else ():
        flagged = target.propose(variant.spec, library, treat_as_new=regenerate)
        if not flagged.blockers and flagged.chosen is not None:
            attempts.append((variant, flagged))
    return [*attempts, (analysis, proposal)]


def flipped_label(variant: Analysis) -> str:
    flipped = {key for key, _ in variant.flagged_from.single} if variant.flagged_from else set()
    return ", ".join(f"{f.key}={not f.value}" for f in variant.spec.flags if f.key in flipped)


def fallback_notice(variant: Analysis, report: ParityReport) -> str:
    failed = ", ".join(sorted({c.name for c in report.failures}))
    return (
        f"code reading {flipped_label(variant)} from the config failed parity ({failed}), "
        "so it is not generated"
    )


def library_flag_notes(
    target: Target,
    report: ParityReport,
    analysis: Analysis,
    proposal: Proposal,
    library: Library,
    device: str,
) -> ParityReport:
    """The registered class's parity with each of the architecture's flags flipped, as notes:
    a checkpoint that sets one the class does not follow would fail; this one does not."""
    if not report.passed:
        return report
    notes = []
    for variant in analysis.variants:
        if variant.flagged_from is None or len(variant.flagged_from.single) != 1:
            continue  # each flag alone: the note names the one the class does not follow
        flipped = target.parity(variant, proposal, None, library, device=device)
        failed = ", ".join(sorted({f"{c.provider} {c.name}" for c in flipped.failures}))
        notes.append(
            f"{report.model_class} also passes with {flipped_label(variant)}"
            if flipped.passed
            else f"{report.model_class} does not follow {flipped_label(variant)}: {failed} "
            "fail with it (a library limitation; this checkpoint does not set it)"
        )
    return replace(report, notes=(*report.notes, *notes))


def unproved_notice(variant: Analysis, why: str) -> str:
    """What ``--no-parity`` (or parity refused) leaves unsaid: the code written reads flags that
    no parity run tried, where a parity run falls back to code refusing them when they fail."""
    keys = ", ".join(key for key, _ in variant.flagged_from.single)
    return (
        f"the code reads {keys} from the config, unproved ({why}): no parity run tried "
        f"{flipped_label(variant)}; with parity, onboard writes this code only if it passes on "
        "the tiny configs both ways, else code for the analysed values that refuses them"
    )


def unwritable_notice(variant: Analysis, error: UnsupportedFeatureError) -> str:
    return f"code reading {flipped_label(variant)} from the config cannot be written: {error}"
