"""MiniCPM3's multi-head latent attention in generated AutoModel code: HF's attention and its
rotary tables kept whole (AutoModel's own MLA, DeepSeek-V3's, rotates interleaved pairs where
MiniCPM3 rotates halves). The generated tests pass on that code and fail once the RoPE part of
the heads is left unrotated, or the logits scale moves from the head's input to its output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.targets.automodel.sabotage import assert_generated_tests_catch, generate_default

MODEL_TYPE = "minicpm3"
ROTATION = "position_embeddings=position_embeddings,\n            attention_mask"

# What the generated tests must catch: (edit of the generated model, the tests that must fail).
SABOTAGE = {
    # cos 1, sin 0: the RoPE part of each q/k head passes unrotated
    "rope-dropped": (
        ROTATION,
        "position_embeddings=(\n"
        "                torch.ones_like(position_embeddings[0]),\n"
        "                torch.zeros_like(position_embeddings[1]),\n"
        "            ),\n"
        "            attention_mask",
        "test_attention_matches_hf or test_logits_match_hf",
    ),
    # lm_head(h) / s instead of HF's lm_head(h / s): equal in exact arithmetic only
    "logits-scaled-after-head": (
        "hidden_states = outputs.last_hidden_state * 1.0 / self.config.logits_scaling\n"
        "        logits = compute_lm_head_logits(self.lm_head, hidden_states, "
        "logits_to_keep).logits",
        "logits = compute_lm_head_logits(\n"
        "            self.lm_head, outputs.last_hidden_state, logits_to_keep\n"
        "        ).logits * 1.0 / self.config.logits_scaling",
        "test_logits_match_hf",
    ),
}


def test_latent_attention_keeps_hf_attention_and_rotary(tmp_path: Path) -> None:
    out, result = generate_default(MODEL_TYPE, tmp_path)
    model = (out / result.plan.model_file).read_text()
    assert "class MiniCPM3Attention(HFMiniCPM3Attention):" in model
    assert "self.rotary_emb = HFMiniCPM3RotaryEmbedding(config=config)" in model
    assert "LlamaRotaryEmbedding" not in model and "apply_rotary_pos_emb" not in model
    assert model.count(ROTATION) == 1
    # HF divides the head's input by logits_scaling (modeling_minicpm3.py: lm_head(h / s))
    assert "hidden_states = outputs.last_hidden_state * 1.0 / self.config.logits_scaling" in model


@pytest.mark.parametrize(
    "how", ["rope-dropped", pytest.param("logits-scaled-after-head", marks=pytest.mark.slow)]
)
def test_generated_tests_catch_wrong_latent_attention(tmp_path: Path, how: str) -> None:
    out, result = generate_default(MODEL_TYPE, tmp_path)
    old, new, checks = SABOTAGE[how]
    path = out / result.plan.model_file
    assert_generated_tests_catch(out, path, old, new, checks)
