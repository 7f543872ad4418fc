"""``onboard new --dry-run`` piped into ``git apply`` makes exactly the change a real run makes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fake_mobius import tree_snapshot
from tests.hub_cache import fixture_config
from tests.test_cli import onboard

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)


def test_a_piped_dry_run_is_a_patch_git_applies(cli_env, mobius_repo, tmp_path) -> None:
    model = str(fixture_config("Qwen/Qwen3-0.6B").parent)
    applied = tmp_path / "applied"
    shutil.copytree(mobius_repo, applied)
    _git(applied, "init", "-q")
    common = ("new", model, "--treat-as-new", "--name", "qwen3_onboarded", "--no-parity")

    dry = onboard(*common, "--repo", str(applied), "--dry-run", env=cli_env)
    assert dry.returncode == 0, dry.stderr
    assert not any(line.endswith(" ") for line in dry.stdout.splitlines() if line[:1] in "+-@")
    patch = tmp_path / "onboard.diff"
    patch.write_text(dry.stdout)
    done = _git(applied, "apply", "--verbose", str(patch))
    assert done.returncode == 0, done.stderr
    assert "_registry.py" in done.stderr  # an edit of a file the checkout has, not only new ones

    real = onboard(*common, "--repo", str(mobius_repo), env=cli_env)
    assert real.returncode == 0, real.stderr
    expected = {k: v for k, v in tree_snapshot(mobius_repo).items() if not k.startswith(".onboard")}
    got = {k: v for k, v in tree_snapshot(applied).items() if not k.startswith(".git/")}
    assert got == expected
