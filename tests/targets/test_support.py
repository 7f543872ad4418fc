"""Each target's packages and transformers range: one line and exit 7 where they are missing,
the AutoModel pin, newer releases for mobius, the same ranges in pyproject.toml's extras."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from onboard import cli
from onboard.errors import EnvironmentFailure, ExitCode
from onboard.targets import support
from onboard.targets.support import SUPPORT, readiness, require_target

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
HEAVY = {"torch", "transformers", "onnxruntime", "mobius-onnx", "nemo-automodel"}


def _fake(monkeypatch: pytest.MonkeyPatch, transformers: str, missing: tuple[str, ...] = ()):
    monkeypatch.setattr(support, "installed_version", lambda _: transformers)
    monkeypatch.setattr(support, "missing_modules", lambda names: tuple(set(names) & {*missing}))


def _extra_requirements(project: dict, extra: str) -> list[Requirement]:
    """The extra's requirements, with the ``onboard[...]`` extras it names expanded."""
    found = []
    for text in project["optional-dependencies"][extra]:
        requirement = Requirement(text)
        if requirement.name == project["name"]:
            found += [r for e in requirement.extras for r in _extra_requirements(project, e)]
        else:
            found.append(requirement)
    return found


def test_pyproject_extras_carry_the_declared_transformers_ranges() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    base = {Requirement(r).name for r in project["dependencies"]}
    assert not base & HEAVY
    probes = [Version(v) for v in ("5.17.0", "5.18.0", "5.18.1", "5.25.0", "6.0.0")]
    for name, declared in SUPPORT.items():
        pins = [r.specifier for r in _extra_requirements(project, name) if r.name == "transformers"]
        assert pins, name
        pip_allows = [all(v in s for s in pins) for v in probes]
        ours = [v in SpecifierSet(declared.transformers) for v in probes]
        assert pip_allows == ours, name


def test_mobius_runs_on_newer_transformers_and_automodel_refuses(monkeypatch) -> None:
    _fake(monkeypatch, "5.25.0")
    assert readiness(SUPPORT["mobius"]).problem is None
    assert readiness(SUPPORT["mobius"]).notice is None  # 5.25.0 is tested
    with pytest.raises(EnvironmentFailure) as refused:
        require_target("automodel")
    assert refused.value.exit_code == ExitCode.ENVIRONMENT
    message = refused.value.message
    assert "transformers==5.18.0 (nemo-automodel 0.7.0 pins it), and 5.25.0 is installed" in message
    assert message.endswith("pip install --no-deps nemo-automodel==0.7.0")
    _fake(monkeypatch, "5.26.0")
    assert "newer than the newest release" in (require_target("mobius").notice or "")
    _fake(monkeypatch, "5.17.0")
    assert "needs transformers>=5.18.0" in (readiness(SUPPORT["mobius"]).problem or "")


def test_missing_packages_name_the_pip_command(monkeypatch) -> None:
    _fake(monkeypatch, "5.18.0", missing=("onnxruntime", "mobius"))
    problem = readiness(SUPPORT["mobius"]).problem or ""
    assert re.search(r"needs (onnxruntime, mobius|mobius, onnxruntime), which", problem)
    assert problem.endswith("pip install 'onboard[mobius]'")
    assert readiness(SUPPORT["automodel"]).problem is None


def _main(monkeypatch, capsys, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["onboard", *argv])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ("new", "Qwen/Qwen3-0.6B"),
        ("inspect", "Qwen/Qwen3-0.6B", "-t", "automodel"),
        ("parity", "Qwen/Qwen3-0.6B"),
        ("diff", "qwen3", "llama"),
    ],
)
def test_commands_refuse_in_one_line_without_torch(monkeypatch, capsys, argv) -> None:
    _fake(monkeypatch, "5.18.0", missing=("torch",))
    code, out, err = _main(monkeypatch, capsys, *argv)
    assert code == ExitCode.ENVIRONMENT
    [line] = err.strip().splitlines()
    assert line.startswith("error: ") and "needs torch" in line and "pip install 'onboard[" in line
    assert out == ""


def test_targets_json_names_each_range(monkeypatch, capsys) -> None:
    _fake(monkeypatch, "5.25.0")
    code, out, _ = _main(monkeypatch, capsys, "targets", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)["targets"]}
    assert rows["automodel"]["transformers"]["supported"] == "==5.18.0"
    assert "5.25.0 is installed" in rows["automodel"]["error"]
    assert rows["mobius"]["transformers"]["installed"] == "5.25.0"
    assert rows["mobius"]["variants"] > 0 and "error" not in rows["mobius"]
