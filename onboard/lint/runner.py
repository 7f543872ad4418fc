"""Run the selected rules over one library, restrict to the given files, and fix on request.

``check`` is the whole job: find the library, run each applicable rule once, keep the findings
that touch the given files (all of them when no file is given), and with ``fix=True`` apply the
selected findings' edits and run again, so the result reports what is left and what was fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from onboard.errors import BadInputError
from onboard.lint.context import Context
from onboard.lint.findings import CheckResult, Finding
from onboard.lint.hf import load_catalog
from onboard.lint.layout import Layout, open_layout
from onboard.lint.rules import Rule
from onboard.lint.selection import select_rules


def check(
    root: Path | None = None,
    target: str | None = None,
    files: Sequence[Path] = (),
    select: Sequence[str] | None = None,
    ignore: Sequence[str] = (),
    fix: bool = False,
) -> CheckResult:
    """Lint the registry of the checkout at ``root`` (or the installed ``target`` package)."""
    layout = open_layout(root, target)
    selected = select_rules(select, ignore, layout.target)
    skipped = (
        () if load_catalog() is not None else tuple(r for r in selected if r.reads_transformers)
    )
    rules = tuple(r for r in selected if r not in skipped)
    wanted = _restrict(layout, files)
    findings = _run(layout, rules, wanted)
    fixed: tuple[Finding, ...] = ()
    if fix:
        fixed = _fix(layout, findings)
        if fixed:
            findings = _run(layout, rules, wanted)
    return CheckResult(
        layout.target,
        layout.describe(),
        tuple(r.code for r in rules),
        findings,
        fixed,
        tuple(r.code for r in skipped),
    )


def _run(
    layout: Layout, rules: Sequence[type[Rule]], wanted: frozenset[str] | None
) -> tuple[Finding, ...]:
    ctx = Context.open(layout)
    found = [finding for rule in rules for finding in rule().check(ctx)]
    if wanted is not None:
        found = [f for f in found if f.touches(wanted)]
    return tuple(sorted(set(found), key=Finding.sort_key))


def _restrict(layout: Layout, files: Sequence[Path]) -> frozenset[str] | None:
    """The given files as repository paths (None: no restriction)."""
    if not files:
        return None
    base = layout.root if layout.root is not None else Path.cwd()
    return frozenset(layout.display((base / f).resolve()) for f in files)


def _fix(layout: Layout, findings: tuple[Finding, ...]) -> tuple[Finding, ...]:
    if layout.root is None:
        raise BadInputError("--fix edits a checkout; it cannot change an installed package")
    from onboard.lint.fixes import apply_edits  # libcst costs 0.25 s to import: only for --fix

    fixable = tuple(f for f in findings if f.fix is not None)
    applied = apply_edits(layout.registry_path, (f.fix for f in fixable if f.fix is not None))
    return fixable if applied else ()
