from __future__ import annotations

import pytest

from onboard.codemods import CodemodError, add_to_all

SORTED = '''"""Models."""

__all__ = [
    # classes
    "CausalLMModel",
    "Qwen25VLCausalLMModel",
    "Qwen35CausalLMModel",
    "QwenCausalLMModel",
    # helpers
    "mimi_default_config",
]
'''


def test_inserts_in_sorted_position() -> None:
    result = add_to_all(SORTED, "Qwen3CausalLMModel")
    assert result == SORTED.replace(
        '    "Qwen25VLCausalLMModel",\n',
        '    "Qwen3CausalLMModel",\n    "Qwen25VLCausalLMModel",\n',
    )


def test_inserts_after_section_comment_and_at_end() -> None:
    result = add_to_all(SORTED, "zeta")
    assert result == SORTED.replace(
        '    "mimi_default_config",\n', '    "mimi_default_config",\n    "zeta",\n'
    )
    result = add_to_all(SORTED, "make_config")
    assert result == SORTED.replace("    # helpers\n", '    # helpers\n    "make_config",\n')


def test_unsorted_list_gets_appended() -> None:
    source = "__all__ = [\n    'b',\n    'a',\n]\n"
    assert add_to_all(source, "c") == "__all__ = [\n    'b',\n    'a',\n    'c',\n]\n"


def test_tuple_and_one_liner() -> None:
    assert add_to_all('__all__ = ("a", "c")\n', "b") == '__all__ = ("a", "b", "c")\n'
    assert add_to_all('__all__ = ("a",)\n', "b") == '__all__ = ("a", "b",)\n'
    assert add_to_all("__all__: list[str] = []\n", "a") == '__all__: list[str] = [\n    "a",\n]\n'


def test_idempotent() -> None:
    assert add_to_all(SORTED, "QwenCausalLMModel") == SORTED
    once = add_to_all(SORTED, "Qwen3CausalLMModel")
    assert add_to_all(once, "Qwen3CausalLMModel") == once


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("X = []\n", "no module-level `__all__ = [...]` list found"),
        ("__all__ = list(x)\n", "module-level `__all__` is a call to `list`, not a list literal"),
        ("__all__ = 'a', 'b'\n", "module-level `__all__` is a Tuple expression, not a list"),
        ("__all__ = [\n", "cannot parse Python source"),
    ],
)
def test_unfamiliar_shapes_raise(source: str, message: str) -> None:
    with pytest.raises(CodemodError) as caught:
        add_to_all(source, "a")
    assert str(caught.value).startswith(message)
