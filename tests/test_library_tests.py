"""The library's own tests, before and after the change (``onboard.library_tests``).

A synthetic library checks the runner (which tests are kept, what counts as broken, the checkout
left as it was); a fake mobius checkout with a stand-in of its build-graph harness checks that
``onboard new --repo`` writes nothing when the change breaks one of them, and names it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.library_tests import LibraryTestFile, LibraryTestSelection, run_library_tests
from onboard.pipeline import NewOptions, onboard_new
from onboard.plan import FileChange, Plan
from tests.fake_mobius import tree_snapshot, with_build_graph_standin
from tests.hub_cache import fixture_config
from tests.lint.repos import write_tree
from tests.test_exit_codes import valid_document

ENTRIES_TEST = """
import pytest
from entries import LAYERS


@pytest.mark.parametrize("model_type", sorted(LAYERS))
def test_entry_has_layers(model_type):
    assert LAYERS[model_type] > 0, f"{model_type} has no layers"


def test_no_reserved_names():
    assert "reserved" not in LAYERS
"""


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "library",
        {
            "pyproject.toml": '[tool.pytest.ini_options]\npython_files = ["*_test.py"]\n',
            "tests/entries.py": 'LAYERS = {"llama": 2, "mistral": 0}\n',
            "tests/entries_test.py": ENTRIES_TEST,
        },
    )


def _plan(layers: str, *extra: FileChange) -> Plan:
    entries = FileChange("tests/entries.py", f"LAYERS = {{{layers}}}\n", owned=False)
    return Plan("mobius", "qwen3", (entries, *extra))


def _selection(*entries: str, scope: str = "registry") -> LibraryTestSelection:
    return LibraryTestSelection((LibraryTestFile("tests/entries_test.py", scope),), entries)


def test_a_test_the_change_breaks_is_named(library: Path) -> None:
    before = tree_snapshot(library)
    plan = _plan('"llama": 2, "mistral": 0, "qwen3": 0')
    report = run_library_tests(_selection("qwen3"), plan, library)
    assert not report.passed
    assert [(t.test, t.outcome) for t in report.broken] == [
        ("tests/entries_test.py::test_entry_has_layers[qwen3]", "failed")
    ]
    assert "qwen3 has no layers" in report.broken[0].message
    # the entry filter kept the plan's entry and the unparametrized rule, nothing else
    assert {t.test for t in report.after} == {
        "tests/entries_test.py::test_entry_has_layers[qwen3]",
        "tests/entries_test.py::test_no_reserved_names",
    }
    assert tree_snapshot(library) == before  # no bytecode, no cache, no file


def test_a_test_failing_before_the_change_is_not_counted(library: Path) -> None:
    plan = _plan('"llama": 2, "mistral": 0, "qwen3": 1')
    report = run_library_tests(_selection("mistral", "qwen3"), plan, library)
    assert report.passed
    assert [t.test for t in report.unrunnable] == [
        "tests/entries_test.py::test_entry_has_layers[mistral]"
    ]
    assert report.count("passed") == 2


def test_a_rule_the_change_breaks_is_named_whatever_the_entries(library: Path) -> None:
    plan = _plan('"llama": 2, "mistral": 0, "reserved": 1')
    report = run_library_tests(_selection("qwen3"), plan, library)
    assert [t.test for t in report.broken] == ["tests/entries_test.py::test_no_reserved_names"]


def test_entries_scope_keeps_only_the_entries_tests(library: Path) -> None:
    plan = _plan('"llama": 2, "mistral": 0, "reserved": 1')
    report = run_library_tests(_selection("llama", scope="entries"), plan, library)
    assert [t.test for t in report.after] == ["tests/entries_test.py::test_entry_has_layers[llama]"]
    assert report.passed


def test_generated_tests_are_left_to_parity(library: Path) -> None:
    generated = FileChange("tests/generated_test.py", "def test_x():\n    assert False\n", True)
    plan = _plan('"llama": 2, "mistral": 0', generated)
    selection = LibraryTestSelection((LibraryTestFile("tests", "all"),), ("qwen3",))
    report = run_library_tests(selection, plan, library)
    assert report.passed
    assert not any("generated_test" in t.test for t in report.after)


def test_no_selected_file_in_the_checkout_is_no_report(library: Path) -> None:
    selection = LibraryTestSelection((LibraryTestFile("tests/missing_test.py"),), ("qwen3",))
    assert run_library_tests(selection, _plan('"qwen3": 1'), library) is None


@pytest.fixture
def lfm2() -> Path:
    return fixture_config("LiquidAI/LFM2-1.2B").parent


def test_new_writes_nothing_when_a_library_test_breaks(mobius_repo: Path, lfm2: Path) -> None:
    """LFM2's short-convolution layers are a kind mobius' build harness does not know: its
    build test for the new entry fails, so the change is refused whole."""
    repo = with_build_graph_standin(mobius_repo)
    before = tree_snapshot(repo)
    result = onboard_new(NewOptions(model=str(lfm2), repo=repo, parity=False))
    assert not result.ok and result.rendered is None
    assert [t.test for t in result.library_tests.broken] == [
        "tests/build_graph_test.py::test_graph_builds_without_weights[lfm2]"
    ]
    assert "Missing present.1.key" in result.library_tests.broken[0].message
    assert tree_snapshot(repo) == before


def test_no_library_tests_writes_and_says_so(mobius_repo: Path, lfm2: Path) -> None:
    repo = with_build_graph_standin(mobius_repo)
    options = NewOptions(model=str(lfm2), repo=repo, parity=False, library_tests=False)
    result = onboard_new(options)
    assert result.ok and result.library_tests is None
    assert result.rendered.changed
    assert "the library's own tests were not run (--no-library-tests)" in result.source.notices


def test_json_names_the_broken_test(cli_env, mobius_repo: Path, lfm2: Path) -> None:
    from tests.test_cli import onboard

    repo = with_build_graph_standin(mobius_repo)
    run = onboard("new", str(lfm2), "--repo", str(repo), "--no-parity", "--json", env=cli_env)
    assert run.returncode == 1, run.stderr
    document = valid_document(run.stdout, 1, "new")
    broken = document["library_tests"]["broken"]
    assert [b["test"] for b in broken] == [
        "tests/build_graph_test.py::test_graph_builds_without_weights[lfm2]"
    ]
    assert json.loads(run.stdout)["files"] is None
