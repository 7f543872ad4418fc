"""Apertus' xielu activation learns two parameters per MLP (``mlp.act_fn.alpha_p``,
``alpha_n``). The generated decoder layer keeps HF's MLP whole, so they are HF's parameters under
HF's names: loaded, exported and trained as HF trains them. Its tests catch a copy whose
activation learns nothing."""

from __future__ import annotations

from pathlib import Path

from tests.targets.automodel.sabotage import assert_generated_tests_catch, generate_default

LAYER_INIT = (
    "        self.self_attn = ApertusAttention("
    "config=config, layer_idx=layer_idx, backend=backend)\n"
)
FROZEN = LAYER_INIT + "        self.mlp.act_fn.requires_grad_(False)\n"


def test_apertus_xielu_parameters_learn(tmp_path: Path) -> None:
    out, result = generate_default("apertus", tmp_path)
    model = result.root / result.plan.model_file
    assert "xielu (HF's act_fn module," in model.read_text()
    assert_generated_tests_catch(out, model, LAYER_INIT, FROZEN, "test_loss_and_gradients")
