"""The console script end to end: exit codes, one-line errors, JSON, nothing half-written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from onboard.errors import ExitCode
from tests.fake_mobius import tree_snapshot
from tests.hub_cache import fixture_config


def onboard(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onboard", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _one_line_error(run: subprocess.CompletedProcess[str], code: ExitCode, fragment: str) -> None:
    assert run.returncode == code, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0]
    assert "Traceback" not in run.stderr


def test_new_already_supported_model_offline_passes_parity(cli_env, seeded, tmp_path) -> None:
    seeded("Qwen/Qwen3-0.6B")
    work = tmp_path / "work"
    work.mkdir()
    run = onboard("new", "Qwen/Qwen3-0.6B", "--json", env=cli_env, cwd=work)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["origin"] == "cache"
    assert report["proposal"]["already_supported"] == "Qwen3CausalLMModel"
    assert report["files"] is None and not list(work.iterdir())  # nothing to generate
    parity = report["parity"]
    assert parity["passed"] and {c["provider"] for c in parity["checks"]} == {"default", "cpu"}
    assert report["spec"]["text"]["attention"]["qk_norm"] == "per_head"


def test_bundled_snapshot_notice_and_human_output(cli_env, tmp_path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run = onboard("new", "Qwen/Qwen3-0.6B", "--treat-as-new", "--dry-run", env=cli_env, cwd=work)
    assert run.returncode == 0, run.stderr
    assert "notice:" in run.stdout and "bundled snapshot" in run.stdout
    assert "closest variants" in run.stdout and "CausalLMModel" in run.stdout
    assert "+            # q_norm / k_norm on each head\n" in run.stdout  # diff, no HF line
    assert "parity passed" in run.stdout
    assert not list(work.iterdir())  # dry run


def test_repo_mode_runs_parity_against_the_checkout(cli_env, mobius_repo, tmp_path) -> None:
    model = str(fixture_config("google/gemma-3-1b-it").parent)
    args = ("new", model, "--repo", str(mobius_repo), "--treat-as-new", "--json")
    # gemma3_text.py is mobius' own, which onboard did not write: the generated module goes
    # beside it under a new name, never over it, and is no conflict
    own = mobius_repo / "src/mobius/models/gemma3_text.py"
    before = own.read_bytes()
    run = onboard(*args, env=cli_env)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["parity"]["passed"]
    assert [b["id"] for b in report["parity"]["target_bugs"]] == ["T8"]
    actions = {f["path"]: f["action"] for f in report["files"]["files"]}
    assert actions["src/mobius/models/gemma3_text_onboarded.py"] == "create"
    assert "src/mobius/models/gemma3_text.py" not in actions
    assert own.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (("new", "nobody/no-such-model"), ExitCode.BAD_INPUT, "not in the HF cache"),
        (("new", "not a model id!"), ExitCode.BAD_INPUT, "neither an existing path"),
        (("inspect", "nobody/nothing"), ExitCode.BAD_INPUT, "HF_HUB_OFFLINE is set"),
        (("new", "Qwen/Qwen3-0.6B", "--target", "nope"), ExitCode.BAD_INPUT, "unknown target"),
        (("new", "Qwen/Qwen3-0.6B", "--device", "tpu"), ExitCode.BAD_INPUT, "--device must be"),
        (("new", "Qwen/Qwen3-0.6B", "--bogus-flag"), ExitCode.BAD_INPUT, "No such option"),
    ],
)
def test_bad_input_is_one_line(cli_env, tmp_path, args, code, fragment) -> None:
    _one_line_error(onboard(*args, env=cli_env, cwd=tmp_path), code, fragment)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{oops", "is not valid JSON"),
        ('{"hidden_size": 64}', "has no model_type"),
        ('{"model_type": "never_published_arch"}', "not known to transformers"),
        ('{"model_type": "t5", "is_encoder_decoder": true}', "out of scope"),
        ('{"model_type": "qwen3", "hidden_size": -1}', "hidden_size must be a positive integer"),
    ],
)
def test_bad_configs_are_one_line(cli_env, tmp_path, content, fragment) -> None:
    (tmp_path / "config.json").write_text(content)
    out = tmp_path / "out"
    _one_line_error(
        onboard("new", str(tmp_path), "--out", str(out), env=cli_env), ExitCode.BAD_INPUT, fragment
    )
    assert not out.exists()


def test_a_feature_onboard_does_not_generate_is_one_line(cli_env, tmp_path) -> None:
    # Per-layer attribute overrides (Gemma 4's per_layer_config): the spec holds one value per
    # attribute, so onboard refuses before anything is built or written.
    config = json.loads(fixture_config("Qwen/Qwen3-0.6B").read_text())
    config["per_layer_config"] = {"0": {"sliding_window": 8}}
    folder = tmp_path / "models" / "override"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "o"
    run = onboard("new", str(folder), "--treat-as-new", "--out", str(out), env=cli_env)
    _one_line_error(run, ExitCode.UNSUPPORTED, "per-layer attribute overrides")
    assert not out.exists()


def test_bad_repo_writes_nothing(cli_env, mobius_repo, tmp_path) -> None:
    model = str(fixture_config("Qwen/Qwen3-0.6B").parent)
    run = onboard("new", model, "--repo", str(tmp_path / "missing"), env=cli_env)
    _one_line_error(run, ExitCode.BAD_INPUT, "is not a mobius checkout")
    registry = mobius_repo / "src/mobius/_registry.py"
    registry.write_text(registry.read_text() + "\nx = (\n")
    before = tree_snapshot(mobius_repo)
    run = onboard("new", model, "--repo", str(mobius_repo), "--treat-as-new", env=cli_env)
    _one_line_error(run, ExitCode.BAD_INPUT, "does not parse")
    assert tree_snapshot(mobius_repo) == before


def test_help_and_version(cli_env) -> None:
    assert onboard("--version", env=cli_env).stdout.strip().startswith("onboard ")
    help_text = onboard("--help", env=cli_env).stdout
    for command in ("new", "inspect", "parity", "targets"):
        assert command in help_text
    for command in ("new", "inspect", "diff", "parity", "check", "targets"):
        text = onboard(command, "--help", env=cli_env).stdout
        assert "Examples" in text and f"onboard {command} " in text, command


def test_diff_of_two_model_types(cli_env) -> None:
    run = onboard("diff", "qwen3", "llama", "--json", env=cli_env)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    differing = [row["feature"] for row in report["features"] if row["differs"]]
    assert differing == ["attention.qk_norm"]
    assert report["common_ancestor"] == "llama"
    # Qwen3's window is off in its default config, behind use_sliding_window
    capabilities = {row["feature"]: row for row in report["capability_differences"]}
    window = capabilities["attention.sliding_window"]
    assert (window["left"], window["right"]) == ("per_layer with use_sliding_window=True", "-")
    flag = next(f for f in report["flags"]["left"] if f["key"] == "use_sliding_window")
    assert flag["evidence"][0].startswith("configuration_qwen3.py:")
    assert report["unresolved"] == {"left": [], "right": []}


@pytest.mark.parametrize("command", ["new", "parity"])
def test_a_library_conversion_bug_ends_in_a_report_and_parity_failed(
    cli_env, seeded, tmp_path, command
) -> None:
    """DeepSeek-V3 is registered in mobius, whose conversion drops per-expert tensors (M4): the
    run reports that bug and exits 1 (parity failed), not with an internal error."""
    seeded("deepseek-ai/DeepSeek-V3")
    run = onboard(command, "deepseek-ai/DeepSeek-V3", "--json", env=cli_env, cwd=tmp_path)
    assert run.returncode == ExitCode.FAILED, run.stderr
    report = json.loads(run.stdout)
    parity = report.get("parity", report)
    assert not parity["passed"]
    assert [b["id"] for b in parity["target_bugs"]] == ["M4"]
    assert "experts.0." in parity["target_bugs"][0]["evidence"]


@pytest.mark.parametrize("name", ["../../x", "class", "Qwen3", "my-model"])
def test_a_name_that_is_no_module_name_is_refused_not_renamed(cli_env, tmp_path, name) -> None:
    out = tmp_path / "out"
    run = onboard("new", "Qwen/Qwen3-0.6B", "--name", name, "--out", str(out), env=cli_env)
    _one_line_error(run, ExitCode.BAD_INPUT, "is not a module name")
    assert not out.exists()


@pytest.mark.parametrize("hub_id", [None, "acme/Qwen3-Tiny"])
def test_a_local_checkpoint_path_never_reaches_library_files(cli_env, tmp_path, hub_id) -> None:
    folder = tmp_path / "deep" / "private" / "my-ckpt"
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes(fixture_config("Qwen/Qwen3-0.6B").read_bytes())
    out = tmp_path / "out"
    args = ["new", str(folder), "--treat-as-new", "--no-parity", "--out", str(out)]
    run = onboard(*args, *(["--hub-id", hub_id] if hub_id else []), env=cli_env)
    assert run.returncode == 0, run.stderr
    library_files = [p for p in out.rglob("*") if p.is_file() and ".onboard" not in p.parts]
    assert library_files
    for path in library_files:
        if path.name not in ("ONBOARD.md",):
            assert str(tmp_path) not in path.read_text(), path
    case = (out / "testdata/cases/causal-lm/qwen3.yaml").read_text()
    assert f'model_id: "{hub_id or "my-ckpt"}"' in case
    if hub_id is None:
        assert "pass --hub-id org/name" in run.stdout
    bad = onboard(*args, "--hub-id", "../x", env=cli_env)
    _one_line_error(bad, ExitCode.BAD_INPUT, "is not a Hub model id")


def test_hub_id_names_the_test_model_in_a_checkout(cli_env, mobius_repo, tmp_path) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_bytes(fixture_config("Qwen/Qwen3-0.6B").read_bytes())
    args = ["new", str(folder), "--repo", str(mobius_repo), "--treat-as-new", "--no-parity"]
    run = onboard(*args, "--hub-id", "acme/Qwen3-Tiny", env=cli_env)
    assert run.returncode == 0, run.stderr
    registry = (mobius_repo / "src/mobius/_registry.py").read_text()
    assert '"qwen3": "acme/Qwen3-Tiny"' in registry


def test_no_parity_says_the_flags_its_code_reads_are_unproved(cli_env, tmp_path) -> None:
    """--no-parity writes what a parity run tries first, the code reading Qwen3's flags, and
    says that no parity run tried them flipped (a failing one would fall back)."""
    out = tmp_path / "out"
    args = ["new", "Qwen/Qwen3-0.6B", "--treat-as-new", "--no-parity", "--out", str(out)]
    run = onboard(*args, "--json", env=cli_env, cwd=tmp_path)  # notices: printed as JSON
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["parity"] is None
    unproved = [n for n in report["notices"] if "unproved (--no-parity)" in n]
    assert len(unproved) == 1, report["notices"]
    assert "attention_bias=True, use_sliding_window=True" in unproved[0]
    assert "was generated for" not in (out / "src/mobius/models/qwen3.py").read_text()
