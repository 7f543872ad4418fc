from __future__ import annotations

import pytest

from onboard.codemods import CodemodError, defined_classes, upsert_classes

BASE = '''"""Configs."""

import dataclasses


@dataclasses.dataclass
class CausalLMConfig:
    hidden_size: int = 0


@dataclasses.dataclass
class Qwen3Config(CausalLMConfig):
    old: bool = True


X = 1
'''

QWEN3 = """@dataclasses.dataclass
class Qwen3Config(CausalLMConfig):
    new: bool = True
"""


def test_a_new_class_goes_at_the_end_two_lines_below() -> None:
    source = BASE.replace(QWEN3.replace("new", "old"), "").rstrip() + "\n"
    result = upsert_classes(source, QWEN3)
    assert result == source + "\n\n" + QWEN3
    assert defined_classes(result) == ("CausalLMConfig", "Qwen3Config")


def test_a_class_written_earlier_is_replaced_where_it_stands() -> None:
    result = upsert_classes(BASE, QWEN3)
    assert result == BASE.replace("old: bool", "new: bool")
    assert upsert_classes(result, QWEN3) == result  # idempotent, byte for byte


def test_only_class_definitions_are_upserted() -> None:
    with pytest.raises(CodemodError, match="only class definitions"):
        upsert_classes(BASE, "X = 2\n")
