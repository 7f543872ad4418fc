"""The pre-commit hook, run by pre-commit itself on a throwaway git repository.

The published hook (``.pre-commit-hooks.yaml``) is ``language: python``, which pre-commit would
install from the network; here the same id, ``files`` regex and options run as a ``repo: local``
``language: system`` hook calling this interpreter's ``python -m onboard.lint``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.lint.repos import mobius_files, write_tree

ROOT = Path(__file__).parents[2]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
INLINE = (
    '"llama": ModelRegistration(CausalLMModel),\n'
    '"qwen3": ModelRegistration(Qwen3CausalLMModel, family="qwen"),'
)


def pre_commit() -> str:
    beside = Path(sys.executable).with_name("pre-commit")
    found = str(beside) if beside.exists() else shutil.which("pre-commit")
    if found is None:
        pytest.skip("pre-commit is not installed (pip install pre-commit)")
    return found


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def test_manifest_declares_the_onboard_check_hook() -> None:
    [hook] = yaml.safe_load(MANIFEST.read_text())
    assert hook["id"] == "onboard-check"
    assert (hook["entry"], hook["language"], hook["pass_filenames"]) == (
        "onboard check",
        "python",
        True,
    )
    done = run([pre_commit(), "validate-manifest", str(MANIFEST)], ROOT, dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr


def test_hook_blocks_a_bad_registry_and_passes_once_fixed(tmp_path: Path) -> None:
    executable = pre_commit()
    [hook] = yaml.safe_load(MANIFEST.read_text())
    repo = write_tree(tmp_path / "repo", {**mobius_files(INLINE), "README.md": "# mobius\n"})
    local = {
        "id": hook["id"],
        "name": hook["name"],
        "entry": f"{sys.executable} -m onboard.lint",
        "language": "system",
        "pass_filenames": hook["pass_filenames"],
        "require_serial": hook["require_serial"],
        "files": hook["files"],
    }
    config = {"repos": [{"repo": "local", "hooks": [local]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1"}
    for args in (["git", "init", "-q"], ["git", "add", "-A"]):
        assert run(args, repo, env).returncode == 0

    blocked = run([executable, "run", "--all-files"], repo, env)
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert "src/mobius/_registry.py:" in blocked.stdout
    assert "OB201 family=\"qwen\" in the 'qwen3' registration is dropped" in blocked.stdout

    # A change to a model file alone does not re-report registry findings it does not touch.
    unrelated = run([executable, "run", "--files", "src/mobius/models/qwen.py"], repo, env)
    assert unrelated.returncode == 0, unrelated.stdout
    skipped = run([executable, "run", "--files", "README.md"], repo, env)
    assert skipped.returncode == 0 and "no files to check" in skipped.stdout

    fixed = run([sys.executable, "-m", "onboard.lint", "--fix"], repo, env)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert run(["git", "add", "-A"], repo, env).returncode == 0
    passed = run([executable, "run", "--all-files"], repo, env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
