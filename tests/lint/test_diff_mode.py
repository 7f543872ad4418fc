"""The diff-aware mode: with files (as pre-commit passes them), --diff or --since, ``check``
reports only the findings on the lines or registry entries the change touches.

Each case starts from a git repository whose committed registry already has problems (an inline
``family=`` mobius drops, OB201, and a duplicate key, OB104), edits the working tree and runs
``onboard check`` in process.
"""

from __future__ import annotations

import io
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from onboard.errors import BadInputError
from onboard.lint import CheckOptions, run_check
from onboard.lint.changes import _parse
from tests.lint.repos import MOBIUS_REGISTRY, mobius_files, write_tree

REGISTRY = MOBIUS_REGISTRY
MODEL = "src/mobius/models/qwen.py"
ENTRIES = """
"llama": ModelRegistration(CausalLMModel),
"qwen3": ModelRegistration(
    # q/k norms come with the class
    Qwen3CausalLMModel,
    family="qwen",
),
"olmo2": ModelRegistration(Qwen3CausalLMModel),
"olmo2": ModelRegistration(Qwen3CausalLMModel),
"""
PRE_EXISTING = 2  # OB201 on qwen3's family=, OB104 on the first "olmo2"


def git(repo: Path, *args: str) -> str:
    identity = ("-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false")
    done = subprocess.run(
        ["git", *identity, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed mobius checkout with PRE_EXISTING findings."""
    root = write_tree(tmp_path / "mobius", mobius_files(ENTRIES))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def edit(repo: Path, path: str, old: str, new: str) -> None:
    file = repo / path
    text = file.read_text()
    assert old in text, old
    file.write_text(text.replace(old, new, 1))


def comment(repo: Path) -> None:
    edit(repo, REGISTRY, '    "llama"', '    # text models\n    "llama"')


def break_llama(repo: Path) -> None:
    edit(repo, REGISTRY, "ModelRegistration(CausalLMModel)", "ModelRegistration(NoSuchModel)")


def touch_qwen3_entry(repo: Path) -> None:
    edit(repo, REGISTRY, "# q/k norms come with the class", "# q/k norms come with the class!")


def touch_qwen3_test_id(repo: Path) -> None:
    edit(
        repo,
        REGISTRY,
        "_TEST_MODEL_IDS: dict[str, str] = {\n",
        '_TEST_MODEL_IDS: dict[str, str] = {\n    "qwen3": "Qwen/Qwen3-0.6B",\n',
    )


def drop_qwen3_line(repo: Path) -> None:
    edit(repo, REGISTRY, "        # q/k norms come with the class\n", "")


def touch_model(repo: Path) -> None:
    edit(repo, MODEL, "pass", "pass  # unchanged behaviour")


@dataclass(frozen=True)
class Case:
    name: str
    change: Callable[[Path], None]
    args: dict[str, object]
    exit_code: int
    reported: tuple[str, ...]  # codes of the reported findings, in report order
    hidden: int


HOOK = {"files": (REGISTRY,)}
CASES = [
    Case("comment-only change", comment, HOOK, 0, (), PRE_EXISTING),
    Case("broken entry", break_llama, HOOK, 1, ("OB102",), PRE_EXISTING),
    Case("inside a multi-line entry", touch_qwen3_entry, HOOK, 1, ("OB201",), 1),
    Case("the entry's side-table row", touch_qwen3_test_id, HOOK, 1, ("OB201",), 1),
    Case("a deleted line of an entry", drop_qwen3_line, HOOK, 1, ("OB201",), 1),
    Case("only a model file passed", touch_model, {"files": (MODEL,)}, 0, (), PRE_EXISTING),
    Case("registry unchanged, model passed", break_llama, {"files": (MODEL,)}, 0, (), 3),
    Case("--diff: every changed file", break_llama, {"diff": True}, 1, ("OB102",), 2),
    Case("--since HEAD", comment, {"since": "HEAD"}, 0, (), PRE_EXISTING),
    Case("--all", comment, {**HOOK, "show_all": True}, 1, ("OB201", "OB104"), 0),
    Case("no files: every finding", comment, {}, 1, ("OB201", "OB104"), 0),
]


def run(repo: Path, **args: object) -> tuple[int, str]:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    files = tuple(Path(f) for f in args.pop("files", ()))  # type: ignore[union-attr]
    options = CheckOptions(files=files, repo=repo, select=("OB1", "OB2"), **args)  # type: ignore[arg-type]
    return run_check(options, console), out.getvalue()


def reported_codes(output: str) -> tuple[str, ...]:
    return tuple(re.findall(r"^src/\S+:\d+: (OB\d+) ", output, re.MULTILINE))


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_diff_mode_reports_what_the_change_touches(repo: Path, case: Case) -> None:
    case.change(repo)
    git(repo, "add", "-A")
    code, output = run(repo, **case.args)
    assert (code, reported_codes(output)) == (case.exit_code, case.reported), output
    hidden = re.search(r"^(\d+) existing findings? .* not shown \(--all to show\)\.$", output, re.M)
    assert (int(hidden.group(1)) if hidden else 0) == case.hidden, output


def test_a_broken_entry_is_reported_alone_with_its_line(repo: Path) -> None:
    comment(repo)
    break_llama(repo)
    code, output = run(repo, files=(REGISTRY,))
    line = next(
        n
        for n, text in enumerate((repo / REGISTRY).read_text().splitlines(), 1)
        if "NoSuchModel" in text
    )
    assert code == 1
    assert output.splitlines()[0] == (
        f"{REGISTRY}:{line}: OB102 'llama' -> NoSuchModel: NoSuchModel is neither imported nor "
        "defined in the registry; importing mobius fails"
    )
    assert "Found 1 error and 0 warnings." in output


def test_since_a_revision_reports_its_changes_and_only_them(repo: Path) -> None:
    break_llama(repo)
    git(repo, "commit", "-qam", "break llama")
    assert reported_codes(run(repo, since="HEAD")[1]) == ()
    assert reported_codes(run(repo, since="HEAD~1")[1]) == ("OB102",)
    code, output = run(repo, files=(REGISTRY,))  # the hook: the commit is behind us
    assert (code, reported_codes(output)) == (0, ())


def test_a_repository_without_commits_is_new_as_a_whole(repo: Path) -> None:
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    code, output = run(repo, files=(REGISTRY,))
    assert (code, reported_codes(output)) == (1, ("OB201", "OB104"))


def test_without_git_files_keep_the_findings_that_touch_them(tmp_path: Path) -> None:
    plain = write_tree(tmp_path / "plain", mobius_files(ENTRIES))
    if subprocess.run(["git", "rev-parse"], cwd=plain, capture_output=True).returncode == 0:
        pytest.skip("tmp_path lies inside a git work tree")
    code, output = run(plain, files=(REGISTRY,))
    assert (code, reported_codes(output)) == (1, ("OB201", "OB104"))
    assert run(plain, files=(MODEL,))[0] == 0


def test_an_unknown_revision_is_bad_input(repo: Path) -> None:
    with pytest.raises(BadInputError, match="no-such-rev"):
        run(repo, since="no-such-rev")
    with pytest.raises(BadInputError, match="--all"):
        run(repo, since="HEAD", show_all=True)


@pytest.mark.parametrize(
    ("hunks", "lines"),
    [
        ("@@ -3 +3 @@", {3}),
        ("@@ -3,0 +4,2 @@", {4, 5}),
        ("@@ -3,2 +2,0 @@", {2, 3}),  # a deletion touches the lines either side
    ],
)
def test_parse_reads_new_side_lines(hunks: str, lines: set[int]) -> None:
    diff = f"diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n{hunks}\n"
    assert _parse(diff) == {"x.py": frozenset(lines)}
