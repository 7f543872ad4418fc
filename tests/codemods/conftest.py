"""Shared fixtures: the installed mobius sources and a diff check."""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Callable
from pathlib import Path

import libcst as cst
import pytest


@pytest.fixture(scope="session")
def mobius_dir() -> Path:
    """The installed mobius package directory, found without importing it (no torch)."""
    spec = importlib.util.find_spec("mobius")
    if spec is None or spec.origin is None:
        pytest.skip("mobius is not installed")
    return Path(spec.origin).parent


@pytest.fixture
def assert_only_added() -> Callable[[str, str], list[str]]:
    """Check that ``after`` parses and differs from ``before`` only by added lines."""

    def check(before: str, after: str) -> list[str]:
        cst.parse_module(after)
        diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
        changed = [line for line in diff if line[:1] in "+-?"]
        assert all(line.startswith("+ ") for line in changed), changed
        return [line[2:] for line in changed]

    return check
