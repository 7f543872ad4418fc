"""check(): layouts, errors as one line, FILES restriction, JSON, text output, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from onboard.errors import BadInputError, ExitCode, TargetRepoError
from onboard.lint import check, main, print_findings, to_json
from tests.lint.conftest import MakeRepo, line_in
from tests.lint.repos import MOBIUS_REGISTRY, automodel_files, mobius_files, write_tree

BAD = (
    '"llama": ModelRegistration(CausalLMModel, family="meta"),\n'
    '"qwen-3": ModelRegistration(Qwen3CausalLMModel),'
)


def test_target_detected_from_the_layout(mobius_repo: MakeRepo, automodel_repo: MakeRepo) -> None:
    assert check(mobius_repo()).target == "mobius"
    assert check(automodel_repo()).target == "automodel"


def test_bad_repositories_are_one_line_errors(tmp_path: Path, mobius_repo: MakeRepo) -> None:
    with pytest.raises(TargetRepoError, match="is not a directory"):
        check(tmp_path / "nowhere")
    with pytest.raises(TargetRepoError, match=r"is not a target checkout: no src/mobius/_registry"):
        check(tmp_path)
    with pytest.raises(TargetRepoError, match="is not a automodel checkout"):
        check(mobius_repo(), target="automodel")
    broken = mobius_repo(extra={MOBIUS_REGISTRY: "_REGISTRATIONS = {\n"})
    with pytest.raises(TargetRepoError, match=r"src/mobius/_registry.py cannot be read: line 1"):
        check(broken)
    no_table = mobius_repo(extra={MOBIUS_REGISTRY: "REGISTRY = {}\n"})
    with pytest.raises(TargetRepoError, match="has no _REGISTRATIONS literal"):
        check(no_table)
    both = write_tree(tmp_path / "both", {**mobius_files(), **automodel_files()})
    with pytest.raises(BadInputError, match="holds several targets; pass --target"):
        check(both)
    assert check(both, target="automodel").target == "automodel"
    with pytest.raises(BadInputError, match="unknown target 'onnx'"):
        check(both, target="onnx")
    with pytest.raises(BadInputError, match="are both installed; name one with --target"):
        check(None)


def test_installed_without_target_reads_the_one_library_installed(monkeypatch) -> None:
    import importlib.util

    from onboard.lint import layout

    real = importlib.util.find_spec
    monkeypatch.setattr(
        layout.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "nemo_automodel" else real(name, *a),
    )
    assert check(None).target == "mobius"


def test_installed_package_reads_like_a_checkout() -> None:
    result = check(None, target="mobius", select=["OB104"])
    assert result.findings == ()
    assert result.root.endswith("site-packages/mobius")


def test_files_restrict_findings_to_the_files_and_what_they_depend_on(
    mobius_repo: MakeRepo,
) -> None:
    repo = mobius_repo(BAD, extra={"tests/_test_configs.py": "X_CONFIGS = []\n"})
    everything = check(repo, select=["OB201", "OB103", "OB401"])
    assert [f.code for f in everything.findings] == ["OB201", "OB401", "OB103", "OB401"]
    assert check(repo, files=[Path("README.md")], select=["ALL"]).findings == ()
    registry = check(repo, files=[Path(MOBIUS_REGISTRY)], select=["OB201", "OB103", "OB401"])
    assert registry.findings == everything.findings
    configs = check(repo, files=[Path("tests/_test_configs.py")], select=["OB201", "OB401"])
    assert [f.code for f in configs.findings] == ["OB401", "OB401"]
    absolute = check(repo, files=[repo / "tests/_test_configs.py"], select=["OB401"])
    assert absolute.findings == configs.findings


def test_json_shape(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(BAD)
    data = to_json(check(repo, select=["OB201", "OB103"]))
    assert json.loads(json.dumps(data)) == data
    assert set(data) == {
        "version",
        "target",
        "root",
        "rules",
        "findings",
        "fixed",
        "skipped",
        "summary",
        "since",
        "exit_code",
    }
    assert (data["version"], data["target"], data["root"]) == (1, "mobius", str(repo))
    assert data["rules"] == ["OB103", "OB201"]
    assert data["summary"] == {"errors": 1, "warnings": 1, "fixed": 0, "not_shown": 0}
    assert data["since"] is None
    assert data["exit_code"] == 1
    first = data["findings"][0]
    assert first == {
        "code": "OB201",
        "name": "ignored-inline-registration-option",
        "severity": "error",
        "path": MOBIUS_REGISTRY,
        "line": line_in(repo / MOBIUS_REGISTRY, 'family="meta"'),
        "message": first["message"],
        "fixable": False,
    }


def test_text_output_is_path_line_code_message(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(BAD)
    console = Console(record=True, width=400, color_system=None)
    print_findings(check(repo, select=["OB201", "OB103"]), console)
    lines = console.export_text().splitlines()
    line = line_in(repo / MOBIUS_REGISTRY, "qwen-3")
    assert lines[1].startswith(f"{MOBIUS_REGISTRY}:{line}: OB103 'qwen-3' is not a model_type")
    assert lines[-1] == "Found 1 error and 1 warning."
    console = Console(record=True, width=400, color_system=None)
    print_findings(check(repo, select=["OB104"]), console)
    assert console.export_text().strip() == "All checks passed!"


def run_main(*argv: str) -> int:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    return exited.value.code


def test_exit_codes(mobius_repo: MakeRepo, capsys: pytest.CaptureFixture[str]) -> None:
    repo = str(mobius_repo(BAD))
    assert run_main("--repo", repo) == ExitCode.FAILED
    assert run_main("--repo", repo, "--ignore", "OB201") == ExitCode.OK  # warnings only
    assert run_main("--repo", repo, "--select", "OB9") == ExitCode.BAD_INPUT
    assert run_main("--repo", repo + "/missing") == ExitCode.BAD_INPUT
    assert run_main("--repo", repo, "--bogus") == ExitCode.BAD_INPUT  # argparse usage error
    assert run_main("--installed", "--repo", repo) == ExitCode.BAD_INPUT
    assert run_main("--explain", "OB101") == ExitCode.OK
    assert run_main("--show-rules") == ExitCode.OK
    err = capsys.readouterr().err
    assert "error: unknown rule selector 'OB9'" in err
    assert "error: --installed and --repo are exclusive" in err


def test_json_on_stdout_from_the_module_entry_point(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(BAD)
    done = subprocess.run(
        [sys.executable, "-m", "onboard.lint", "--json", "--select", "OB201"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert [f["code"] for f in json.loads(done.stdout)["findings"]] == ["OB201"]


def test_no_torch_or_transformers_import() -> None:
    """The linter stays static: a cold run must not import torch, transformers or the target."""
    code = (
        "import sys\n"
        "from onboard.lint import check\n"
        "check(None, target='mobius')\n"
        "check(None, target='automodel')\n"
        "heavy = [m for m in ('torch', 'transformers', 'mobius', 'nemo_automodel', 'onnx')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
