"""A run stopped at any write step leaves the checkout as it was, or the next run makes it so.

Every change ``journal`` makes to the disk goes through ``journal._perform``, so these tests stop
a commit at each step in turn, deterministically: with a Ctrl-C (the run rolls itself back), or
with a simulated kill (no step after it runs, not even the rollback's), which the next run's
repair must undo. After each, the checkout must equal the original byte for byte, and a following
run must produce exactly the tree an uninterrupted run produces.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from onboard import STAMP, journal
from onboard.pipeline import NewOptions, onboard_new
from onboard.plan import FileChange, Plan
from onboard.render import render
from tests.fake_mobius import make_mobius_repo
from tests.new_types import default_config_dir

Tree = dict[str, bytes | str]


class _Killed(BaseException):
    """The process died: raised by every step from the fatal one on, so none of them runs."""


def _tree(root: Path) -> Tree:
    """Every file's bytes and every folder (so leftover temps and empty folders show)."""
    return {
        str(p.relative_to(root)): "dir" if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
        if "__pycache__" not in p.parts
    }


@dataclass(frozen=True)
class _Case:
    model: Path
    original: Path  # the checkout before any run: copied, never written
    plan: Plan
    before: Tree
    after: Tree  # what one uninterrupted ``onboard new`` makes of it


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> _Case:
    base = tmp_path_factory.mktemp("interrupted")
    model = default_config_dir("vaultgemma", base / "models")
    original = make_mobius_repo(base / "original")
    done = shutil.copytree(original, base / "done")
    plan = onboard_new(NewOptions(model=str(model), repo=done, parity=False)).plan
    return _Case(model, original, plan, _tree(original), _tree(done))


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flushing to the platter guards against power loss, which no test here simulates; it is
    most of these tests' time."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _copy(source: Path, dest: Path) -> Path:
    """Hard links: fast, and the commit never writes into an existing file, so ``source``
    stays as it was (the kill test checks that)."""
    return shutil.copytree(source, dest, copy_function=os.link)


