"""The shape of a rule: a code, a name for the problem, a severity, the targets it applies to.

The class docstring is the rule's documentation (What it does / Why is this bad? / Example /
Use instead), printed by ``explain``; keep it the single source of truth, as ruff does.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from onboard.lint.findings import Edit, Finding, Severity

if TYPE_CHECKING:
    from onboard.lint.context import Context

ALL_TARGETS = ("mobius", "automodel")


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    targets: ClassVar[tuple[str, ...]] = ALL_TARGETS
    fixable: ClassVar[bool] = False
    # Reads the installed transformers' source: does not run where transformers is not installed
    # (the pre-commit hook's light environment, unless the hook adds it)
    reads_transformers: ClassVar[bool] = False

    def check(self, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def finding(
        self,
        path: str,
        line: int,
        message: str,
        *,
        fix: Edit | None = None,
        related: tuple[str, ...] = (),
    ) -> Finding:
        return Finding(path, line, self.code, message, self.severity, self.name, fix, related)

    @classmethod
    def explain(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        """The first line of the docstring's "What it does" section."""
        lines = [line.strip() for line in cls.explain().splitlines()]
        try:
            start = lines.index("## What it does") + 1
        except ValueError:
            start = 0
        return next((line for line in lines[start:] if line), "")
