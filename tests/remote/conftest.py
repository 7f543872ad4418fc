from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REMOTE = Path(__file__).parents[1] / "fixtures" / "remote"


@pytest.fixture
def checkpoint(tmp_path: Path):
    """A private copy of a remote-code fixture checkpoint (tests may tamper with it)."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(REMOTE / name, dest, ignore=shutil.ignore_patterns("FEATURES.md"))
        return dest

    return copy
