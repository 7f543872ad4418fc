from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from onboard.targets.automodel import TARGET


def installed_automodel() -> Path:
    spec = importlib.util.find_spec("nemo_automodel")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


@pytest.fixture
def automodel_repo(tmp_path: Path) -> Path:
    """An Automodel checkout layout: the installed package copied under the repo root."""
    repo = tmp_path / "Automodel"
    shutil.copytree(
        installed_automodel(), repo / "nemo_automodel", ignore=shutil.ignore_patterns("__pycache__")
    )
    return repo


@pytest.fixture
def automodel_target():
    """The automodel target, loaded through the ``onboard.targets`` entry point as the CLI does."""
    from onboard.targets.base import load_target

    target = load_target("automodel")
    assert target is TARGET
    return target
