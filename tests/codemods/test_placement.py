"""New registry entries go where the library's maintainers keep them: the closest model's
section, the table's order, below a section header and above another entry's comment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from onboard.codemods import (
    add_to_all,
    dict_neighbours,
    upsert_dict_entry,
    upsert_ordereddict_entry,
    upsert_tuple_in_list,
)
from onboard.codemods._placement import Slot, place

Check = Callable[[str, str], list[str]]

SECTIONED = """TABLE = {
    # --- Dense ---
    "gemma": 1,
    "llama": 2,
    "qwen3": 3,
    # Drafters share qwen3's model type.
    "DFlashDraftModel": 4,
    "smollm3": 5,

    # --- Mixture of Experts ---
    "dbrx": 6,
    "mixtral": 7,
    # --- Audio ---
    "whisper": 8,
}
"""


def _with(source: str, before: str, line: str) -> str:
    """``source`` with ``line`` added in front of the line ``before``."""
    assert source.count(before) == 1
    return source.replace(before, line + before)


@pytest.mark.parametrize(
    ("key", "anchor", "before"),
    [
        # sorted within the anchor's section, not appended among the audio models
        ("qwen3_new", "qwen3", "    # Drafters share qwen3"),
        ("phi", "qwen3", '    "qwen3": 3,\n'),
        # first of its section: below the header; last of it: above the next one's
        ("aria", "llama", '    "gemma": 1,\n'),
        ("zeta", "qwen3", "\n    # --- Mixture of Experts ---"),
        ("ember_moe", "mixtral", '    "mixtral": 7,\n'),
        ("arctic", "mixtral", '    "dbrx": 6,\n'),
        ("zamba_moe", "dbrx", "    # --- Audio ---"),
    ],
)
def test_dict_entry_goes_in_the_anchors_section_in_order(
    key: str, anchor: str, before: str
) -> None:
    after = upsert_dict_entry(SECTIONED, "TABLE", key, "0", (anchor,))
    assert after == _with(SECTIONED, before, f'    "{key}": 0,\n')
    assert upsert_dict_entry(after, "TABLE", key, "0", (anchor,)) == after


def test_first_anchor_the_table_holds_decides() -> None:
    after = upsert_dict_entry(SECTIONED, "TABLE", "olmoe", "0", ("qwen3_moe", "mixtral"))
    assert after == _with(SECTIONED, "    # --- Audio ---", '    "olmoe": 0,\n')


def test_without_anchor_a_sorted_table_gets_the_sorted_place() -> None:
    source = 'T = {\n    "a": 1,\n    # --- B ---\n    "c": 2,\n}\n'
    assert upsert_dict_entry(source, "T", "b", "0") == _with(source, '    "c": 2', '    "b": 0,\n')
    unsorted = 'T = {\n    "c": 1,\n    "a": 2,\n    "b": 3,\n    "d": 4,\n}\n'
    assert upsert_dict_entry(unsorted, "T", "e", "0") == _with(unsorted, "}", '    "e": 0,\n')


def test_unordered_section_puts_the_entry_after_its_anchor() -> None:
    source = (
        'T = {\n    "m": 1,\n    "c": 2,\n    "x": 3,\n    "a": 4,\n    "q": 5,\n    "b": 6,\n}\n'
    )
    after = upsert_dict_entry(source, "T", "n", "0", ("x",))
    assert after == _with(source, '    "a": 4', '    "n": 0,\n')


def test_neighbours_are_the_section_nearest_first() -> None:
    assert dict_neighbours(SECTIONED, "TABLE", "llama") == (
        "gemma",
        "qwen3",
        "DFlashDraftModel",
        "smollm3",
    )
    assert dict_neighbours(SECTIONED, "TABLE", "absent") == ()


def test_tuple_list_and_ordereddict_place_alike() -> None:
    tuples = """C = [
    # === Dense ===
    ("gemma", {}, True),
    ("llama", {}, True),
    # === MoE ===
    ("mixtral", {}, True),
]
"""
    after = upsert_tuple_in_list(tuples, "C", "helium", '("helium", {}, True)', ("llama",))
    assert after == _with(tuples, '    ("llama"', '    ("helium", {}, True),\n')
    mapping = 'M = OrderedDict(\n    [\n        ("A", 1),\n        ("C", 3),\n    ]\n)\n'
    after = upsert_ordereddict_entry(mapping, "M", "B", "2", ("A",))
    assert after == _with(mapping, '        ("C", 3)', '        ("B", 2),\n')


@pytest.mark.parametrize(
    ("keys", "leading", "new", "anchors", "slot"),
    [
        # case-mixed names follow the order that keeps most of them in place
        (["b", "C", "d"], [(), (), ()], "bb", (), Slot(1)),
        (["A", "B", "a"], [(), (), ()], "C", (), Slot(2)),
        # a lone short comment labels a group; a sentence speaks about the entry below it
        (["a", "c"], [(), ("# helpers",)], "b", (), Slot(1, 1)),
        (["a", "c"], [(), ("# c is kept for old checkpoints.",)], "b", (), Slot(1, 0)),
        (["a", "c"], [(), ("# --- C ---", None, "# why c")], "b", ("c",), Slot(1, 1)),
        ([], [], "a", (), Slot(0)),
    ],
)
def test_place(
    keys: list[str | None],
    leading: list[tuple[str | None, ...]],
    new: str,
    anchors: tuple[str, ...],
    slot: Slot,
) -> None:
    assert place(keys, leading, new, anchors) == slot


def test_installed_mobius_registry(mobius_dir: Path, assert_only_added: Check) -> None:
    """A qwen3-like model lands beside qwen3 in every table, not among the audio models."""
    before = (mobius_dir / "_registry.py").read_text()
    entry = "ModelRegistration(Qwen3NewCausalLMModel)"
    after = upsert_dict_entry(before, "_REGISTRATIONS", "qwen3_new", entry, ("qwen3",))
    anchors = ("qwen3", *dict_neighbours(after, "_REGISTRATIONS", "qwen3_new"))
    after = upsert_dict_entry(after, "_TEST_MODEL_IDS", "qwen3_new", '"Qwen/New"', anchors)
    assert assert_only_added(before, after) == [
        f'    "qwen3_new": {entry},',
        '    "qwen3_new": "Qwen/New",',
    ]
    qwen35 = '"qwen3_5_text": ModelRegistration(Qwen35CausalLMModel),\n'
    assert f'{qwen35}    "qwen3_new": {entry},\n    # DFlash' in after
    assert '"qwen3_5_text": "Qwen/Qwen3.5-2B",\n    "qwen3_new": "Qwen/New",\n' in after
    again = upsert_dict_entry(after, "_REGISTRATIONS", "qwen3_new", entry, ("qwen3",))
    assert upsert_dict_entry(again, "_TEST_MODEL_IDS", "qwen3_new", '"Qwen/New"', anchors) == after


def test_installed_mobius_all(mobius_dir: Path, assert_only_added: Check) -> None:
    before = (mobius_dir / "models" / "__init__.py").read_text()
    after = add_to_all(before, "Qwen3NewCausalLMModel")
    assert assert_only_added(before, after) == ['    "Qwen3NewCausalLMModel",']
    assert (
        '"Qwen3CausalLMModel",\n    "Qwen3NewCausalLMModel",\n    "Qwen3NextCausalLMModel' in after
    )
    assert add_to_all(after, "Qwen3NewCausalLMModel") == after
