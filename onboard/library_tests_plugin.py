"""A pytest plugin loaded into the library's own test run (``-p onboard.library_tests_plugin``).

It keeps the tests that cover the plan's entries (``onboard.library_tests.LibraryTestFile``
scopes) and writes each test's outcome, by node id, to the JSON file onboard reads back: the
library's pytest configuration, output format and plugins stay as they are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from onboard.library_tests import SELECTION_ENV

_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_outcomes: dict[str, dict[str, str]] = {}


def _selection() -> dict[str, Any]:
    return json.loads(os.environ[SELECTION_ENV])


def _scope(item: pytest.Item, scopes: dict[str, str]) -> str:
    """The scope of the selected file or folder ``item`` is in (node ids start with the path
    from the checkout root, where the library's pytest configuration lives)."""
    file = item.nodeid.split("::")[0]
    for selected, scope in scopes.items():
        if file == selected or file.startswith(selected.rstrip("/") + "/"):
            return scope
    return "all"


def _covers(item: pytest.Item, scope: str, entries: set[str]) -> bool:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return scope != "entries"
    named = {value for value in callspec.params.values() if isinstance(value, str)}
    ids = set(callspec.id.split("-"))
    return scope == "all" or bool((named | ids) & entries)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    selection = _selection()
    entries = set(selection["entries"])
    kept, dropped = [], []
    for item in items:
        scope = _scope(item, selection["scopes"])
        (kept if _covers(item, scope, entries) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _record(nodeid: str, outcome: str, message: str) -> None:
    known = _outcomes.get(nodeid)
    if known is None or _SEVERITY[outcome] > _SEVERITY[known["outcome"]]:
        _outcomes[nodeid] = {"test": nodeid, "outcome": outcome, "message": message}


def _message(report: pytest.BaseReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0] if crash.message else ""
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return str(report.longrepr[-1])
    text = str(report.longrepr or "").strip().splitlines()
    return text[-1] if text else ""


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:  # a file that does not import: every test in it is lost
        _record(report.nodeid, "error", _message(report))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        outcome = "skipped" if report.skipped else "failed" if report.failed else "passed"
    elif report.failed:
        outcome = "error"
    elif report.skipped:
        outcome = "skipped"
    else:
        return
    _record(report.nodeid, outcome, "" if outcome == "passed" else _message(report))


def pytest_sessionfinish(session: pytest.Session) -> None:
    Path(_selection()["results"]).write_text(json.dumps(list(_outcomes.values())))
