"""``onboard check`` as a plain function, plus a dependency-free ``main(argv)``.

``run_check(options, out)`` is what the typer command in ``onboard/cli.py`` calls; ``main`` parses
the same options with argparse so ``python -m onboard.lint`` works on its own (pre-commit's
``language: system`` hooks, tests). Exit codes: 0 no error left (warnings allowed), 1 errors,
2 bad usage or an unreadable repository.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from rich.console import Console

from onboard import json_output
from onboard.errors import BadInputError, ExitCode, OnboardError
from onboard.lint.report import print_findings, rule_json, rules_json, rules_table, to_json
from onboard.lint.runner import check
from onboard.lint.selection import explain, split_selectors


@dataclass(frozen=True)
class CheckOptions:
    """Every option of ``onboard check``."""

    files: tuple[Path, ...] = ()  # report the changes to these files (relative to the repo root)
    repo: Path | None = None  # the checkout; default: the current directory
    installed: bool = False  # lint the installed package of --target instead of a checkout
    target: str | None = None  # mobius or automodel; detected from the checkout when not given
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fix: bool = False
    as_json: bool = False
    explain: str | None = None
    show_rules: bool = False
    diff: bool = False  # report the changes since HEAD (the same as since="HEAD")
    since: str | None = None  # report the changes since this revision
    show_all: bool = False  # report every finding, whatever the files or the change


def run_check(options: CheckOptions, out: Console) -> int:
    """Run one ``onboard check`` and print its result; returns the exit code."""
    if options.explain is not None:
        if options.as_json:
            json_output.write(
                json_output.document("check", ExitCode.OK, {"rule": rule_json(options.explain)})
            )
        else:
            out.print(explain(options.explain), markup=False, highlight=False, soft_wrap=True)
        return ExitCode.OK
    if options.show_rules:
        if options.as_json:
            json_output.write(json_output.document("check", ExitCode.OK, {"rules": rules_json()}))
        else:
            out.print(rules_table())
        return ExitCode.OK
    if options.installed and options.repo is not None:
        raise BadInputError("--installed and --repo are exclusive: lint one or the other")
    root = None if options.installed else (options.repo or Path.cwd())
    if options.diff and options.since not in (None, "HEAD"):
        raise BadInputError("--diff is --since HEAD; give one of them")
    result = check(
        root,
        options.target,
        options.files,
        split_selectors(options.select),
        split_selectors(options.ignore),
        options.fix,
        since=options.since or ("HEAD" if options.diff else None),
        show_all=options.show_all,
    )
    if options.as_json:
        json_output.write(json_output.document("check", result.exit_code, to_json(result)))
    else:
        print_findings(result, out)
    return result.exit_code


DIFF_HELP = (
    "With FILES (as the pre-commit hook passes them), --diff or --since, only the findings on the "
    "lines or registry entries changed since HEAD (or REV) are reported, from `git diff -U0` of "
    "the working tree, and one line counts the others; --all reports every finding. Without git "
    "or outside a git work tree, FILES keep the findings that touch those files."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onboard check",
        description=f"Lint a target library's model registry. {DIFF_HELP}",
    )
    parser.add_argument("files", nargs="*", type=Path, help="report the changes to these files")
    parser.add_argument("--diff", action="store_true", help="report the changes since HEAD")
    parser.add_argument("--since", metavar="REV", help="report the changes since REV")
    parser.add_argument("--all", dest="show_all", action="store_true", help="report everything")
    parser.add_argument("--repo", type=Path, help="the library checkout (default: .)")
    parser.add_argument("--installed", action="store_true", help="lint the installed package")
    parser.add_argument("--target", "-t", choices=("mobius", "automodel"))
    parser.add_argument("--select", action="append", default=[], help="codes, prefixes or ALL")
    parser.add_argument("--ignore", action="append", default=[], help="codes or prefixes")
    parser.add_argument("--fix", action="store_true", help="apply the mechanical fixes")
    parser.add_argument("--json", dest="as_json", action="store_true", help="one JSON document")
    parser.add_argument("--explain", metavar="CODE", help="print a rule's documentation")
    parser.add_argument("--show-rules", action="store_true", help="list every rule")
    return parser


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = _parser().parse_args(argv)  # usage errors exit 2
    options = CheckOptions(
        files=tuple(args.files),
        repo=args.repo,
        installed=args.installed,
        target=args.target,
        select=tuple(args.select),
        ignore=tuple(args.ignore),
        fix=args.fix,
        as_json=args.as_json,
        explain=args.explain,
        show_rules=args.show_rules,
        diff=args.diff,
        since=args.since,
        show_all=args.show_all,
    )
    out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    try:
        code = run_check(options, out)
    except OnboardError as exc:
        Console(stderr=True, highlight=False).print(f"[bold red]error:[/] {exc.message}")
        sys.exit(int(exc.exit_code))
    sys.exit(int(code))
