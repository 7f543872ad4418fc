"""The lines a change touches, read from ``git diff -U0`` (the diff-aware mode of ``check``).

The working tree is compared with a revision (``HEAD`` by default). Under pre-commit the working
tree is the index (pre-commit stashes unstaged edits), so that is what is being committed. Line
numbers are those of the working tree. A file git does not track yet, or any file when the
repository has no commit, is new as a whole. ``read_changes`` returns None where git is missing
or the checkout is not inside a git work tree: the caller then lints as before.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from onboard.errors import BadInputError

# "@@ -12,3 +12,0 @@": the new side starts at line 12 and has 0 lines (a deletion after 12).
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)
_WHOLE = None  # a file new as a whole


@dataclass(frozen=True)
class Changes:
    """Changed lines per repository path (POSIX, relative to the checkout); None: the whole file."""

    base: str  # the revision compared with
    lines: Mapping[str, frozenset[int] | None]

    def touches(self, path: str, first: int, last: int) -> bool:
        """Whether the change touches any of lines ``first``..``last`` of ``path``."""
        if path not in self.lines:
            return False
        changed = self.lines[path]
        return changed is None or any(first <= line <= last for line in changed)


def read_changes(root: Path, base: str, paths: Sequence[str] = ()) -> Changes | None:
    """What changed in ``paths`` (all of the checkout when empty) since ``base``."""
    if shutil.which("git") is None or _git(root, "rev-parse", "--is-inside-work-tree") is None:
        return None
    if _git(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}") is None:
        if base != "HEAD":
            raise BadInputError(f"--since {base}: no such revision in {root}")
        return Changes(base, dict.fromkeys(_tracked(root, paths) | set(paths), _WHOLE))
    diff = _git(root, "diff", "-U0", "--no-color", "--no-ext-diff", "--no-renames",
                "--relative", base, "--", *paths)  # fmt: skip
    if diff is None:
        return None  # e.g. a blob missing from a partial clone: lint as if without git
    lines: dict[str, frozenset[int] | None] = dict(_parse(diff))
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "--", *paths) or ""
    lines.update(dict.fromkeys(untracked.splitlines(), _WHOLE))
    return Changes(base, lines)


def _parse(diff: str) -> dict[str, frozenset[int]]:
    """``{path: new-side line numbers}``; a deletion touches the lines on either side of it."""
    found: dict[str, frozenset[int]] = {}
    for block in re.split(r"^diff --git ", diff, flags=re.MULTILINE)[1:]:
        target = re.search(r"^\+\+\+ (?:b/)?(.+)$", block, re.MULTILINE)
        if target is None or target.group(1) == "/dev/null":
            continue  # a deleted file: nothing left to report on
        touched: set[int] = set()
        for start, count in _HUNK.findall(block):
            first, size = int(start), 1 if count == "" else int(count)
            touched.update(range(first, first + size) if size else (first, first + 1))
        found[target.group(1)] = frozenset(touched)
    return found


def _tracked(root: Path, paths: Sequence[str]) -> set[str]:
    return set((_git(root, "ls-files", "--", *paths) or "").splitlines())


def _git(root: Path, *args: str) -> str | None:
    """``git args`` run in ``root``: its stdout, or None when it fails."""
    done = subprocess.run(
        ["git", "-c", "core.quotePath=false", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None
