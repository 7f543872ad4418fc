"""HRM, from the backlog: its checkpoint's fused tensors are read as transformers cuts them, and
its two stacks of layers run in a recurrence are refused by name, with the forward's lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.analysis.layer_stacks import layer_stacks, refuse_repeated_stacks, stack_calls
from onboard.analysis.load_splits import read_load_splits
from onboard.checkpoint import tensor_shapes
from onboard.errors import UnsupportedFeatureError
from onboard.source import SourceFile


def _hrm():
    from transformers import HrmTextConfig, HrmTextForCausalLM

    config = HrmTextConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
        num_attention_heads=2, head_dim=16, H_cycles=2, L_cycles=2,
    )  # fmt: skip
    return HrmTextForCausalLM(config)


def _modeling() -> SourceFile:
    import transformers.models.hrm_text.modeling_hrm_text as modeling

    return SourceFile.read(Path(modeling.__file__))


def test_hrm_fused_tensors_are_cut_gate_first() -> None:
    """transformers cuts attn.gqkv_proj into the output gate, q, k, v (in that order) and
    mlp.gate_up_proj into gate, up: proved by value on the saved tensors."""
    model = _hrm()
    splits = read_load_splits(model, tensor_shapes(model))
    assert {s.fused: s.parts for s in splits} == {
        "mlp.gate_up_proj.weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
        "attn.gqkv_proj.weight": (
            "self_attn.gate_proj.weight",
            "self_attn.q_proj.weight",
            "self_attn.k_proj.weight",
            "self_attn.v_proj.weight",
        ),
    }
    assert all(s.where.startswith("conversion_mapping.py:") for s in splits)


def test_hrm_stacks_and_their_calls_in_cycles_are_found() -> None:
    model = _hrm()
    assert layer_stacks(model) == ("model.L_module.layers", "model.H_module.layers")
    calls = stack_calls([_modeling()], "HrmTextModel", ("L_module", "H_module"))
    assert [(c.stack, c.loops) for c in calls] == [
        ("L_module", ("range(self.config.H_cycles)", "range(self.config.L_cycles)")),
        ("H_module", ("range(self.config.H_cycles)",)),
    ]
    source = _modeling().text.splitlines()
    for call in calls:
        line = int(call.where.rpartition(":")[2])
        assert f"self.{call.stack}(" in source[line - 1]


def test_hrm_is_refused_by_its_recurrence() -> None:
    with pytest.raises(UnsupportedFeatureError, match=r"HrmTextModel runs 2 stacks") as refused:
        refuse_repeated_stacks(_hrm(), [_modeling()])
    assert "modeling_hrm_text.py:" in str(refused.value)
    assert "range(self.config.L_cycles)" in str(refused.value)


def test_one_stack_is_not_refused() -> None:
    from tests.analysis.test_day0_regressions import _llama

    model = _llama("OnboardTestOneStackForCausalLM", [])
    assert layer_stacks(model) == ("model.layers",)
    refuse_repeated_stacks(model, [])


@pytest.mark.slow
def test_the_backlog_row_is_refused_by_the_recurrence(tmp_path: Path) -> None:
    """transformers' default HRM config: past the fused tensors, refused by its stacks."""
    from onboard.analysis import analyse
    from onboard.source import load_source
    from tests.new_types import default_config_dir

    folder = default_config_dir("hrm_text", tmp_path)
    with pytest.raises(UnsupportedFeatureError, match="runs 2 stacks of HrmTextDecoderLayer"):
        analyse(load_source(str(folder)))
