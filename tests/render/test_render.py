"""Rendering decides every action up front and writes all files or none."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from pathlib import Path

import pytest
from rich.console import Console

from onboard.errors import ConflictError, ExitCode, OnboardError
from onboard.plan import FileChange, Plan
from onboard.render import Action, RenderResult, print_result, render

STAMP = "onboard 0.1.0"
MODEL = "src/lib/models/qwen3.py"
CASE = "tests/cases/qwen3.yaml"
REGISTRY = "src/lib/registry.py"
ANSWERS = ".onboard/qwen3.json"


def make_plan(model: str = "class Qwen3: ...\n", registry: str = "REGISTRY = ['qwen3']\n") -> Plan:
    return Plan(
        target="lib",
        model_type="qwen3",
        changes=(
            FileChange(MODEL, model, owned=True, description="model module"),
            FileChange(CASE, "model: qwen3\n", owned=True, description="test case"),
            FileChange(REGISTRY, registry, owned=False, description="registry"),
        ),
    )


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under root: file bytes, or 'dir' for directories (catches leftover temps)."""
    return {
        str(path.relative_to(root)): "dir" if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


def stats(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(root)): (path.stat().st_mtime_ns, path.stat().st_ctime_ns)
        for path in sorted(root.rglob("*"))
    }


