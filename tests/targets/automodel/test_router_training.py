"""HF's training-time router behaviour in generated AutoModel MoE code: recognised in HF's
source, implemented, and caught by the generated tests when the code ignores it."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import CONFIG_MAPPING

from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.automodel.design import _switches
from onboard.targets.automodel.hf_facts import HFNames
from onboard.targets.automodel.router_training import RouterTraining, router_training
from tests.hub_cache import fixture_config
from tests.targets.automodel.sabotage import assert_generated_tests_catch

# model_type -> (HF class prefix, config keys of the expert count and top-k)
MODELS = {
    "mixtral": ("Mixtral", ("num_local_experts", "num_experts_per_tok")),
    # the spec's name; HF's causal LM reads config.num_experts, an alias of it (attribute_map)
    "qwen3_moe": ("Qwen3Moe", ("num_local_experts", "num_experts_per_tok")),
    "phimoe": ("Phimoe", ("num_local_experts", "num_experts_per_tok")),
    "laguna": ("Laguna", ("num_experts", "num_experts_per_tok")),
}


def _recognised(model_type: str) -> RouterTraining:
    prefix, keys = MODELS[model_type]
    classes = {
        "causal_lm": f"{prefix}ForCausalLM",
        "pretrained": f"{prefix}PreTrainedModel",
        "sparse_block": f"{prefix}SparseMoeBlock",
        "router": f"{prefix}TopKRouter",
    }
    module = f"transformers.models.{model_type}.modeling_{model_type}"
    aliases = dict(CONFIG_MAPPING[model_type].attribute_map)
    return router_training(module, f"modeling_{model_type}.py", classes, keys, aliases)


@pytest.mark.parametrize(
    ("model_type", "handled"),
    [
        ("mixtral", ("output_router_logits", "router_jitter_noise")),
        ("qwen3_moe", ("output_router_logits",)),  # no jitter in HF's Qwen3-MoE
        # the router's logits go through PhiMoE's sparsemixer (its forward calls super), and its
        # jitter sits in the router, not before it: neither is HF's Mixtral form
        ("phimoe", ()),
        ("laguna", ()),  # soft-capped router logits: not the raw logits AutoModel's Gate has
    ],
)
def test_router_training_is_recognised_in_hf_source(model_type, handled) -> None:
    found = _recognised(model_type)
    assert found.handled == handled
    assert bool(found.coef_key) == ("output_router_logits" in handled)
    for where in (found.aux_loss, found.jitter):
        assert not where or where.startswith(f"modeling_{model_type}.py:")


def test_unrecognised_switches_stay_refused() -> None:
    hf = HFNames(
        module="transformers.models.mixtral.modeling_mixtral",
        source_file="modeling_mixtral.py",
        **dict.fromkeys(
            ("causal_lm", "pretrained", "decoder_layer", "attention", "mlp", "norm"), ""
        ),
        **dict.fromkeys(("rotary", "embedding", "config"), ""),
    )
    refused = {r.text for r in _switches(hf)}
    assert refused == {"output_router_logits", "router_jitter_noise"}
    assert {r.text for r in _switches(hf, ("output_router_logits",))} == {"router_jitter_noise"}


def _generate(repo_id: str, out: Path):
    folder = str(fixture_config(repo_id).parent)
    options = NewOptions(model=folder, target="automodel", treat_as_new=True, out=out, parity=False)
    return onboard_new(options)


def test_qwen3_moe_gets_the_loss_and_no_jitter(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _generate("Qwen/Qwen3-30B-A3B", out)
    model = (out / result.plan.model_file).read_text()
    tests = next(out.glob("tests/unit_tests/models/*/test_*.py")).read_text()
    assert "UNSUPPORTED_SWITCHES" not in model
    assert "load_balancing_loss_func(" in model and "jitter" not in model
    assert "def test_load_balancing_loss_matches_hf" in tests
    assert "def test_router_jitter_matches_hf" not in tests


# What each behaviour's generated test must catch: (edit of the generated model, the test).
SABOTAGE = {
    "coefficient": (
        "loss = loss + self.config.router_aux_loss_coef * aux_loss.to(loss.device)",
        "loss = loss + aux_loss.to(loss.device)",
        "test_load_balancing_loss_matches_hf",
    ),
    "recipe-coefficient": (
        "aux_term = self.config.router_aux_loss_coef * aux_loss",
        "aux_term = 0.0 * aux_loss",
        "test_logits_carry_the_load_balancing_gradient",
    ),
    "mask": (
        "self.config.num_experts_per_tok,\n            attention_mask,\n",
        "self.config.num_experts_per_tok,\n            None,\n",
        "test_load_balancing_loss_matches_hf",
    ),
    "jitter": (
        "if self.training and self.jitter_noise > 0:",
        "if False:",
        "test_router_jitter_matches_hf",
    ),
}


@pytest.mark.parametrize(
    "how",
    [
        "coefficient",
        pytest.param("recipe-coefficient", marks=pytest.mark.slow),
        pytest.param("mask", marks=pytest.mark.slow),
        pytest.param("jitter", marks=pytest.mark.slow),
    ],
)
def test_generated_tests_catch_an_ignored_router_behaviour(tmp_path: Path, how: str) -> None:
    """Mixtral: its test passes on the generated code and fails once the code ignores the
    coefficient (with labels, or in the logits' gradient), the padding mask or the jitter."""
    out = tmp_path / "out"
    result = _generate("mistralai/Mixtral-8x7B-v0.1", out)
    old, new, test = SABOTAGE[how]
    model_file = out / result.plan.model_file
    assert_generated_tests_catch(out, model_file, old, new, test)
