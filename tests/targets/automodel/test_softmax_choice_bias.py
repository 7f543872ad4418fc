"""ERNIE 4.5 MoE's router: softmax over all experts, an expert-choice correction bias added for
the choice only (``moe_statics.e_score_correction_bias``, a ``[1, E]`` parameter on disk), the
weights gathered from the unbiased softmax and renormalised; sparse layers every
``moe_layer_interval``-th from ``moe_layer_start_index``. The generated model maps it onto
AutoModel's ``Gate`` (``score_func="softmax_with_bias"``) and its tests catch a copy that scores
without the bias."""

from __future__ import annotations

from pathlib import Path

from tests.targets.automodel.sabotage import assert_generated_tests_catch, generate_default

WITH_BIAS = '"score_func": "softmax_with_bias",'
WITHOUT_BIAS = '"score_func": "softmax",'


def test_ernie_softmax_router_with_choice_bias(tmp_path: Path) -> None:
    out, result = generate_default("ernie4_5_moe", tmp_path)
    model = result.root / result.plan.model_file
    assert '"force_e_score_correction_bias": True' in model.read_text()
    adapter = (model.parent / "state_dict_adapter.py").read_text()
    assert "value.reshape(1, -1) if name.endswith(CORRECTION_BIAS)" in adapter  # [E] -> [1, E]
    assert_generated_tests_catch(
        out,
        model,
        WITH_BIAS,
        WITHOUT_BIAS,
        "test_router_matches_hf or test_logits_match_hf",
    )