def actions(result: RenderResult) -> dict[str, Action]:
    return {file.path: file.action for file in result.all_files}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A library checkout that has a registry but no model yet."""
    (tmp_path / "src/lib").mkdir(parents=True)
    (tmp_path / REGISTRY).write_text("REGISTRY = []\n")
    return tmp_path


def test_creates_files_into_an_empty_dir(tmp_path: Path) -> None:
    result = render(make_plan(), tmp_path, stamp=STAMP)

    assert set(actions(result).values()) == {Action.CREATE}
    assert [file.path for file in result.files] == [MODEL, CASE, REGISTRY]
    assert (tmp_path / MODEL).read_text() == "class Qwen3: ...\n"
    assert (tmp_path / CASE).read_text() == "model: qwen3\n"
    assert result.changed
    assert not result.dry_run
    assert f"+++ b/{MODEL}" in result.files[0].diff


def test_second_identical_run_changes_nothing_on_disk(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)
    before, before_stats = snapshot(repo), stats(repo)

    result = render(make_plan(), repo, stamp=STAMP)

    assert set(actions(result).values()) == {Action.IDENTICAL}
    assert all(file.diff == "" for file in result.all_files)
    assert not result.changed
    assert snapshot(repo) == before
    assert stats(repo) == before_stats


def test_dry_run_writes_nothing_but_reports_actions_and_diffs(repo: Path) -> None:
    before = snapshot(repo)

    result = render(make_plan(), repo, dry_run=True, stamp=STAMP)

    assert snapshot(repo) == before
    assert result.dry_run
    assert result.changed
    assert actions(result) == {
        MODEL: Action.CREATE,
        CASE: Action.CREATE,
        REGISTRY: Action.UPDATE,
        ANSWERS: Action.CREATE,
    }
    registry_diff = result.files[2].diff
    assert registry_diff.startswith(f"--- a/{REGISTRY}\n+++ b/{REGISTRY}\n")
    assert "-REGISTRY = []\n+REGISTRY = ['qwen3']\n" in registry_diff


def test_hand_edited_owned_file_conflicts_and_nothing_is_written(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)
    (repo / MODEL).write_text("class Qwen3: 'mine'\n")
    (repo / CASE).unlink()
    before = snapshot(repo)

    with pytest.raises(ConflictError) as caught:
        render(make_plan(registry="REGISTRY = ['qwen3', 'x']\n"), repo, stamp=STAMP)

    assert MODEL in caught.value.message
    assert CASE not in caught.value.message
    assert "--force" in caught.value.message
    assert caught.value.exit_code is ExitCode.CONFLICT
    assert snapshot(repo) == before


def test_owned_file_never_generated_by_onboard_conflicts(repo: Path) -> None:
    (repo / MODEL).parent.mkdir(parents=True)
    (repo / MODEL).write_text("# written by hand\n")

    with pytest.raises(ConflictError, match=r"models/qwen3\.py"):
        render(make_plan(), repo, stamp=STAMP)

    assert not (repo / CASE).exists()
    assert not (repo / ANSWERS).exists()


def test_dry_run_reports_conflicts_instead_of_raising(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)
    (repo / MODEL).write_text("class Qwen3: 'mine'\n")

    result = render(make_plan(), repo, dry_run=True, stamp=STAMP)

    assert result.conflicts == (MODEL,)
    assert "+class Qwen3: ...\n" in result.files[0].diff


def test_force_overwrites_edits_and_reports_forced(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)
    (repo / MODEL).write_text("class Qwen3: 'mine'\n")

    result = render(make_plan(), repo, force=True, stamp=STAMP)

    assert actions(result)[MODEL] is Action.FORCED
    assert actions(result)[CASE] is Action.IDENTICAL
    assert (repo / MODEL).read_text() == "class Qwen3: ...\n"
    assert "-class Qwen3: 'mine'\n" in result.files[0].diff


def test_regenerated_owned_file_not_edited_by_user_is_updated(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)

    result = render(make_plan(model="class Qwen3: 'v2'\n"), repo, stamp=STAMP)

    assert actions(result) == {
        MODEL: Action.UPDATE,
        CASE: Action.IDENTICAL,
        REGISTRY: Action.IDENTICAL,
        ANSWERS: Action.UPDATE,
    }
    assert (repo / MODEL).read_text() == "class Qwen3: 'v2'\n"
    assert json.loads((repo / ANSWERS).read_text())["files"][MODEL] == sha("class Qwen3: 'v2'\n")


def test_shared_file_updates_without_answers(repo: Path) -> None:
    assert not (repo / ".onboard").exists()

    result = render(make_plan(), repo, stamp=STAMP)

    assert actions(result)[REGISTRY] is Action.UPDATE
    assert (repo / REGISTRY).read_text() == "REGISTRY = ['qwen3']\n"


def test_answers_file_records_owned_hashes(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)

    text = (repo / ANSWERS).read_text()
    assert text.endswith("}\n")
    assert json.loads(text) == {
        "onboard": STAMP,
        "target": "lib",
        "model_type": "qwen3",
        "files": {MODEL: sha("class Qwen3: ...\n"), CASE: sha("model: qwen3\n")},
        "hidden": {},  # nothing --treat-as-new hid
    }
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"


def test_answers_file_is_not_rewritten_when_unchanged(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)
    answers = repo / ANSWERS
    first = answers.stat().st_mtime_ns

    result = render(make_plan(registry="REGISTRY = ['qwen3', 'x']\n"), repo, stamp=STAMP)

    assert actions(result)[REGISTRY] is Action.UPDATE
    assert result.answers.action is Action.IDENTICAL
    assert answers.stat().st_mtime_ns == first


def test_answers_file_is_recreated_when_missing(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)
    (repo / ANSWERS).unlink()

    result = render(make_plan(), repo, stamp=STAMP)

    assert result.answers.action is Action.CREATE
    assert all(file.action is Action.IDENTICAL for file in result.files)
    assert (repo / ANSWERS).exists()


def test_update_keeps_the_file_mode(repo: Path) -> None:
    (repo / REGISTRY).chmod(0o640)

    render(make_plan(), repo, stamp=STAMP)

    assert (repo / REGISTRY).stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("failing_call", [1, 2, 3, 4, 5])
def test_failed_replace_rolls_everything_back(
    repo: Path, monkeypatch: pytest.MonkeyPatch, failing_call: int
) -> None:
    render(make_plan(), repo, stamp=STAMP)
    (repo / CASE).unlink()
    plan = make_plan(model="class Qwen3: 'v2'\n", registry="REGISTRY = ['qwen3', 'x']\n")
    plan = Plan(
        plan.target, plan.model_type, (*plan.changes, FileChange("new/dir/x.py", "x\n", True))
    )
    before = snapshot(repo)
    real_replace = os.replace
    calls = []

    def flaky_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if (
            Path(dst).name != "_journal.json" and len(calls) < failing_call
        ):  # swaps, until one fails
            calls.append(dst)
            if len(calls) == failing_call:
                raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky_replace)
    with pytest.raises(OnboardError) as caught:
        render(plan, repo, stamp=STAMP)

    assert len(calls) == failing_call
    assert "No space left on device; nothing was changed" in caught.value.message
    assert caught.value.message.startswith("could not write ")
    assert snapshot(repo) == before
    assert not (repo / "new").exists()


def test_failing_second_replace_restores_and_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shared.py").write_text("old\n")
    plan = Plan(
        "lib",
        "m",
        (
            FileChange("shared.py", "new\n", owned=False),
            FileChange("a/b/owned.py", "x\n", owned=True),
        ),
    )
    real_replace = os.replace
    calls = []

    def flaky_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst).name != "_journal.json":
            calls.append(dst)
            if len(calls) == 2:
                raise PermissionError(13, "Permission denied")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky_replace)
    with pytest.raises(OnboardError, match=r"could not write a/b/owned.py: Permission denied"):
        render(plan, tmp_path, stamp=STAMP)

    assert (tmp_path / "shared.py").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.py"]


def test_failure_while_staging_rolls_back(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second temp file fails after the first was staged and new directories were made."""
    before = snapshot(repo)
    real_fsync = os.fsync
    calls = []

    def flaky_fsync(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # not the folders synced after a rename
            calls.append(fd)
        if len(calls) == 3:  # the journal, the model, then the test case
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", flaky_fsync)
    with pytest.raises(OnboardError, match=rf"could not write {CASE}: .*nothing was changed"):
        render(make_plan(), repo, stamp=STAMP)

    assert snapshot(repo) == before


def test_file_in_the_way_of_a_directory_fails_before_writing(repo: Path) -> None:
    (repo / "blocker").write_text("a file where a directory is needed\n")
    plan = Plan("lib", "qwen3", (*make_plan().changes, FileChange("blocker/x.py", "x\n", True)))
    before = snapshot(repo)

    with pytest.raises(OnboardError, match=r"blocker/x\.py"):
        render(plan, repo, stamp=STAMP)

    assert snapshot(repo) == before


@pytest.mark.parametrize("path", ["../escape.py", "/etc/passwd", "a/../../escape.py", "", "."])
def test_paths_escaping_root_are_refused(tmp_path: Path, path: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    plan = Plan("lib", "m", (FileChange("ok.py", "x\n", owned=True), FileChange(path, "x\n", True)))

    with pytest.raises(OnboardError, match="refusing to write"):
        render(plan, root, stamp=STAMP)

    assert snapshot(tmp_path) == {"root": "dir"}


def test_symlink_pointing_outside_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "file.py").symlink_to(outside / "file.py")

    for path in ("linked/x.py", "file.py"):
        plan = Plan("lib", "m", (FileChange(path, "x\n", owned=True),))
        with pytest.raises(OnboardError, match="outside"):
            render(plan, root, stamp=STAMP)

    assert list(outside.iterdir()) == []


def test_symlink_inside_root_is_written_through(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text("REGISTRY = []\n")
    (tmp_path / "alias.py").symlink_to(tmp_path / "real.py")
    plan = Plan("lib", "m", (FileChange("alias.py", "REGISTRY = [1]\n", owned=False),))

    render(plan, tmp_path, stamp=STAMP)

    assert (tmp_path / "alias.py").is_symlink()
    assert (tmp_path / "real.py").read_text() == "REGISTRY = [1]\n"


def test_two_paths_naming_one_file_are_refused(tmp_path: Path) -> None:
    plan = Plan("lib", "m", (FileChange("a.py", "1\n", True), FileChange("./a.py", "2\n", True)))

    with pytest.raises(OnboardError, match="same file"):
        render(plan, tmp_path, stamp=STAMP)


@pytest.mark.parametrize("model_type", ["../x", "a/b", "", ".."])
def test_unsafe_model_type_is_refused(tmp_path: Path, model_type: str) -> None:
    plan = Plan("lib", model_type, (FileChange("a.py", "1\n", True),))

    with pytest.raises(OnboardError, match="answers file"):
        render(plan, tmp_path, stamp=STAMP)


def test_diff_marks_missing_final_newline(tmp_path: Path) -> None:
    plan = Plan("lib", "m", (FileChange("a.txt", "no newline", owned=True),))

    result = render(plan, tmp_path, dry_run=True, stamp=STAMP)

    assert result.files[0].diff.endswith("+no newline\n\\ No newline at end of file\n")


def test_to_json_is_plain_data(repo: Path) -> None:
    result = render(make_plan(), repo, dry_run=True, stamp=STAMP)

    data = json.loads(json.dumps(result.to_json()))

    assert data["root"] == str(repo)
    assert data["dry_run"] is True
    assert data["changed"] is True
    assert [f["action"] for f in data["files"]] == ["create", "create", "update"]
    assert data["answers"] == {"path": ANSWERS, "action": "create", "diff": result.answers.diff}


def test_print_result_shows_verbs_paths_and_diffs(repo: Path) -> None:
    render(make_plan(), repo, stamp=STAMP)
    (repo / MODEL).write_text("class Qwen3: 'mine'\n")
    piped = io.StringIO()  # not a terminal: the diffs are written raw, for git apply
    console = Console(file=piped, width=120)

    result = render(make_plan(registry="REGISTRY = [2]\n"), repo, dry_run=True, stamp=STAMP)
    print_result(result, console, show_diffs=True)

    text = piped.getvalue()
    assert str(repo) in text
    for line in ("conflict  qwen3.py", "identical qwen3.yaml", "update    registry.py"):
        assert line in text
    for directory in ("src/", "lib/", "models/", "tests/", "cases/", ".onboard/"):
        assert directory in text
    assert f"+++ b/{REGISTRY}" in text
    assert "dry run" in text


def test_print_result_without_diffs(tmp_path: Path) -> None:
    console = Console(record=True, width=120)

    print_result(render(make_plan(), tmp_path, stamp=STAMP), console, show_diffs=False)

    text = console.export_text()
    assert "create    qwen3.py" in text
    assert "+++" not in text
    assert "4 create" in text
