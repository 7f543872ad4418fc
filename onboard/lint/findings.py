"""What a lint run reports: findings located at ``path:line``, and the result of a whole run.

Kept free of rule logic and presentation so rules, the runner, the fixer and the printers all
exchange the same frozen values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from onboard.errors import ExitCode


class Severity(StrEnum):
    """An error is a registry entry that is wrong today; a warning is one that may bite later."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Edit:
    """A mechanical change that resolves one finding, applied only with ``--fix``.

    ``kind`` names the edit (the fixer dispatches on it); ``table`` and ``value`` say where the
    option goes and its source text.
    """

    kind: str
    key: str
    option: str
    table: str
    value: str


@dataclass(frozen=True)
class Finding:
    """One problem at ``path:line`` (``path`` relative to the repository root, POSIX style).

    ``related`` lists other repository paths (or folder prefixes ending in ``/``) the finding
    depends on, so a run restricted to changed files still reports an entry whose model file, test
    config or docs changed.
    """

    path: str
    line: int
    code: str
    message: str
    severity: Severity
    name: str
    fix: Edit | None = None
    related: tuple[str, ...] = ()

    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.path, self.line, self.code, self.message)

    def touches(self, files: frozenset[str]) -> bool:
        candidates = (self.path, *self.related)
        return any(
            candidate in files
            or (candidate.endswith("/") and any(f.startswith(candidate) for f in files))
            for candidate in candidates
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": str(self.severity),
            "path": self.path,
            "line": self.line,
            "message": self.message,
            "fixable": self.fix is not None,
        }

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.message}"


@dataclass(frozen=True)
class CheckResult:
    """The findings left after a run (and after ``--fix``), plus what was fixed."""

    target: str
    root: str  # the repository root, or the installed package's directory
    rules: tuple[str, ...]  # codes of the rules that ran
    findings: tuple[Finding, ...]  # the reported ones
    fixed: tuple[Finding, ...] = ()
    # codes of the selected rules that read transformers' source and did not run without it
    skipped: tuple[str, ...] = ()
    hidden: int = 0  # findings the run found but did not report (outside the files or change)
    since: str | None = None  # diff-aware: the revision the change is compared with

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.WARNING)

    @property
    def exit_code(self) -> ExitCode:
        """1 when an error is left (warnings alone pass, like ruff's 0/1/2)."""
        return ExitCode.FAILED if self.errors else ExitCode.OK
