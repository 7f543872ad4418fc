from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests import hub_cache
from tests.fake_mobius import make_mobius_repo


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HF cache, offline: what a machine without Hub access sees."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


@pytest.fixture
def seeded(hf_cache: Path):
    """Seed fixture configs into the cache: ``seeded("Qwen/Qwen3-0.6B")`` returns the commit."""

    def seed(
        repo_id: str, config: bytes | None = None, files: dict[str, bytes] | None = None
    ) -> str:
        return hub_cache.seed(hf_cache, repo_id, config, files)

    return seed


@pytest.fixture
def cli_env(hf_cache: Path) -> dict[str, str]:
    """Environment for running the ``onboard`` console script in a subprocess, offline."""
    env = dict(os.environ)
    env.update(HF_HUB_CACHE=str(hf_cache), HF_HUB_OFFLINE="1", NO_COLOR="1", COLUMNS="160")
    return env


@pytest.fixture
def mobius_repo(tmp_path: Path) -> Path:
    return make_mobius_repo(tmp_path / "mobius")


@pytest.fixture(autouse=True)
def _installed_mobius_after_each_test():
    """A run into a mobius checkout imports that checkout's mobius, once per process, as the
    CLI does; a test runs in a shared process, so the checkout's is unloaded after it and the
    next test imports the installed one again."""
    path = list(sys.path)
    yield
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None) or ""
        if (name == "mobius" or name.startswith("mobius.")) and "site-packages" not in origin:
            del sys.modules[name]
    sys.path[:] = path
