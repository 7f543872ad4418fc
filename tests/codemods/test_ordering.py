from __future__ import annotations

import pytest

from onboard.codemods._ordering import insertion_index, natural_key


def test_natural_key_matches_ruff_module_order() -> None:
    modules = ["qwen", "qwen3_asr", "qwen3_tts", "qwen3_tts_tokenizer", "qwen35", "qwen_vl"]
    assert sorted(modules, key=natural_key) == modules


@pytest.mark.parametrize(
    ("existing", "new", "expected"),
    [
        # isort order-by-type: CONSTANTS, Classes, functions; case-insensitive, natural digits.
        (["MODEL_MAP", "ModelRegistry", "registry"], "Alpha", 1),
        (["DeepSeekV4Model", "DFlashDraftModel", "LLaDAModel"], "Gemma", 2),
        (["Qwen3VLTextModel", "Qwen25VLTextModel"], "Qwen3Model", 0),
        # Plain case-sensitive order, when that is what the list follows.
        (["B", "C", "a"], "b", 3),
        # Unsorted, or with non-name entries: append.
        (["b", "a"], "c", 2),
        (["a", None], "b", 2),
        ([], "a", 0),
    ],
)
def test_insertion_index(existing: list[str | None], new: str, expected: int) -> None:
    assert insertion_index(existing, new) == expected
