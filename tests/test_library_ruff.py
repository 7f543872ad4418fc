"""onboard's output passes the target library's own ruff, with the library's own settings.

mobius and AutoModel lint pull requests with ruff and their pyproject's settings (mobius: line
length 95, google docstrings, isort, pyflakes, ...; AutoModel: line length 120). CI cannot fetch
them, so the checkouts are laid out from the installed packages and the settings are the copies
onboard keeps (``onboard/data/ruff``); ruff is the installed one.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from onboard.codegen import _ruff_bin, library_ruff_config
from onboard.codemods._ordering import natural_key
from tests.fake_mobius import tree_snapshot
from tests.hub_cache import fixture_config
from tests.targets.automodel.conftest import installed_automodel
from tests.test_cli import onboard

MOBIUS = library_ruff_config("mobius")


def _ruff(
    *args: str, cwd: Path, stdin: str | None = None, config: Path = MOBIUS
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_ruff_bin(), *args, "--config", str(config), "--no-cache"],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def _findings(
    root: Path, *paths: str, stdin: str | None = None, config: Path = MOBIUS
) -> list[tuple[str, str, str]]:
    """(file, rule, message) for each finding, lines left out: the same finding in an edited
    file is the same one."""
    args = ("--stdin-filename", paths[0], "-") if stdin is not None else paths
    run = _ruff("check", "--output-format", "json", *args, cwd=root, stdin=stdin, config=config)
    assert run.returncode in (0, 1), run.stderr
    return sorted(
        (str(Path(f["filename"]).resolve().relative_to(root.resolve())), f["code"], f["message"])
        for f in json.loads(run.stdout)
    )


def test_the_kept_settings_catch_what_mobius_rejects(tmp_path: Path) -> None:
    """A shadowing import (F811), unsorted imports (I001), a docstring without a period (D415),
    a line over 95 columns left unformatted: the settings this test lints with see each."""
    bad = (
        '"""Models"""\n\nfrom mobius.models.qwen import Qwen3CausalLMModel\n'
        "from mobius.models.base import CausalLMModel\n"
        "from mobius.models.qwen3 import Qwen3CausalLMModel\n\n"
        f"__all__ = [{', '.join(repr(f'Model{i}') for i in range(12))}]\n"
    )
    codes = {code for _, code, _ in _findings(tmp_path, "x.py", stdin=bad)}
    assert {"F811", "I001", "D415"} <= codes
    unformatted = _ruff(
        "format", "--check", "--stdin-filename", "x.py", "-", cwd=tmp_path, stdin=bad
    )
    assert unformatted.returncode == 1


def test_treat_as_new_qwen3_passes_mobius_ruff(cli_env, mobius_repo, tmp_path) -> None:
    model = str(fixture_config("Qwen/Qwen3-0.6B").parent)
    args = (
        "new",
        model,
        "--repo",
        str(mobius_repo),
        "--treat-as-new",
        "--no-parity",
        "--hub-id",
        "Qwen/Qwen3-0.6B",
    )
    before = tree_snapshot(mobius_repo)
    pristine = tmp_path / "pristine"
    shutil.copytree(mobius_repo, pristine)
    run = onboard(*args, env=cli_env)
    assert run.returncode == 0, run.stderr
    after = tree_snapshot(mobius_repo)
    touched = sorted(p for p in after if p.endswith(".py") and after[p] != before.get(p))
    # beside mobius' own Qwen3CausalLMModel (models/qwen.py), not over it
    assert "src/mobius/models/qwen3_onboarded.py" in touched
    assert "src/mobius/models/__init__.py" in touched and "src/mobius/_registry.py" in touched

    # no finding the files did not have before (the trimmed test-config copy has its own)
    existed = [path for path in touched if path in before]
    assert _findings(mobius_repo, *touched) == _findings(pristine, *existed)
    formatted = _ruff("format", "--check", *touched, cwd=mobius_repo)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    exported = _all(mobius_repo / "src/mobius/models/__init__.py")
    at = exported.index("Qwen3OnboardedCausalLMModel")
    neighbours = [natural_key(name) for name in exported[at - 1 : at + 2]]
    assert neighbours == sorted(neighbours), exported[at - 1 : at + 2]

    assert onboard(*args, env=cli_env).returncode == 0
    assert tree_snapshot(mobius_repo) == after  # a second run changes nothing


def _all(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__":
            return [ast.literal_eval(element) for element in node.value.elts]  # type: ignore[attr-defined]
    pytest.fail("no __all__")


def test_treat_as_new_qwen3_passes_automodel_ruff(cli_env, tmp_path) -> None:
    """AutoModel has its own qwen3 package: the generated one goes beside it, lint-clean with
    AutoModel's settings (line length 120, isort, its docstring rules)."""
    repo = tmp_path / "Automodel"
    shutil.copytree(
        installed_automodel(), repo / "nemo_automodel", ignore=shutil.ignore_patterns("__pycache__")
    )
    model = str(fixture_config("Qwen/Qwen3-0.6B").parent)
    args = (
        "new",
        model,
        "--target",
        "automodel",
        "--repo",
        str(repo),
        "--treat-as-new",
        "--no-parity",
        "--hub-id",
        "Qwen/Qwen3-0.6B",
    )
    before = tree_snapshot(repo)
    pristine = tmp_path / "pristine"
    shutil.copytree(repo, pristine)
    run = onboard(*args, env=cli_env)
    assert run.returncode == 0, run.stderr
    after = tree_snapshot(repo)
    assert {p: after[p] for p in before if "models/qwen3/" in p} == {
        p: v for p, v in before.items() if "models/qwen3/" in p
    }  # the library's own package is untouched
    touched = sorted(p for p in after if p.endswith(".py") and after[p] != before.get(p))
    assert "nemo_automodel/components/models/qwen3_onboarded/model.py" in touched

    config = library_ruff_config("automodel")
    existed = [path for path in touched if path in before]
    assert _findings(repo, *touched, config=config) == _findings(pristine, *existed, config=config)
    formatted = _ruff("format", "--check", *touched, cwd=repo, config=config)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr

    assert onboard(*args, env=cli_env).returncode == 0
    assert tree_snapshot(repo) == after  # a second run changes nothing
