"""``onboard new`` / ``onboard parity`` on remote-code checkpoints: generation without trust,
parity only with ``--trust-remote-code`` and only for the code that was analysed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.errors import ExitCode
from tests.remote.runs import trusted_new
from tests.test_cli import _one_line_error, onboard

MODEL_FILE = "src/mobius/models/{name}.py"


def _tamper(folder: Path, name: str) -> None:
    modeling = folder / f"modeling_{name}.py"
    modeling.write_text(modeling.read_text() + "\n# an innocent-looking edit\n")


def test_without_trust_files_are_generated_and_parity_is_refused(
    cli_env, checkpoint, tmp_path
) -> None:
    folder = checkpoint("ember-tiny")
    out = tmp_path / "out"
    run = onboard("new", str(folder), "--out", str(out), env=cli_env)
    _one_line_error(run, ExitCode.REFUSED, "--trust-remote-code")
    assert "parity refused" in run.stderr and "modeling_ember.py" in run.stderr
    assert (out / MODEL_FILE.format(name="ember")).is_file()
    answers = json.loads((out / ".onboard" / "ember.json").read_text())
    assert set(answers["remote_code"]) == {"configuration_ember.py", "modeling_ember.py"}
    case = (out / "testdata/cases/causal-lm/ember.yaml").read_text()
    assert "trust_remote_code: true" in case
    readme = (out / "ONBOARD.md").read_text()
    assert answers["remote_code"]["modeling_ember.py"] in readme


@pytest.mark.parametrize("name", ["ember", "quill"])
@pytest.mark.slow
def test_trusted_parity_passes_with_zero_hand_edits(cli_env, checkpoint, tmp_path, name) -> None:
    folder = checkpoint(f"{name}-tiny")
    report = trusted_new(folder, tmp_path / "out", cli_env)
    parity = report["parity"]
    assert parity["passed"] and report["refused"] is None
    default = [c for c in parity["checks"] if c["provider"] == "default"]
    assert {c["status"] for c in default} == {"pass"}
    assert {c["name"] for c in default} >= {"weights", "prefill", "kv-cache", "decode"}


def test_code_changed_since_onboarding_is_refused(cli_env, checkpoint, tmp_path) -> None:
    folder = checkpoint("quill-tiny")
    out = tmp_path / "out"
    first = onboard("new", str(folder), "--out", str(out), "--no-parity", env=cli_env)
    assert first.returncode == 0, first.stderr
    _tamper(folder, "quill")
    run = onboard("new", str(folder), "--out", str(out), "--trust-remote-code", env=cli_env)
    _one_line_error(run, ExitCode.REFUSED, "modeling_quill.py changed since it was analysed")
    generated = out / MODEL_FILE.format(name="quill")
    run = onboard(
        "parity", str(folder), "--generated", str(generated), "--trust-remote-code", env=cli_env
    )
    _one_line_error(run, ExitCode.REFUSED, "modeling_quill.py changed since it was analysed")


def test_parity_command_needs_trust_and_checks_the_header(cli_env, checkpoint, tmp_path) -> None:
    folder = checkpoint("quill-tiny")
    out = tmp_path / "out"
    assert (
        onboard("new", str(folder), "--out", str(out), "--no-parity", env=cli_env).returncode == 0
    )
    generated = out / MODEL_FILE.format(name="quill")
    run = onboard("parity", str(folder), "--generated", str(generated), env=cli_env)
    _one_line_error(run, ExitCode.REFUSED, "--trust-remote-code")
    run = onboard(
        "parity", str(folder), "--generated", str(generated), "--trust-remote-code", env=cli_env
    )
    assert run.returncode == 0, run.stderr
    assert "parity passed" in run.stdout


def test_automodel_names_what_it_cannot_express(cli_env, checkpoint, tmp_path) -> None:
    folder = checkpoint("quill-tiny")
    out = tmp_path / "out"
    run = onboard("new", str(folder), "--target", "automodel", "--out", str(out), env=cli_env)
    assert run.returncode == ExitCode.UNSUPPORTED, run.stderr
    assert "exists only as Hub remote code (modeling_quill.py)" in run.stderr
    assert not out.exists()