@pytest.fixture
def checkout(case: _Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the original checkout; temporary folders go to an empty TMPDIR."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return _copy(case.original, tmp_path / "mobius")


@contextmanager
def _stopped_at(
    index: int, signal: type[BaseException] = _Killed, *, dies: bool = False
) -> Iterator[list[Callable[[], object]]]:
    """Make step ``index`` raise ``signal`` (-1: none does) and, when the process ``dies``, every
    step after it too; yields the steps seen."""
    real = journal._perform
    steps: list[Callable[[], object]] = []

    def perform(step: Callable[[], object]) -> None:
        steps.append(step)
        if len(steps) - 1 == index or (dies and 0 <= index < len(steps) - 1):
            raise signal
        real(step)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(journal, "_perform", perform)
        yield steps


def _rerun_matches_an_uninterrupted_run(case: _Case, root: Path) -> None:
    render(case.plan, root, stamp=STAMP)
    assert _tree(root) == case.after


def _commit_steps(case: _Case, tmp_path: Path) -> list[Callable[[], object]]:
    """The steps of an uninterrupted commit of the plan into a copy of the checkout."""
    with _stopped_at(-1) as steps:
        render(case.plan, _copy(case.original, tmp_path / "counted"), stamp=STAMP)
    return steps


def test_the_commit_journals_first_and_removes_the_journal_last(
    case: _Case, checkout: Path
) -> None:
    with _stopped_at(-1) as steps:
        render(case.plan, checkout, stamp=STAMP)
    names = [s.func.__name__ for s in steps]  # type: ignore[attr-defined]
    writes = len(case.plan.changes) + 1  # and the answers file
    # the answers folder, the journal staged and swapped in, each file staged then all swapped
    # in, the journal removed: nothing else touches the disk
    assert names == [
        "mkdir",
        "_stage",
        "_swap",
        *["_stage"] * writes,
        *["_swap"] * writes,
        "_unlink",
    ]
    assert steps[2].args[1] == steps[-1].args[0] == checkout / journal.JOURNAL  # type: ignore[attr-defined]
    assert _tree(checkout) == case.after


def test_ctrl_c_at_any_write_step_rolls_the_run_back(case: _Case, tmp_path: Path) -> None:
    for index in range(len(_commit_steps(case, tmp_path))):
        root = _copy(case.original, tmp_path / f"ctrl-c-{index}")
        with _stopped_at(index, KeyboardInterrupt), pytest.raises(KeyboardInterrupt):
            render(case.plan, root, stamp=STAMP)
        assert _tree(root) == case.before, f"Ctrl-C at step {index}"
        _rerun_matches_an_uninterrupted_run(case, root)
        shutil.rmtree(root)


def test_a_kill_at_any_write_step_is_rolled_back_by_the_next_run(
    case: _Case, tmp_path: Path
) -> None:
    paths = [change.path for change in case.plan.changes]
    half_onboarded = 0
    for index in range(len(_commit_steps(case, tmp_path))):
        root = _copy(case.original, tmp_path / f"kill-{index}")
        with _stopped_at(index, dies=True), pytest.raises(_Killed):
            render(case.plan, root, stamp=STAMP)
        left = [_tree(root).get(path) for path in paths]
        half_onboarded += left not in (
            [case.before.get(p) for p in paths],
            [case.after[p] for p in paths],
        )
        journal.repair(root)
        assert _tree(root) == case.before, f"killed at step {index}"
        _rerun_matches_an_uninterrupted_run(case, root)
        shutil.rmtree(root)
    assert _tree(case.original) == case.before  # no write went through a hard link
    # the kills between the first and the last swap left the half-onboarded checkouts
    assert half_onboarded == len(paths) - 1


def test_a_killed_repair_is_finished_by_the_next_one(case: _Case, tmp_path: Path) -> None:
    """Killed after every swap and before the journal went: the repair undoes all of it, and a
    repair that is itself killed at any of its steps is completed by the next."""
    count = len(_commit_steps(case, tmp_path))
    killed = _copy(case.original, tmp_path / "killed")
    with _stopped_at(count - 1, dies=True), pytest.raises(_Killed):
        render(case.plan, killed, stamp=STAMP)
    with _stopped_at(-1) as repair_steps:
        journal.repair(_copy(killed, tmp_path / "repaired"))
    assert len(repair_steps) > len(case.plan.changes)
    for index in range(len(repair_steps)):
        root = _copy(killed, tmp_path / f"repair-{index}")
        with _stopped_at(index, dies=True), pytest.raises(_Killed):
            journal.repair(root)
        journal.repair(root)
        assert _tree(root) == case.before, f"repair killed at step {index}"
        shutil.rmtree(root)


def test_the_next_onboard_new_repairs_a_killed_run_before_reading_the_checkout(
    case: _Case, checkout: Path, tmp_path: Path
) -> None:
    """The issue's case: killed with the model file in place and the answers file not, a re-run
    used to stop at a conflict (exit 3)."""
    steps = _commit_steps(case, tmp_path)
    first_swap = next(i for i, s in enumerate(steps[3:], 3) if s.func is journal._swap)  # type: ignore[attr-defined]
    with _stopped_at(first_swap + 1, dies=True), pytest.raises(_Killed):
        onboard_new(NewOptions(model=str(case.model), repo=checkout, parity=False))
    assert (checkout / case.plan.model_file).exists()
    assert journal.pending(checkout)

    preview = onboard_new(
        NewOptions(model=str(case.model), repo=checkout, parity=False, dry_run=True)
    )
    assert any("a real run rolls it back" in n for n in preview.source.notices)
    assert journal.pending(checkout)  # a dry run writes nothing, not even the repair

    result = onboard_new(NewOptions(model=str(case.model), repo=checkout, parity=False))
    notices = [n for n in result.source.notices if n.startswith("rolled back")]
    assert notices == [
        f"rolled back a run interrupted while writing into {checkout}: "
        f"put back {case.plan.model_file}"
    ]
    assert _tree(checkout) == case.after
    assert not any(Path(tempfile.gettempdir()).iterdir())


def test_a_new_out_folder_is_removed_again_whatever_step_stops_the_run(tmp_path: Path) -> None:
    """``--out`` into folders that do not exist yet: they are made, journalled, and undone."""
    plan = Plan("lib", "m", (FileChange("src/m.py", "m = 1\n", owned=True),))
    out = tmp_path / "new" / "deeper" / "out"
    with _stopped_at(-1) as steps:
        render(plan, out, stamp=STAMP)
    expected = _tree(tmp_path)
    shutil.rmtree(tmp_path / "new")
    for index in range(len(steps)):
        with _stopped_at(index, KeyboardInterrupt), pytest.raises(KeyboardInterrupt):
            render(plan, out, stamp=STAMP)
        assert not (tmp_path / "new").exists(), f"Ctrl-C at step {index}"
        with _stopped_at(index, dies=True), pytest.raises(_Killed):
            render(plan, out, stamp=STAMP)
        journal.repair(out)
        # a kill before the journal was in place can only have made (empty) folders
        assert not [p for p in (tmp_path / "new").rglob("*") if p.is_file()], f"step {index}"
        render(plan, out, stamp=STAMP)
        assert _tree(tmp_path) == expected
        shutil.rmtree(tmp_path / "new")


# --- real signals, in a subprocess (slow: each run imports and analyses anew) ------------------

_SIGNAL_AFTER_FIRST_SWAP = """
import os, signal, sys
from onboard import journal
from onboard.cli import main

real, sent, chosen = journal._perform, [], getattr(signal, sys.argv.pop(1))

def perform(step):
    real(step)
    if not sent and step.func is journal._swap and step.args[1].name != "_journal.json":
        sent.append(step)
        os.kill(os.getpid(), chosen)

journal._perform = perform
main()
"""


def _cli(*args: str, env: dict[str, str], signal: str | None = None) -> CompletedProcess[str]:
    """``onboard`` in a subprocess; ``signal`` is sent to it right after its first file swap."""
    code = ["-c", _SIGNAL_AFTER_FIRST_SWAP, signal] if signal else ["-m", "onboard"]
    return subprocess.run(
        [sys.executable, *code, *args], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def cli_env(cli_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    return {**cli_env, "TMPDIR": str(temp)}


@pytest.mark.slow
@pytest.mark.parametrize("signal", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_rolls_back_prints_one_line_and_exits_130(
    case: _Case, checkout: Path, cli_env: dict[str, str], signal: str
) -> None:
    args = ("new", str(case.model), "--repo", str(checkout), "--no-parity")
    run = _cli(*args, env=cli_env, signal=signal)
    assert run.returncode == 130, run.stderr
    assert run.stderr.strip() == "error: interrupted"
    assert _tree(checkout) == case.before
    assert not any(Path(cli_env["TMPDIR"]).iterdir())


@pytest.mark.slow
def test_sigkill_is_rolled_back_by_the_next_run(
    case: _Case, checkout: Path, cli_env: dict[str, str]
) -> None:
    args = ("new", str(case.model), "--repo", str(checkout), "--no-parity")
    killed = _cli(*args, env=cli_env, signal="SIGKILL")
    assert killed.returncode == -9, killed.stderr
    assert journal.pending(checkout)
    assert (checkout / case.plan.model_file).exists()  # what used to make the re-run exit 3

    again = _cli(*args, env=cli_env)
    assert again.returncode == 0, again.stderr
    notice = f"notice: rolled back a run interrupted while writing into {checkout}: put back "
    assert notice in " ".join(again.stdout.split())  # rich wraps the line
    assert _tree(checkout) == case.after
    assert not any(Path(cli_env["TMPDIR"]).iterdir())
