"""BitNet's norm of the heads' output before o_proj (attn_sub_norm): the generated AutoModel
attention applies it, HF's own MLP (kept) its ffn_sub_norm; a copy that feeds o_proj the heads'
output as it is fails parity."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir
from tests.targets.automodel.sabotage import parity_with, statuses

SUB_NORM = "        attn_output = self.attn_sub_norm(attn_output)\n"
TO_O_PROJ = "        return self.o_proj(attn_output), attn_weights\n"


def test_bitnet_attention_norms_its_output_before_o_proj(tmp_path: Path) -> None:
    folder = default_config_dir("bitnet", tmp_path / "models")
    options = NewOptions(model=str(folder), target="automodel", out=tmp_path / "out", parity=False)
    result = onboard_new(options)
    features = [d.feature for d in result.proposal.chosen.deltas]
    assert {"attention.sub_norm", "mlp.sub_norm"} <= set(features), features
    text = (result.root / result.plan.model_file).read_text()
    assert SUB_NORM + TO_O_PROJ in text


@pytest.mark.slow
def test_bitnet_sub_norms_pass_and_fail_without(automodel_target, tmp_path: Path) -> None:
    folder = default_config_dir("bitnet", tmp_path / "models")
    options = NewOptions(model=str(folder), target="automodel", out=tmp_path / "out")
    result = onboard_new(options)
    assert result.parity.passed, [(c.name, c.detail) for c in result.parity.failures]
    broken = statuses(parity_with(result, "model.py", SUB_NORM, ""))
    assert broken["prefill"] is Status.FAIL, broken
