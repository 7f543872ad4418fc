"""Cohere's q/k norms hold a weight row per head: AutoModel's generated forward would share one
weight across the heads, so the generated attention keeps HF's module whole. use_qk_norm switches
them, and the code is generated from the flag flipped (no q/k norms): HF's attention is kept whole
for both values, so the one class reads the flag as HF's does."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir


@pytest.mark.slow
def test_qk_norm_with_a_weight_per_head_keeps_hf_attention(tmp_path: Path) -> None:
    folder = default_config_dir("cohere", tmp_path / "models", use_qk_norm=True)
    options = NewOptions(
        model=str(folder),
        target="automodel",
        treat_as_new=True,
        out=tmp_path / "out",
        parity=False,
    )
    result = onboard_new(options)
    model = (result.root / result.plan.model_file).read_text()
    assert "class CohereAttention(HFCohereAttention):" in model
    assert "    - q/k norms with a weight per head\n" in model
    assert "self.rotary_emb = HFCohereRotaryEmbedding(config=config)" in model
    assert "was generated for use_qk_norm=False or use_qk_norm=True only" in model
