"""Which findings a change touches: the diff-aware mode's filter.

A finding is touched when the change touches its line, or, for a finding in the registry, any
line of the registry entry it sits in, or of another entry with the same key in another table
(``_REGISTRATIONS``, ``_TEST_MODEL_IDS``, ``_FAMILY_OVERRIDES``, ...; ``MODEL_ARCH_MAPPING``):
editing ``_TEST_MODEL_IDS["qwen3"]`` re-reports the findings on the ``qwen3`` registration.
A change to a file a finding only depends on (``related``: a model module, a test config) does
not re-report it: that would re-report every finding that predates the change.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

from onboard.lint.changes import Changes
from onboard.lint.findings import Finding
from onboard.lint.registry import Registry

Span = tuple[int, int]


@dataclass(frozen=True)
class DiffScope:
    changes: Changes
    registry_path: str  # as findings show it
    entries: tuple[tuple[Span, str], ...]  # every registry table item: its lines and key

    @classmethod
    def of(cls, changes: Changes, registry: Registry, registry_path: str) -> DiffScope:
        entries = tuple(
            ((item.line, item.end_line), item.key)
            for table in registry.tables.values()
            for item in table.items
        )
        return cls(changes, registry_path, entries)

    def touches(self, finding: Finding) -> bool:
        if self.changes.touches(finding.path, finding.line, finding.line):
            return True
        if finding.path != self.registry_path or self.registry_path not in self.changes.lines:
            return False
        keys = {key for (first, last), key in self.entries if first <= finding.line <= last}
        return any(
            self.changes.touches(self.registry_path, first, last)
            for key in keys
            for first, last in self.spans[key]
        )

    @cached_property
    def spans(self) -> dict[str, list[Span]]:
        """Every key's entries, across the registry's tables."""
        spans: dict[str, list[Span]] = defaultdict(list)
        for span, key in self.entries:
            spans[key].append(span)
        return spans
