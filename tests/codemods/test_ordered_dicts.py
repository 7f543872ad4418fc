from __future__ import annotations

import pytest

from onboard.codemods import CodemodError, upsert_ordereddict_entry

MAPPING = """from collections import OrderedDict

MODEL_ARCH_MAPPING = OrderedDict(
    [
        # Llama family
        (
            "LlamaForCausalLM",
            ("nemo_automodel.components.models.llama.model", "LlamaForCausalLM"),
        ),
        ("Qwen2ForCausalLM", ("nemo_automodel.components.models.qwen2.model", "Qwen2ForCausalLM")),
    ]
)
"""

KEY = "Qwen3ForCausalLM"
VALUE = '("nemo_automodel.components.models.qwen3.model", "Qwen3ForCausalLM")'


def test_appends_pair() -> None:
    result = upsert_ordereddict_entry(MAPPING, "MODEL_ARCH_MAPPING", KEY, VALUE)
    assert result == MAPPING.replace(
        '"Qwen2ForCausalLM")),\n',
        '"Qwen2ForCausalLM")),\n'
        '        ("Qwen3ForCausalLM", ("nemo_automodel.components.models.qwen3.model",'
        ' "Qwen3ForCausalLM")),\n',
    )


def test_idempotent() -> None:
    once = upsert_ordereddict_entry(MAPPING, "MODEL_ARCH_MAPPING", KEY, VALUE)
    assert upsert_ordereddict_entry(once, "MODEL_ARCH_MAPPING", KEY, VALUE) == once
    same = "('nemo_automodel.components.models.llama.model', 'LlamaForCausalLM')"
    assert upsert_ordereddict_entry(MAPPING, "MODEL_ARCH_MAPPING", "LlamaForCausalLM", same) == (
        MAPPING
    )


def test_replaces_only_the_value() -> None:
    result = upsert_ordereddict_entry(
        MAPPING, "MODEL_ARCH_MAPPING", "LlamaForCausalLM", '("m.llama", "Llama")'
    )
    assert result == MAPPING.replace(
        '("nemo_automodel.components.models.llama.model", "LlamaForCausalLM"),\n',
        '("m.llama", "Llama"),\n',
    )


def test_qualified_call_and_inline_list() -> None:
    source = "import collections\n\nM = collections.OrderedDict([('a', 1)])\n"
    result = upsert_ordereddict_entry(source, "M", "b", "2")
    assert result == "import collections\n\nM = collections.OrderedDict([('a', 1), ('b', 2)])\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("Y = OrderedDict([])\n", "no module-level assignment `M = ...` found"),
        ("M = {}\n", "module-level `M` is a Dict expression, not `OrderedDict([...])`"),
        ("M = OrderedDict(a=1)\n", "module-level `M` is a call to `OrderedDict`, not"),
        ("M = OrderedDict([('a', 1, 2)])\n", "the `M` entry for 'a' is not a (key, value) pair"),
        ("M = OrderedDict([\n", "cannot parse Python source"),
    ],
)
def test_unfamiliar_shapes_raise(source: str, message: str) -> None:
    with pytest.raises(CodemodError) as caught:
        upsert_ordereddict_entry(source, "M", "a", "1")
    assert str(caught.value).startswith(message)
