"""The library's own tests for what a plan touches, run on the checkout and on the changed tree.

Parity proves the generated model; it says nothing about the library's harness around it (a
test-config entry its build tests read, a registry rule every model folder must follow). With
``--repo``, the tests a target names for the plan run twice in a fresh interpreter: on the
checkout as it is and on a copy with the plan applied. A test that passed before (or did not
exist) and fails after stops the run before anything is written, and is named. Tests that could
not run before either (a package the library needs and this environment lacks) are said, not
counted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import onboard
from onboard.plan import Plan

SELECTION_ENV = "ONBOARD_LIBRARY_TESTS"  # read by onboard.library_tests_plugin
TIMEOUT_S = 600
_FAILING = ("failed", "error")


@dataclass(frozen=True)
class LibraryTestFile:
    """One test file (or folder) of the library, and which of its tests cover a plan.

    ``scope``: ``entries`` keeps only tests parametrized with one of the plan's entries (mobius'
    build tests run once per test config); ``registry`` also keeps the unparametrized ones (rules
    every registered model must follow); ``all`` keeps every test.
    """

    path: str
    scope: str = "all"


@dataclass(frozen=True)
class LibraryTestSelection:
    """What a target wants run for a plan: test files, the entries they are filtered by, and
    the checkout folders the tests import the library from."""

    files: tuple[LibraryTestFile, ...]
    entries: tuple[str, ...]
    pythonpath: tuple[str, ...] = ()


@dataclass(frozen=True)
class LibraryTestOutcome:
    test: str  # the pytest node id, relative to the checkout
    outcome: str  # passed, failed, error or skipped
    message: str = ""


@dataclass(frozen=True)
class LibraryTestReport:
    """The selected tests on the checkout (``before``) and on the changed tree (``after``)."""

    before: tuple[LibraryTestOutcome, ...]
    after: tuple[LibraryTestOutcome, ...]
    files: tuple[str, ...]  # the selected files that exist in the checkout

    @property
    def broken(self) -> tuple[LibraryTestOutcome, ...]:
        """Tests failing after that passed, were skipped, or did not exist before."""
        failing_before = {t.test for t in self.before if t.outcome in _FAILING}
        return tuple(
            t for t in self.after if t.outcome in _FAILING and t.test not in failing_before
        )

    @property
    def unrunnable(self) -> tuple[LibraryTestOutcome, ...]:
        """Tests that fail on the checkout as it is: not onboard's, and not checked."""
        return tuple(t for t in self.before if t.outcome in _FAILING)

    @property
    def passed(self) -> bool:
        return not self.broken

    def count(self, outcome: str) -> int:
        return sum(t.outcome == outcome for t in self.after)

    def summary(self) -> str:
        ran = len(self.after)
        text = (
            f"{ran} library test(s) in {len(self.files)} file(s): {self.count('passed')} passed, "
            f"{self.count('skipped')} skipped"
        )
        if self.unrunnable:
            text += f", {len(self.unrunnable)} failing on the checkout as it is (not counted)"
        if self.broken:
            text += f"; {len(self.broken)} broken by the change"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "files": list(self.files),
            "summary": self.summary(),
            "broken": [asdict(t) for t in self.broken],
            "unrunnable": [asdict(t) for t in self.unrunnable],
            "after": {o: self.count(o) for o in ("passed", "failed", "error", "skipped")},
        }


def run_library_tests(
    selection: LibraryTestSelection, plan: Plan, root: Path, *, timeout: float = TIMEOUT_S
) -> LibraryTestReport | None:
    """The selected tests on ``root`` and on ``root`` with ``plan`` applied; None when none of
    the selected files exists in the checkout."""
    files = tuple(f for f in selection.files if (root / f.path).exists())
    if not files:
        return None
    generated = tuple(c.path for c in plan.changes if c.owned)  # proved by parity, not here
    with (
        tempfile.TemporaryDirectory(prefix="onboard-library-") as scratch,
        ThreadPoolExecutor(max_workers=2) as pool,  # two interpreters, side by side
    ):
        before = pool.submit(_run, selection, files, root, generated, timeout)
        changed = _changed_tree(root, plan, Path(scratch) / "tree")
        after = pool.submit(_run, selection, files, changed, generated, timeout)
        return LibraryTestReport(before.result(), after.result(), tuple(f.path for f in files))


def _changed_tree(root: Path, plan: Plan, tree: Path) -> Path:
    """A copy of ``root`` with the plan's files in place. Top-level folders the plan touches are
    copied whole, so a test resolving its own path stays inside the copy; the rest are links."""
    touched = {Path(change.path).parts[0] for change in plan.changes}
    tree.mkdir(parents=True)
    for entry in root.iterdir():
        if entry.name == ".git":
            continue
        if entry.name in touched and entry.is_dir():
            shutil.copytree(
                entry,
                tree / entry.name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"),
            )
        elif entry.name not in touched:
            (tree / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    for change in plan.changes:
        path = tree / change.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_text(change.content, encoding="utf-8")
    return tree


def _run(
    selection: LibraryTestSelection,
    files: tuple[LibraryTestFile, ...],
    root: Path,
    generated: tuple[str, ...],
    timeout: float,
) -> tuple[LibraryTestOutcome, ...]:
    """One pytest run in a fresh interpreter rooted at ``root``; its outcomes by node id."""
    with tempfile.TemporaryDirectory(prefix="onboard-library-run-") as scratch:
        results = Path(scratch) / "outcomes.json"
        env = _environment(selection, files, root, results)
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "onboard.library_tests_plugin",
            "-o",
            "addopts=",
            *(f"--ignore={path}" for path in generated if (root / path).exists()),
            *(f.path for f in files),
        ]
        try:
            completed = subprocess.run(
                command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return (LibraryTestOutcome(files[0].path, "error", f"timed out after {timeout:.0f} s"),)
        if not results.is_file():  # pytest itself failed before running anything
            tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:]
            return (
                LibraryTestOutcome(files[0].path, "error", " ".join(tail) or "pytest did not run"),
            )
        return tuple(LibraryTestOutcome(**row) for row in json.loads(results.read_text()))


def _environment(
    selection: LibraryTestSelection, files: tuple[LibraryTestFile, ...], root: Path, results: Path
) -> dict[str, str]:
    onboard_home = str(Path(onboard.__file__).resolve().parent.parent)
    paths = [str(root / p) for p in selection.pythonpath]
    inherited = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*paths, onboard_home, *([inherited] if inherited else [])]),
        "PYTHONDONTWRITEBYTECODE": "1",  # the checkout stays as it was
        SELECTION_ENV: json.dumps(
            {
                "entries": list(selection.entries),
                "scopes": {f.path: f.scope for f in files},
                "results": str(results),
            }
        ),
    }
