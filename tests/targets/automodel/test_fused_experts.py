"""Granite MoE keeps each layer's experts fused on disk (input_linear / output_linear) and its
MoE block under block_sparse_moe: the generated AutoModel adapter transposes the fused tensors
to AutoModel's grouped ones and back, and the generated layer moves the block to ``mlp``. The
generated tests pass on that code and fail once the adapter gets the experts wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.targets.automodel.propose import moe_blockers
from tests.targets.automodel.sabotage import assert_generated_tests_catch, generate_default

MODEL_TYPE = "granitemoe"
ADAPTER = "state_dict_adapter.py"
MODEL = "model.py"
ROUND_TRIP_AND_LOGITS = "test_adapter_round_trip_is_exact or test_logits_match_hf"

# What the generated tests must catch: (file, edit of it, the tests that must all fail).
SABOTAGE = {
    # the checkpoint's [E, out, in] loaded as is: AutoModel's [E, in, out] does not fit it
    "untransposed": (
        ADAPTER,
        "return fused.transpose(1, 2).to(self.dtype)",
        "return fused.to(self.dtype)",
        ROUND_TRIP_AND_LOGITS,
    ),
    # shapes right, values wrong: gate and up halves (and the down rows) swapped
    "halves-swapped": (
        ADAPTER,
        "return fused.transpose(1, 2).to(self.dtype)",
        "return fused.transpose(1, 2).to(self.dtype).roll(fused.shape[1] // 2, dims=2)",
        ROUND_TRIP_AND_LOGITS,
    ),
    # the router left under its checkpoint name (unread: the round trip alone cannot see it)
    "router-unread": (
        ADAPTER,
        'HF_TO_NATIVE = ((r"\\.block_sparse_moe\\.router\\.layer\\.weight$", '
        'r".mlp.gate.weight"),)',
        "HF_TO_NATIVE = ()",
        "test_logits_match_hf",
    ),
}


def test_fused_experts_are_generated_not_refused(tmp_path: Path) -> None:
    out, result = generate_default(MODEL_TYPE, tmp_path)
    assert not moe_blockers(result.analysis.spec)
    package = (out / result.plan.model_file).parent
    adapter = (package / ADAPTER).read_text()
    model = (package / MODEL).read_text()
    assert "block_sparse_moe.input_linear.weight" in adapter
    assert '.mlp.experts.gate_and_up_projs"' in adapter
    assert 'hf_block = self._modules.pop("block_sparse_moe")' in model
    assert "def block_sparse_moe(self) -> nn.Module:" in model
    # HF divides the logits, not the head's input (modeling_granitemoe.py)
    assert "logits = logits * 1.0 / self.config.logits_scaling" in model


@pytest.mark.parametrize(
    "how",
    [
        "halves-swapped",
        pytest.param("untransposed", marks=pytest.mark.slow),
        pytest.param("router-unread", marks=pytest.mark.slow),
    ],
)
def test_generated_tests_catch_wrong_fused_experts(tmp_path: Path, how: str) -> None:
    out, result = generate_default(MODEL_TYPE, tmp_path)
    file, old, new, checks = SABOTAGE[how]
    path = (out / result.plan.model_file).parent / file
    assert_generated_tests_catch(out, path, old, new, checks)
