"""Fixtures: synthetic mobius / AutoModel checkouts under tmp_path, and a finder for lines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.lint.repos import (
    AUTOMODEL_CLEAN_ENTRIES,
    CLEAN_ENTRIES,
    automodel_files,
    mobius_files,
    write_tree,
)

MakeRepo = Callable[..., Path]


@pytest.fixture
def mobius_repo(tmp_path: Path) -> MakeRepo:
    """``mobius_repo(entries, extra={path: text}, family=..., variant=..., imports=...)``."""

    def make(entries: str = CLEAN_ENTRIES, extra: dict[str, str] | None = None, **registry: str):
        files = mobius_files(entries, **registry)
        files.update(extra or {})
        return write_tree(_fresh(tmp_path, "mobius"), files)

    return make


@pytest.fixture
def automodel_repo(tmp_path: Path) -> MakeRepo:
    """``automodel_repo(entries, configs="", extra={path: text})``."""

    def make(
        entries: str = AUTOMODEL_CLEAN_ENTRIES,
        configs: str = "",
        extra: dict[str, str] | None = None,
    ):
        files = automodel_files(entries, configs)
        files.update(extra or {})
        return write_tree(_fresh(tmp_path, "automodel"), files)

    return make


def _fresh(parent: Path, name: str) -> Path:
    """A new directory per call, so one test can build several repositories."""
    number = sum(1 for p in parent.iterdir() if p.name.startswith(name)) if parent.exists() else 0
    return parent / f"{name}{number}"


def line_in(path: Path, fragment: str, after: str | None = None) -> int:
    """1-based line of the first ``fragment`` in ``path`` (after the line holding ``after``)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = 0 if after is None else next(i for i, line in enumerate(lines) if after in line)
    for number, line in enumerate(lines[start:], start + 1):
        if fragment in line:
            return number
    raise AssertionError(f"{fragment!r} not in {path}")
