"""q/k norms after RoPE (HunYuan dense): the generated AutoModel attention rotates q and k, then
norms each head, and its tests catch a copy that norms before rotating."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir
from tests.targets.automodel.sabotage import parity_with, statuses

# HunYuanDenseV1Config's default head_dim is None, which its modeling cannot build with
HEAD_DIM = {"head_dim": 128}
ROTATE_THEN_NORM = (
    "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)\n"
    "        query_states = self.query_layernorm(query_states)\n"
    "        key_states = self.key_layernorm(key_states)\n"
)
NORM_THEN_ROTATE = (
    "query_states = self.query_layernorm(query_states)\n"
    "        key_states = self.key_layernorm(key_states)\n"
    "        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)\n"
)


@pytest.mark.slow
def test_hunyuan_norms_after_rope_pass_and_before_fail(automodel_target, tmp_path: Path) -> None:
    folder = default_config_dir("hunyuan_v1_dense", tmp_path / "models", **HEAD_DIM)
    options = NewOptions(
        model=str(folder), target="automodel", treat_as_new=True, out=tmp_path / "out"
    )
    result = onboard_new(options)
    assert result.parity.passed, [(c.name, c.detail) for c in result.parity.failures]
    assert [d.feature for d in result.proposal.chosen.deltas] == ["attention.qk_norm_after_rope"]

    broken = statuses(parity_with(result, "model.py", ROTATE_THEN_NORM, NORM_THEN_ROTATE))
    for check in ("test_attention_matches_hf(0)", "test_logits_match_hf(sdpa)", "prefill"):
        assert broken[check] is Status.FAIL, (check, broken)
