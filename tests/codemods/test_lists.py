from __future__ import annotations

import pytest

from onboard.codemods import CodemodError, upsert_tuple_in_list

CONFIGS = """\"\"\"Shared test configurations.\"\"\"

from __future__ import annotations

CAUSAL_LM_CONFIGS: list[tuple[str, dict, bool]] = [
    # === Text Generation (Llama-compatible) ===
    ("llama", {}, True),
    (
        "bitnet",
        {
            "hidden_act": "relu2",
            "tie_word_embeddings": True,
        },
        True,
    ),
    ( "gemma", {"head_dim": 256}, True ),  # odd spacing stays
    ("mistral", {}, False),
]

ENCODER_CONFIGS = [("bert", {}, True)]
"""

QWEN3 = '("qwen3", {"head_dim": 128}, True)'


def test_appends_tuple_on_its_own_line() -> None:
    result = upsert_tuple_in_list(CONFIGS, "CAUSAL_LM_CONFIGS", "qwen3", QWEN3)
    assert result == CONFIGS.replace(
        '    ("mistral", {}, False),\n]',
        '    ("mistral", {}, False),\n    ("qwen3", {"head_dim": 128}, True),\n]',
    )


def test_idempotent() -> None:
    once = upsert_tuple_in_list(CONFIGS, "CAUSAL_LM_CONFIGS", "qwen3", QWEN3)
    assert upsert_tuple_in_list(once, "CAUSAL_LM_CONFIGS", "qwen3", QWEN3) == once


def test_equivalent_multiline_tuple_is_left_alone() -> None:
    bitnet = '("bitnet", {"hidden_act": "relu2", "tie_word_embeddings": True}, True)'
    assert upsert_tuple_in_list(CONFIGS, "CAUSAL_LM_CONFIGS", "bitnet", bitnet) == CONFIGS
    gemma = "('gemma', {'head_dim': 256}, True,)"
    assert upsert_tuple_in_list(CONFIGS, "CAUSAL_LM_CONFIGS", "gemma", gemma) == CONFIGS


def test_replaces_changed_tuple_in_place() -> None:
    result = upsert_tuple_in_list(
        CONFIGS, "CAUSAL_LM_CONFIGS", "gemma", '("gemma", {"head_dim": 128}, True)'
    )
    assert result == CONFIGS.replace(
        '    ( "gemma", {"head_dim": 256}, True ),  # odd spacing stays\n',
        '    ("gemma", {"head_dim": 128}, True),  # odd spacing stays\n',
    )


def test_one_liner_list_stays_inline() -> None:
    result = upsert_tuple_in_list(CONFIGS, "ENCODER_CONFIGS", "roberta", '("roberta", {}, True)')
    assert result == CONFIGS.replace(
        'ENCODER_CONFIGS = [("bert", {}, True)]',
        'ENCODER_CONFIGS = [("bert", {}, True), ("roberta", {}, True)]',
    )


def test_empty_list_becomes_multiline() -> None:
    result = upsert_tuple_in_list("X = []\n", "X", "a", '("a", 1)')
    assert result == 'X = [\n    ("a", 1),\n]\n'


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("Y = []\n", "no module-level assignment `X = ...` found"),
        ("X = list()\n", "module-level `X` is a call to `list`, not a list literal"),
        ("X = {}\n", "module-level `X` is a Dict expression, not a list literal"),
        ("X = [\n", "cannot parse Python source"),
    ],
)
def test_unfamiliar_shapes_raise(source: str, message: str) -> None:
    with pytest.raises(CodemodError) as caught:
        upsert_tuple_in_list(source, "X", "a", '("a", 1)')
    assert str(caught.value).startswith(message)


def test_element_must_start_with_first_element() -> None:
    with pytest.raises(ValueError, match="must be a tuple starting with 'a'"):
        upsert_tuple_in_list("X = []\n", "X", "a", '("b", 1)')


TWICE = """\
CAUSAL_LM_CONFIGS = [
    # llama first
    ("llama", {}, True),
    # nemotron_h: dense
    ("nemotron_h", {"layer_types": ["mamba2"]}, True),
    # mistral: sliding
    ("mistral", {}, False),
    # nemotron_h: MoE
    ("nemotron_h", {"layer_types": ["moe"]}, True),
]
"""


def test_earlier_tuples_with_the_key_go_with_their_comments() -> None:
    new = '("nemotron_h", {"_config_cls": Ours}, True)'
    result = upsert_tuple_in_list(TWICE, "CAUSAL_LM_CONFIGS", "nemotron_h", new)
    assert result == (
        "CAUSAL_LM_CONFIGS = [\n"
        "    # llama first\n"
        '    ("llama", {}, True),\n'
        "    # mistral: sliding\n"
        '    ("mistral", {}, False),\n'
        "    # nemotron_h: MoE\n"
        '    ("nemotron_h", {"_config_cls": Ours}, True),\n'
        "]\n"
    )
    assert upsert_tuple_in_list(result, "CAUSAL_LM_CONFIGS", "nemotron_h", new) == result
    first = TWICE.replace('("llama", {}, True)', '("nemotron_h", {}, True)')
    result = upsert_tuple_in_list(first, "CAUSAL_LM_CONFIGS", "nemotron_h", new)
    assert result.startswith('CAUSAL_LM_CONFIGS = [\n    # mistral: sliding\n    ("mistral"')
