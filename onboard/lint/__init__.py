"""``onboard check``: a static linter for target libraries' model registries.

Fast enough for pre-commit: it reads the registry, the library's model modules and transformers'
source as text (``ast``/libcst), never importing torch, transformers or the library itself.

    from onboard.lint import check, print_findings
    result = check(Path("../mobius"))          # target detected from the layout
    result = check(None, target="automodel")   # the installed package
"""

from __future__ import annotations

from onboard.lint.cli import CheckOptions, main, run_check
from onboard.lint.findings import CheckResult, Edit, Finding, Severity
from onboard.lint.report import print_findings, to_json
from onboard.lint.rules import RULES, Rule
from onboard.lint.runner import check
from onboard.lint.selection import explain, select_rules

__all__ = [
    "RULES",
    "CheckOptions",
    "CheckResult",
    "Edit",
    "Finding",
    "Rule",
    "Severity",
    "check",
    "explain",
    "main",
    "print_findings",
    "run_check",
    "select_rules",
    "to_json",
]
