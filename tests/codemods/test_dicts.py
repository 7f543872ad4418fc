from __future__ import annotations

import pytest

from onboard.codemods import CodemodError, upsert_dict_entry

REGISTRY = '''"""Registry."""

from mobius.models import CausalLMModel

# ---------------------------------------------------------------------------
# Declarative registration table
# ---------------------------------------------------------------------------
_REGISTRATIONS: dict[str, ModelRegistration] = {
    # --- Text Generation (Llama-compatible) ---
    "baichuan": ModelRegistration(CausalLMModel),
    'llama': ModelRegistration(CausalLMModel),  # the reference
    # --- Audio ---
    "hubert": ModelRegistration(Wav2Vec2Model, task="audio-feature-extraction"),
    "mms": ModelRegistration(Wav2Vec2ForCTCModel, task="ctc-asr"),
}


def _create_default_registry() -> ModelRegistry:
    return ModelRegistry()
'''

QWEN3 = 'ModelRegistration(Qwen3CausalLMModel, task="text-generation")'


def test_appends_entry_in_multiline_style() -> None:
    result = upsert_dict_entry(REGISTRY, "_REGISTRATIONS", "qwen3", QWEN3)
    mms = '    "mms": ModelRegistration(Wav2Vec2ForCTCModel, task="ctc-asr"),\n'
    qwen3 = '    "qwen3": ModelRegistration(Qwen3CausalLMModel, task="text-generation"),\n'
    assert result == REGISTRY.replace(mms, mms + qwen3)


def test_idempotent() -> None:
    once = upsert_dict_entry(REGISTRY, "_REGISTRATIONS", "qwen3", QWEN3)
    assert upsert_dict_entry(once, "_REGISTRATIONS", "qwen3", QWEN3) is once
    twice = upsert_dict_entry(once, "_REGISTRATIONS", "qwen3", QWEN3)
    assert twice == once


def test_equivalent_value_in_other_formatting_is_left_alone() -> None:
    value = "ModelRegistration(\n    CausalLMModel,\n)"
    assert upsert_dict_entry(REGISTRY, "_REGISTRATIONS", "llama", value) == REGISTRY
    assert upsert_dict_entry(REGISTRY, "_REGISTRATIONS", "baichuan", value) == REGISTRY


def test_replaces_only_the_changed_value_keeping_comment_and_quotes() -> None:
    result = upsert_dict_entry(REGISTRY, "_REGISTRATIONS", "llama", QWEN3)
    assert result == REGISTRY.replace(
        "    'llama': ModelRegistration(CausalLMModel),  # the reference\n",
        "    'llama': ModelRegistration(Qwen3CausalLMModel, task=\"text-generation\"),"
        "  # the reference\n",
    )


def test_keeps_comments_before_closing_brace_and_after_last_entry() -> None:
    source = 'X = {\n    "a": 1,  # one\n    # more below\n}\n'
    result = upsert_dict_entry(source, "X", "b", "2")
    assert result == 'X = {\n    "a": 1,  # one\n    # more below\n    "b": 2,\n}\n'


def test_adds_trailing_comma_when_last_entry_has_none() -> None:
    source = "X = {\n    'a': 1\n}\n"
    assert upsert_dict_entry(source, "X", "b", "[2]") == "X = {\n    'a': 1,\n    'b': [2],\n}\n"


def test_one_liner_stays_inline() -> None:
    assert upsert_dict_entry('X = {"a": 1}\n', "X", "b", "2") == 'X = {"a": 1, "b": 2}\n'


def test_empty_dict_becomes_multiline() -> None:
    result = upsert_dict_entry("X: dict[str, int] = {}\n", "X", "b", "2")
    assert result == 'X: dict[str, int] = {\n    "b": 2,\n}\n'


def test_nested_indentation_is_copied() -> None:
    source = "X = {\n        'a': 1,\n}\n"
    assert (
        upsert_dict_entry(source, "X", "b", "2") == "X = {\n        'a': 1,\n        'b': 2,\n}\n"
    )


def test_key_needing_escapes_round_trips() -> None:
    result = upsert_dict_entry('X = {"a": 1}\n', "X", 'it\'s "q"', "2")
    assert result == 'X = {"a": 1, "it\'s \\"q\\"": 2}\n'


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("Y = {}\n", "no module-level assignment `X = ...` found"),
        ("X = dict(a=1)\n", "module-level `X` is a call to `dict`, not a dict literal"),
        ("X = [1]\n", "module-level `X` is a List expression, not a dict literal"),
        ("X = {}\nX = {}\n", "module-level `X` is assigned more than once"),
        ("def f():\n    X = {}\n", "no module-level assignment `X = ...` found"),
        ("X = {\n", "cannot parse Python source at line 1"),
    ],
)
def test_unfamiliar_shapes_raise(source: str, message: str) -> None:
    with pytest.raises(CodemodError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        upsert_dict_entry(source, "X", "a", "1")


def test_bad_value_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="value is not a Python expression"):
        upsert_dict_entry("X = {}\n", "X", "a", "1 +")


def test_value_newer_than_this_pythons_ast_compares_as_text() -> None:
    source = 'X = {"a": f"{d["k"]}"}\n'
    assert upsert_dict_entry(source, "X", "a", 'f"{d["k"]}"') == source
    assert upsert_dict_entry(source, "X", "a", 'f"{d["j"]}"') == 'X = {"a": f"{d["j"]}"}\n'
