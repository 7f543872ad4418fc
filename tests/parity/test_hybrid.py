"""Parity for hybrid (recurrent-state) models, with mobius' own Bamba (Mamba2 + attention).

The states check compares every layer's cache (keys and values, conv and SSM states) after the
prefill and after every decode step; the sabotaged runs show that it, and the logits, catch a
cache fed to the wrong layer and a dropped D skip.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mobius._configs import BambaConfig
from mobius.models.bamba import BambaCausalLMModel

from onboard.parity.harness import DECODE_STEPS, Batch, Step
from onboard.parity.reference import HFRunner, _HFCache
from onboard.parity.report import Status
from onboard.targets.mobius import parity as mobius_parity

# Attention on layers 1 and 3. 8 Mamba heads give d_head 16 == d_state 16, so only the values,
# not the shapes, tell HF's SSM state layout from mobius' transposed one. A chunk of 4 makes HF
# scan the 9-token prompt in three chunks; the prompt is longer than the conv kernel (4).
TINY_BAMBA = {
    "model_type": "bamba",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "attn_layer_indices": [1, 3],
    "mamba_n_heads": 8,
    "mamba_d_state": 16,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_chunk_size": 4,
}
MAMBA_STATES = {"conv_state", "ssm_state"}


class FixedBambaConfig(BambaConfig):
    """mobius 0.1.0 reads transformers-5 ``full_attention`` as Mamba2 (hybrid notes, M3)."""

    @classmethod
    def from_transformers(cls, config: Any, parent_config: Any = None) -> BambaConfig:
        fixed = BambaConfig.from_transformers(config, parent_config)
        fixed.layer_types = [
            "full_attention" if kind in ("full_attention", "attention") else "mamba2"
            for kind in config.layers_block_type
        ]
        return fixed


class FixedBamba(BambaCausalLMModel):
    config_class = FixedBambaConfig


class _CrossedStates(mobius_parity.OnnxRunner):
    """Feeds each Mamba layer the other Mamba layer's cache on decode (same shapes)."""

    def decode(self, previous: Step, batch: Batch) -> Step:
        layers = list(previous.state)
        layers[0], layers[2] = layers[2], layers[0]
        return super().decode(Step(previous.logits, previous.kv, tuple(layers)), batch)


def _checks(provider: str = "default") -> dict[str, Any]:
    checks, _ = mobius_parity._provider_checks(FixedBamba, TINY_BAMBA, provider, "cpu")
    return {c.name: c for c in checks}


def test_bamba_passes_parity_with_states_after_prefill_and_every_decode_step() -> None:
    report = mobius_parity.run_parity(FixedBamba, TINY_BAMBA, model_type="bamba", bug_ids=())
    # mobius' Mamba2Block ignores the attention mask: left-padded positions reach the state,
    # which HF zeroes first (hybrid notes, section 2.1). Everything else matches.
    failures = [(c.provider, c.name) for c in report.failures]
    assert failures == [("default", "pad-left")], [c.to_dict() for c in report.failures]
    assert DECODE_STEPS >= 3
    for provider in mobius_parity.EXECUTION_PROVIDERS:
        checks = {c.name: c for c in report.checks if c.provider == provider}
        states = checks["states"]
        assert states.status is Status.PASS
        assert "4 layers (conv_state, key, ssm_state, value)" in states.detail
        assert f"after the prefill and {DECODE_STEPS} decode steps" in states.detail
        assert "kv-cache" not in checks  # the states check covers the attention layers
        assert checks["decode"].status is Status.PASS
        left = Status.FAIL if provider == "default" else Status.SKIP  # cpu: GQA, right only
        assert checks["pad-left"].status is left
        assert checks["pad-right"].status is Status.PASS


def test_a_state_fed_to_the_wrong_layer_fails_and_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mobius_parity, "OnnxRunner", _CrossedStates)
    checks = _checks()
    assert checks["prefill"].status is Status.PASS
    assert checks["decode"].status is Status.FAIL
    states = checks["states"]
    assert states.status is Status.FAIL
    assert states.detail.startswith("layer 0 conv_state after decode 1:"), states.detail


def test_a_dropped_d_skip_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """mobius is given D = 0 (no ``D * x`` skip) while the HF reference keeps its D."""
    import torch

    saved = mobius_parity.saved_checkpoint

    def without_d(model: Any) -> dict[str, Any]:
        return {
            name: torch.zeros_like(value) if name.endswith(".mamba.D") else value
            for name, value in saved(model).items()
        }

    monkeypatch.setattr(mobius_parity, "saved_checkpoint", without_d)
    checks = _checks()
    assert checks["weights"].status is Status.PASS
    assert checks["prefill"].status is Status.FAIL
    assert checks["states"].status is Status.FAIL


def test_hf_states_are_read_in_mobius_layout() -> None:
    """Conv states keep the last ``d_conv - 1`` inputs; Mamba2 SSM states swap their last two
    axes; DeltaNet recurrent states stay as they are."""
    import torch
    from transformers.cache_utils import LinearAttentionLayer

    layer = LinearAttentionLayer()
    conv = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    recurrent = torch.randn(2, 3, 5, 6)
    layer.update_conv_state(conv, conv_kernel_size=4)
    layer.update_recurrent_state(recurrent)

    mamba = _HFCache("ssm_state").layer(layer)
    assert set(mamba) == MAMBA_STATES
    np.testing.assert_array_equal(mamba["conv_state"], conv[..., 1:].numpy())
    np.testing.assert_array_equal(mamba["ssm_state"], recurrent.transpose(-1, -2).numpy())
    deltanet = _HFCache("recurrent_state").layer(layer)
    np.testing.assert_array_equal(deltanet["recurrent_state"], recurrent.numpy())
    assert _HFCache("ssm_state").layer(LinearAttentionLayer()) == {}  # an MLP layer


def test_attention_only_models_still_report_keys_and_values() -> None:
    """Attention-only caches stay in ``Step.kv``, so their runs keep the kv-cache check."""
    from onboard.hf_config import make_hf_config
    from onboard.parity.harness import prompt_batch
    from onboard.parity.reference import build_reference

    tiny = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "vocab_size": 256,
    }
    runner = HFRunner(build_reference(make_hf_config(tiny)))
    step = runner.prefill(prompt_batch(256))
    assert len(step.kv) == 2 and step.states == ()
