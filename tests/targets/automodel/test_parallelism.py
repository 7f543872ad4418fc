"""Model parallelism a generated AutoModel class declares (issue #19, scope 3).

The closest class's tensor-parallel flag is copied only where the plan AutoModel shards the
generated class with (HF's, through ``get_hf_tp_shard_plan``) covers every parameter; the
generated ``test_tensor_parallel_matches_unsharded`` runs that plan on two CPU ranks, and the
sabotage test shows it fails when the plan leaves a parameter out.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from transformers import Phi3Config, Qwen3Config, Qwen3ForCausalLM

from onboard.targets.automodel.parallelism import (
    Parallelism,
    closest_axes,
    hf_tp_plan,
    matches,
    parallelism,
    uncovered,
)
from onboard.targets.automodel.registry import open_library
from onboard.targets.base import Candidate, Library
from tests.targets.automodel.sabotage import assert_generated_tests_catch, generate_default


def qwen3_parameters() -> tuple[str, ...]:
    config = Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
    )
    with torch.device("meta"):
        return tuple(name for name, _ in Qwen3ForCausalLM(config).named_parameters())


def test_plan_is_hf_base_plan_under_the_base_model() -> None:
    plan = hf_tp_plan(Qwen3Config, "model", "lm_head")
    assert plan["lm_head"] == "colwise_rep"
    assert plan["model.layers.*.self_attn.q_proj"] == "colwise"
    assert plan["model.layers.*.self_attn.q_norm"] == "replicated_with_grad_allreduce"


def test_a_star_never_spans_a_dot() -> None:
    assert matches("model.layers.*.mlp.up_proj", "model.layers.3.mlp.up_proj")
    assert not matches("model.layers.*.mlp.up_proj", "model.layers.3.mlp.experts.0.up_proj")


def test_hf_plan_covers_qwen3() -> None:
    assert uncovered(qwen3_parameters(), hf_tp_plan(Qwen3Config, "model", "lm_head")) == ()


def test_parameters_beside_sharded_projections_need_the_plan() -> None:
    plan = {
        k: v for k, v in hf_tp_plan(Qwen3Config, "model", "lm_head").items() if "_norm" not in k
    }
    names = (*qwen3_parameters(), "model.layers.0.self_attn.sinks")
    missed = uncovered(names, plan)
    assert set(missed) == {
        "model.layers.0.self_attn.sinks",
        *(f"model.layers.{i}.self_attn.{n}_norm.weight" for i in (0, 1) for n in "qk"),
    }
    # the layers' and the final norm see the whole hidden state: replicated is right
    assert not any("layernorm" in name or name == "model.norm.weight" for name in missed)


def test_closest_axes_are_read_from_the_library_source() -> None:
    library = open_library(None)

    def axes(arch: str) -> tuple[str, ...]:
        return closest_axes(library, Candidate(library.variant(arch), ()))

    assert axes("LlamaForCausalLM") == ("tp", "cp", "pp")
    assert axes("Qwen3MoeForCausalLM") == ("cp", "pp", "ep")
    assert closest_axes(library, None) == ()


def designed(
    closest: str | None = "LlamaForCausalLM",
    config: type = Qwen3Config,
    names: tuple[str, ...] | None = None,
    kv_heads: int = 2,
    library: Library | None = None,
    **options: object,
) -> Parallelism:
    """``parallelism`` for a tiny Qwen3-sized model (4 heads) beside ``closest``."""
    library = library or open_library(None)
    return parallelism(
        library,
        Candidate(library.variant(closest), ()) if closest else None,
        config,
        qwen3_parameters() if names is None else names,
        base="model",
        head="lm_head",
        tiny={"num_attention_heads": 4, "num_key_value_heads": kv_heads},
        **options,
    )


def test_styles_automodel_cannot_translate_refuse_tp() -> None:
    found = designed(config=Phi3Config, names=("model.layers.0.self_attn.qkv_proj.weight",))
    assert not found.tp
    assert "rowwise_split_input" in found.refused
    assert "not copied from LlamaForCausalLM" in found.tp_said("Phi3Config")


def test_odd_tiny_heads_refuse_tp() -> None:
    found = designed(kv_heads=1)
    assert not found.tp and "1 key/value heads" in found.refused


class MlpOnlyConfig:
    """A config whose plan splits only the MLPs (Youtu's)."""

    base_model_tp_plan: ClassVar[dict[str, str]] = {
        "layers.*.mlp.gate_proj": "colwise",
        "layers.*.mlp.up_proj": "colwise",
        "layers.*.mlp.down_proj": "rowwise",
    }


def test_a_plan_that_leaves_the_attention_whole_refuses_tp() -> None:
    found = designed(config=MlpOnlyConfig)
    assert not found.tp and "leaves the attention whole" in found.refused
    assert designed().tp  # Qwen3's plan splits both


def test_moe_classes_leave_sharding_to_the_moe_parallelizer() -> None:
    found = designed(moe=True)
    assert not found.tp and "MoE parallelizer" in found.tp_said("Qwen3MoeConfig")


def test_a_source_without_replica_sync_leaves_q_k_norms_uncovered(tmp_path: Path) -> None:
    """Sources before 0.7.0 translate replicated_with_grad_allreduce to no style at all: each
    rank would keep its own heads' share of the q/k norms' gradients."""
    older = designed(None, library=replace(open_library(None), root=tmp_path))
    assert not older.replica_sync  # no tp_replicas.py under tmp_path
    assert {name.rsplit(".", 2)[-2] for name in older.uncovered} == {"q_norm", "k_norm"}
    installed = designed(None)
    assert installed.replica_sync and installed.uncovered == ()


# The generated class's plan without its q/k norms' entries: each rank then keeps only its
# own heads' share of those norms' gradients
POST_INIT = "        self.post_init()\n        self.tie_weights()\n"
NORMS_LEFT_OUT = (
    "        self.post_init()\n"
    "        for owner in (self, self.model):\n"
    "            owner._tp_plan = {k: v for k, v in owner._tp_plan.items() if 'norm' not in k}\n"
    "        self.tie_weights()\n"
)


def test_generated_tensor_parallel_test_catches_a_plan_that_misses_parameters(
    tmp_path: Path,
) -> None:
    """Exaone 4's class is not among AutoModel's own plans: it is sharded with HF's, whose q/k
    norm entries sum each rank's share of those norms' gradients."""
    out, result = generate_default("exaone4", tmp_path)
    model = result.root / result.plan.model_file
    text = model.read_text()
    assert "supports_tp: bool = True" in text
    recipe = next(out.glob("examples/llm_finetune/*/*.yaml")).read_text()
    assert "tp_size: 2" in recipe
    assert_generated_tests_catch(out, model, POST_INIT, NORMS_LEFT_OUT, "test_tensor_parallel")


@pytest.mark.slow
def test_kept_base_without_hf_plan_declares_no_tp(tmp_path: Path) -> None:
    """GPT-2's config has no base_model_tp_plan: only the head is placed, its layers' Conv1D
    projections would stay whole beside nothing sharded, and the flag is not copied."""
    out, result = generate_default("gpt2", tmp_path)
    text = (result.root / result.plan.model_file).read_text()
    assert "supports_tp: bool = False" in text
    assert (
        "test_tensor_parallel"
        not in next(out.glob("tests/unit_tests/models/*/test_*.py")).read_text()
    )
