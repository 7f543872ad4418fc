"""The import overlay: generated files win, the library's other modules stay reachable."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from onboard.targets.automodel.overlay import OverlayFinder


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``fakelib`` installed in ``site/`` and a generated overlay of two of its files."""
    _write(
        tmp_path / "site",
        {
            "fakelib/__init__.py": "",
            "fakelib/models/__init__.py": "",
            "fakelib/models/llama/__init__.py": "",
            "fakelib/models/llama/model.py": "WHO = 'installed'\n",
            "fakelib/models/llama/rope_utils.py": "WHO = 'installed rope'\n",
            "fakelib/registry.py": "WHO = 'installed registry'\n",
        },
    )
    _write(
        tmp_path / "out",
        {
            "fakelib/models/llama/__init__.py": "",
            "fakelib/models/llama/model.py": "WHO = 'generated'\n",
            "fakelib/models/mistral/__init__.py": "",
            "fakelib/models/mistral/model.py": "WHO = 'generated mistral'\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    finder = OverlayFinder([tmp_path / "out"], package="fakelib")
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    yield
    for name in [n for n in sys.modules if n == "fakelib" or n.startswith("fakelib.")]:
        del sys.modules[name]


def _who(module: str) -> str:
    return importlib.import_module(module).WHO


def test_generated_modules_win_and_the_rest_stays_installed(library) -> None:
    assert _who("fakelib.models.llama.model") == "generated"
    assert _who("fakelib.models.mistral.model") == "generated mistral"
    # A file the overlay lacks in a package it shadows comes from the installed package.
    assert _who("fakelib.models.llama.rope_utils") == "installed rope"
    assert _who("fakelib.registry") == "installed registry"


def test_other_packages_are_left_alone(tmp_path: Path) -> None:
    finder = OverlayFinder([tmp_path], package="fakelib")
    assert finder.find_spec("json") is None
    assert finder.find_spec("fakelib") is None  # the top package always comes from the library
