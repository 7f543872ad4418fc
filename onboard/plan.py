"""What a target wants written: the hand-off between ``targets.<name>.plan`` and ``render``.

A plan holds the full new text of every file it touches. Targets compute that text (templates
for new files, libcst codemods applied to the current text for shared files such as registries),
so rendering is a pure compare-and-write step with no target knowledge.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FileChange:
    """One file the plan wants to exist with ``content``.

    ``owned`` files are written whole by onboard (a model module, a test case): if a user edited
    one since onboard last wrote it, rendering stops with a conflict unless forced. Shared files
    (registries, ``__init__`` exports) are not owned: their new content was computed from the
    current text by a codemod, so user edits are already preserved.
    """

    path: str  # POSIX path relative to the plan root
    content: str
    owned: bool
    description: str = ""


@dataclass(frozen=True)
class Plan:
    """Every file change for one model and one target, plus notes for the report."""

    target: str
    model_type: str
    changes: tuple[FileChange, ...]
    notes: tuple[str, ...] = field(default=())
    model_file: str | None = None  # the generated module parity imports (a path in ``changes``)
    model_class: str | None = None  # the class in it that parity builds
    remote_code: tuple[tuple[str, str], ...] = ()  # checkpoint code it was read from (name, sha)
    # registry entries --treat-as-new hid, with the class the library registered for each
    # before onboard first wrote the model: a re-run proposes against the same library
    hidden: tuple[tuple[str, str], ...] = ()
    # where the code came from and why (provenance.record): the answers file keeps it
    provenance: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    def content_of(self, path: str) -> str:
        return next(c.content for c in self.changes if c.path == path)

    def paths(self) -> tuple[str, ...]:
        return tuple(change.path for change in self.changes)
