"""Generated names follow each library's spelling."""

from __future__ import annotations

import pytest

from onboard.naming import class_prefix, spelled_as


@pytest.mark.parametrize(
    ("architecture", "model_type", "mobius"),
    [
        ("Qwen3MoeForCausalLM", "qwen3_moe", "Qwen3MoE"),  # mobius: Qwen2MoECausalLMModel
        ("Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", "Qwen35MoE"),  # Qwen35MoE...
        ("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", "Qwen25VL"),  # Qwen25VLVisionModel
        ("GraniteMoeHybridForCausalLM", "granitemoehybrid", "GraniteMoEHybrid"),
        ("MoeyForCausalLM", "moey", "Moey"),  # a name that starts a word is left alone
        ("Qwen3ForCausalLM", "qwen3", "Qwen3"),
    ],
)
def test_mobius_spells_moe_and_drops_underscores(architecture, model_type, mobius) -> None:
    prefix = class_prefix(architecture, model_type)
    assert spelled_as(prefix, "mobius") == mobius
    assert spelled_as(prefix, "automodel") == prefix  # AutoModel keeps HF's class names
