"""One exit code per outcome class, each provoked for real, and one schema-valid JSON document for
every outcome of every command (README, "Exit codes"; ``onboard/data/output.schema.json``)."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest

from onboard import pipeline
from onboard.errors import OUTCOMES, ExitCode
from tests.hub_cache import fixture_config
from tests.lint.repos import MOBIUS_REGISTRY, mobius_files, write_tree
from tests.lint.test_runner import BAD as BAD_REGISTRY
from tests.test_cli import onboard

SCHEMA = json.loads((Path(pipeline.__file__).parent / "data/output.schema.json").read_text())
REMOTE = Path(__file__).parent / "fixtures" / "remote"
QWEN3 = str(fixture_config("Qwen/Qwen3-0.6B").parent)


def valid_document(stdout: str, code: int, command: str) -> dict:
    """Exactly one JSON document, valid against the schema, telling the process's exit code."""
    document = json.loads(stdout)  # fails on none or on two
    jsonschema.validate(document, SCHEMA)
    assert document["exit_code"] == code and document["outcome"] == OUTCOMES[ExitCode(code)]
    assert document["command"] == command
    return document


def test_every_exit_code_has_an_outcome_and_the_readme_documents_it() -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    table = readme[readme.index("## Exit codes") :]
    for code in ExitCode:
        assert f"| {int(code)} | {OUTCOMES[code]}" in table, code


def _conflict(tmp_path: Path, env: dict[str, str]) -> list[str]:
    out = tmp_path / "conflict"
    first = onboard("new", QWEN3, "--treat-as-new", "--no-parity", "--out", str(out), env=env)
    assert first.returncode == 0, first.stderr
    model = out / "src/mobius/models/qwen3.py"
    model.write_text(model.read_text() + "\n# edited by hand\n")
    return ["new", QWEN3, "--treat-as-new", "--no-parity", "--out", str(out)]


def _unsupported(tmp_path: Path, env: dict[str, str]) -> list[str]:
    config = json.loads(fixture_config("Qwen/Qwen3-0.6B").read_text())
    config["per_layer_config"] = {"0": {"sliding_window": 8}}
    folder = tmp_path / "override"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return ["new", str(folder), "--treat-as-new", "--out", str(tmp_path / "o")]


def _failed_lint(tmp_path: Path, env: dict[str, str]) -> list[str]:
    repo = tmp_path / "lint"
    write_tree(repo, mobius_files(BAD_REGISTRY))
    assert (repo / MOBIUS_REGISTRY).is_file()
    return ["check", "--repo", str(repo)]


def _refused(tmp_path: Path, env: dict[str, str]) -> list[str]:
    folder = tmp_path / "ember-tiny"
    shutil.copytree(REMOTE / "ember-tiny", folder)
    return ["new", str(folder), "--out", str(tmp_path / "o")]


def _remote_code_failed(tmp_path: Path, env: dict[str, str]) -> list[str]:
    """The checkpoint's code cannot import here (as code needing flash_attn cannot on CPU)."""
    folder = tmp_path / "ember-tiny"
    shutil.copytree(REMOTE / "ember-tiny", folder)
    modeling = folder / "modeling_ember.py"
    modeling.write_text(modeling.read_text() + "\nimport flash_attn_is_not_installed_here\n")
    return ["new", str(folder), "--trust-remote-code", "--out", str(tmp_path / "o")]


