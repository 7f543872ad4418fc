"""Run the selected rules over one library, keep the findings a change touches, fix on request.

``check`` is the whole job: find the library, run each applicable rule once, keep the findings to
report, and with ``fix=True`` apply the reported findings' edits and run again, so the result
reports what is left and what was fixed. Which findings are reported:

* no files and no ``since``, or ``show_all``: all of them;
* files or ``since`` (the diff-aware mode, what the pre-commit hook gets): those on the lines or
  registry entries changed since ``since`` (default ``HEAD``) in those files (every file when
  none is given), see ``scope.py``;
* files where git cannot tell what changed (no git, not a work tree, an installed package):
  those that touch the files, as ``Finding.touches`` says.

The others are counted in ``CheckResult.hidden``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from onboard.errors import BadInputError
from onboard.lint.changes import Changes, read_changes
from onboard.lint.context import Context
from onboard.lint.findings import CheckResult, Finding
from onboard.lint.hf import load_catalog
from onboard.lint.layout import Layout, open_layout
from onboard.lint.rules import Rule
from onboard.lint.scope import DiffScope
from onboard.lint.selection import select_rules


def check(
    root: Path | None = None,
    target: str | None = None,
    files: Sequence[Path] = (),
    select: Sequence[str] | None = None,
    ignore: Sequence[str] = (),
    fix: bool = False,
    *,
    since: str | None = None,
    show_all: bool = False,
) -> CheckResult:
    """Lint the registry of the checkout at ``root`` (or the installed ``target`` package)."""
    if show_all and since is not None:
        raise BadInputError(
            "--all reports every finding; it cannot be combined with --since/--diff"
        )
    layout = open_layout(root, target)
    selected = select_rules(select, ignore, layout.target)
    skipped = (
        () if load_catalog() is not None else tuple(r for r in selected if r.reads_transformers)
    )
    rules = tuple(r for r in selected if r not in skipped)
    wanted = None if show_all else _restrict(layout, files)
    changes = _changes(layout, wanted, since) if (files or since) and not show_all else None
    findings, hidden = _run(layout, rules, wanted, changes)
    fixed: tuple[Finding, ...] = ()
    if fix:
        fixed = _fix(layout, findings)
        if fixed:
            findings, hidden = _run(layout, rules, wanted, changes)
    return CheckResult(
        layout.target,
        layout.describe(),
        tuple(r.code for r in rules),
        findings,
        fixed,
        tuple(r.code for r in skipped),
        hidden,
        changes.base if changes is not None else None,
    )


def _changes(layout: Layout, wanted: frozenset[str] | None, since: str | None) -> Changes | None:
    if layout.root is None:
        if since is not None:
            raise BadInputError("--since/--diff compare a checkout with git; not --installed")
        return None
    return read_changes(layout.root, since or "HEAD", sorted(wanted or ()))


def _run(
    layout: Layout,
    rules: Sequence[type[Rule]],
    wanted: frozenset[str] | None,
    changes: Changes | None,
) -> tuple[tuple[Finding, ...], int]:
    """The findings to report, sorted, and how many others were found."""
    ctx = Context.open(layout)
    found = {finding for rule in rules for finding in rule().check(ctx)}
    shown = found
    if changes is not None:
        scope = DiffScope.of(changes, ctx.registry, ctx.registry_display)
        shown = {f for f in found if scope.touches(f)}
    elif wanted is not None:
        shown = {f for f in found if f.touches(wanted)}
    return tuple(sorted(shown, key=Finding.sort_key)), len(found) - len(shown)


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
