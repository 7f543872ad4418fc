"""Show a ``CheckResult``: one ``path:line: CODE message`` line per finding, or one JSON document.

Kept apart from the runner so the CLI, the pre-commit hook and the tests read the same result.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from onboard.lint.findings import CheckResult, Finding, Severity
from onboard.lint.rules import RULES
from onboard.lint.selection import find_rule

JSON_VERSION = 1
_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow"}


def print_findings(result: CheckResult, console: Console) -> None:
    for finding in result.findings:
        console.print(_line(finding), soft_wrap=True)
    for finding in result.fixed:
        console.print(Text.assemble(("fixed ", "green"), str(finding)), soft_wrap=True)
    console.print(_summary(result), soft_wrap=True)
    if result.hidden:
        console.print(_hidden(result), soft_wrap=True)
    if result.skipped:
        console.print(Text(skipped_note(result.skipped), style="yellow"), soft_wrap=True)


def skipped_note(codes: tuple[str, ...]) -> str:
    """Why rules did not run, and how the pre-commit hook runs them."""
    return (
        f"transformers is not installed here, so {', '.join(codes)} did not run (they read its "
        "source); to run them in the pre-commit hook, add the library's transformers release to "
        "its additional_dependencies (README, `onboard check`)"
    )


def _line(finding: Finding) -> Text:
    return Text.assemble(
        (f"{finding.path}:{finding.line}:", "bold"),
        " ",
        (finding.code, _STYLE[finding.severity]),
        " ",
        finding.message,
        (" [*]" if finding.fix is not None else "", "cyan"),
    )


def _summary(result: CheckResult) -> Text:
    if not result.findings:
        fixed = f" ({len(result.fixed)} fixed)" if result.fixed else ""
        return Text(f"All checks passed!{fixed}", style="green")
    errors, warnings = len(result.errors), len(result.warnings)
    parts = [f"Found {_plural(errors, 'error')} and {_plural(warnings, 'warning')}"]
    if result.fixed:
        parts.append(f"{len(result.fixed)} fixed")
    fixable = sum(f.fix is not None for f in result.findings)
    if fixable:
        parts.append(f"[*] {fixable} fixable with --fix")
    return Text("; ".join(parts) + ".", style="bold red" if errors else "bold yellow")


def _hidden(result: CheckResult) -> Text:
    """The one line that counts what a narrowed run did not report."""
    where = "elsewhere" if result.since is None else f"outside the changes since {result.since}"
    return Text(
        f"{_plural(result.hidden, 'existing finding')} {where} not shown (--all to show).",
        style="dim",
    )


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def to_json(result: CheckResult) -> dict[str, Any]:
    return {
        "version": JSON_VERSION,
        "target": result.target,
        "root": result.root,
        "rules": list(result.rules),
        "findings": [f.to_json() for f in result.findings],
        "fixed": [f.to_json() for f in result.fixed],
        "skipped": list(result.skipped),
        "summary": {
            "errors": len(result.errors),
            "warnings": len(result.warnings),
            "fixed": len(result.fixed),
            "not_shown": result.hidden,
        },
        "since": result.since,
        "exit_code": int(result.exit_code),
    }


def rules_markdown() -> str:
    """A docs page for every rule, generated from the docstrings (the single source)."""
    rows = [
        f"| {r.code} | `{r.name}` | {r.severity} | {', '.join(r.targets)} | "
        f"{'yes' if r.fixable else ''} |"
        for r in RULES
    ]
    sections = [f"## {r.code} `{r.name}`\n\n{r.explain().replace('## ', '### ')}\n" for r in RULES]
    head = "| code | name | severity | targets | fix |\n|---|---|---|---|---|"
    return "\n".join(["# onboard check rules", "", head, *rows, "", *sections])


def rules_json() -> list[dict[str, Any]]:
    """Every rule as ``--show-rules --json`` lists it."""
    return [_rule_json(rule) for rule in RULES]


def rule_json(code: str) -> dict[str, Any]:
    """One rule with its documentation (``--explain CODE --json``)."""
    return {**_rule_json(find_rule(code)), "doc": find_rule(code).explain()}


def _rule_json(rule: Any) -> dict[str, Any]:
    return {
        "code": rule.code,
        "name": rule.name,
        "severity": str(rule.severity),
        "targets": list(rule.targets),
        "fixable": rule.fixable,
    }


def rules_table() -> Table:
    """Every rule: code, name, severity, targets, fixable (``--show-rules``)."""
    table = Table("code", "name", "severity", "targets", "fix", box=None)
    for rule in RULES:
        table.add_row(
            rule.code,
            rule.name,
            Text(str(rule.severity), style=_STYLE[rule.severity]),
            ", ".join(rule.targets),
            "yes" if rule.fixable else "",
        )
    return table