CASES = {
    "ok": (lambda tmp, env: ["targets"], ExitCode.OK),
    "failed": (_failed_lint, ExitCode.FAILED),
    "bad_input": (lambda tmp, env: ["new", "no-such-org/no-such-model"], ExitCode.BAD_INPUT),
    "usage": (lambda tmp, env: ["new", QWEN3, "--bogus"], ExitCode.BAD_INPUT),
    "conflict": (_conflict, ExitCode.CONFLICT),
    "unsupported": (_unsupported, ExitCode.UNSUPPORTED),
    "refused": (_refused, ExitCode.REFUSED),
    "remote_code_failed": (_remote_code_failed, ExitCode.REMOTE_CODE_FAILED),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_outcome_exit_code_and_json(case: str, cli_env, tmp_path: Path) -> None:
    make_args, code = CASES[case]
    args = make_args(tmp_path, cli_env)
    human = onboard(*args, env=cli_env, cwd=tmp_path)
    assert human.returncode == code, human.stderr
    assert "Traceback" not in human.stderr
    if code not in (ExitCode.OK, ExitCode.FAILED):
        assert human.stderr.strip().splitlines()[-1].startswith("error: ")
    if case == "conflict":  # the first run left nothing else to provoke; run it again as JSON
        args = _conflict(tmp_path / "again", cli_env)
    if case in ("refused", "remote_code_failed"):  # a fresh copy: nothing of the first run
        shutil.rmtree(tmp_path / "o", ignore_errors=True)
    run = onboard(*args, "--json", env=cli_env, cwd=tmp_path)
    assert run.returncode == code, run.stderr
    document = valid_document(run.stdout, code, args[0])
    if code == ExitCode.REMOTE_CODE_FAILED:
        assert "flash_attn_is_not_installed_here" in document["error"]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``onboard`` in this process, so a test can make the machine or onboard itself fail."""
    from onboard.cli import main

    saved = sys.argv
    sys.argv = ["onboard", *argv]
    try:
        with pytest.raises(SystemExit) as exited:
            main()
    finally:
        sys.argv = saved
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def test_an_unwritable_output_folder_is_an_environment_failure_before_parity(
    hf_cache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from onboard.targets.mobius import TARGET

    def parity(*args, **kwargs):
        raise AssertionError("parity ran before the output folder was checked")

    monkeypatch.setattr(pipeline.os, "access", lambda path, mode: False)
    monkeypatch.setattr(type(TARGET), "parity", parity)
    out = tmp_path / "out"
    argv = ["new", QWEN3, "--treat-as-new", "--out", str(out), "--json"]
    code, stdout, stderr = run_main(argv, capsys)
    assert code == ExitCode.ENVIRONMENT, stderr
    assert "is not writable" in valid_document(stdout, code, "new")["error"]
    assert not out.exists()


@pytest.mark.parametrize(
    ("raised", "code"),
    [(RuntimeError("a bug in onboard"), ExitCode.INTERNAL), (KeyboardInterrupt(), 130)],
)
def test_a_bug_and_an_interrupt_have_their_own_codes(
    raised: BaseException, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    def entry_points(**kwargs):
        raise raised

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    exit_code, stdout, stderr = run_main(["targets", "--json"], capsys)
    assert exit_code == code
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    document = valid_document(stdout, code, "targets")
    if code == ExitCode.INTERNAL:
        log = Path(document["log"])
        assert log.parent == tmp_path / "cache/onboard/logs"
        assert "RuntimeError: a bug in onboard" in log.read_text()
        assert str(log) in stderr


def test_json_for_every_command_that_succeeds(cli_env, tmp_path: Path) -> None:
    runs = {
        "inspect": ["inspect", QWEN3],
        "diff": ["diff", "qwen3", "llama"],
        "check": ["check", "--show-rules"],
        "new": ["new", QWEN3, "--treat-as-new", "--no-parity", "--out", str(tmp_path / "n")],
    }
    for command, args in runs.items():
        run = onboard(*args, "--json", env=cli_env, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        valid_document(run.stdout, 0, command)
    explained = onboard("check", "--explain", "OB402", "--json", env=cli_env, cwd=tmp_path)
    assert valid_document(explained.stdout, 0, "check")["rule"]["code"] == "OB402"


def test_a_reference_that_fails_on_its_own_is_unsupported_not_a_bug(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Qwen3-Next with no attention layer (found by the config fuzz): transformers' cache cannot
    report its length, so HF's own forward raises during parity. That is exit 4 with HF's reason,
    not exit 8, and nothing is written."""
    config = json.loads(fixture_config("Qwen/Qwen3-Next-80B-A3B-Instruct").read_text())
    config["full_attention_interval"] = 1703727
    folder = tmp_path / "no-attention"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    code, _, err = run_main(["new", str(folder), "--out", str(out)], capsys)
    assert code == ExitCode.UNSUPPORTED, err
    assert "does not run with a cache" in err and "get_seq_length" in err
    assert not out.exists()
