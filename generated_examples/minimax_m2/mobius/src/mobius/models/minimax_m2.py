# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from MiniMaxAI/MiniMax-M2 (revision unknown), transformers 5.18.0
# modeling_minimax_m2.py sha256:06fae5e13192bacb.
# Closest mobius class: MoECausalLMModel (registry key arctic).

"""MiniMaxM2 causal language model.

Like :class:`~mobius.models.moe.MoECausalLMModel`, with the changes listed below.

- config.num_local_experts routed experts, config.num_experts_per_tok per token: sigmoid
  over all experts, then top-k (choice shifted by e_score_correction_bias), renormalised
- q_norm / k_norm over the full projection width before RoPE

Replicates HuggingFace's ``MiniMaxM2ForCausalLM``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from onnxscript import OpBuilder, nn

from mobius._configs import ArchitectureConfig, MiniMaxM2Config
from mobius._weight_utils import rename_weight_keys
from mobius.components import (
    MLP,
    Attention,
    MoELayer,
    RMSNorm,
    StaticCacheState,
)
from mobius.models.base import TextModel
from mobius.models.moe import MoECausalLMModel

if TYPE_CHECKING:
    import onnx_ir as ir


class MiniMaxM2Router(nn.Module):
    """Routes each token to its top-k experts, returning (weights, experts) like mobius' gates.

    Sigmoid over all experts, then top-k (choice shifted by e_score_correction_bias),
    renormalised.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.num_experts = config.num_local_experts
        self.top_k = config.num_experts_per_tok
        self.norm_topk_prob = config.norm_topk_prob
        self.routed_scaling_factor = config.routed_scaling_factor
        self.weight = nn.Parameter([self.num_experts, config.hidden_size])
        self.e_score_correction_bias = nn.Parameter([self.num_experts])

    def forward(self, op: OpBuilder, hidden_states: ir.Value):
        logits = op.MatMul(hidden_states, op.Transpose(self.weight, perm=[1, 0]))
        scores = op.Sigmoid(logits)
        # The correction bias decides which experts are chosen, not their weights.
        choice = op.Add(scores, self.e_score_correction_bias)
        _, experts = op.TopK(choice, op.Constant(value_ints=[self.top_k]), axis=-1, _outputs=2)
        weights = op.GatherElements(scores, experts, axis=-1)
        if self.norm_topk_prob:
            total = op.ReduceSum(weights, [-1], keepdims=True)
            weights = op.Div(weights, op.Add(total, 1e-20))
        if not math.isclose(self.routed_scaling_factor, 1.0):
            weights = op.Mul(weights, self.routed_scaling_factor)
        return weights, experts


def _is_moe_layer(config: ArchitectureConfig, index: int) -> bool:
    return True


class MiniMaxM2DecoderLayer(nn.Module):
    """Pre-norm decoder layer whose MLP is routed experts (or dense)."""

    # hands a static cache on to the attention, as DecoderLayer does
    _supports_static_cache = True

    def __init__(self, config: ArchitectureConfig, index: int):
        super().__init__()
        self.self_attn = Attention(
            config,
            rms_norm_class=RMSNorm,
        )
        if _is_moe_layer(config, index):
            gate = MiniMaxM2Router(config)
            self.mlp = MoELayer(config, gate=gate)
        else:
            self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(
        self,
        op: OpBuilder,
        hidden_states: ir.Value,
        attention_bias: ir.Value | None,
        position_embeddings: tuple | None,
        past_key_value: tuple | StaticCacheState | None,
    ):
        static_cache = None
        if isinstance(past_key_value, StaticCacheState):
            static_cache, past_key_value = past_key_value, None
        residual = hidden_states
        hidden_states = self.input_layernorm(op, hidden_states)
        attn_output, present_key_value = self.self_attn(
            op,
            hidden_states=hidden_states,
            attention_bias=attention_bias,
            position_embeddings=position_embeddings,
            past_key_value=past_key_value,
            static_cache=static_cache,
        )
        hidden_states = op.Add(residual, attn_output)

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(op, hidden_states)
        hidden_states = self.mlp(op, hidden_states)
        hidden_states = op.Add(residual, hidden_states)
        return hidden_states, present_key_value


class MiniMaxM2TextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - config.num_local_experts routed experts, config.num_experts_per_tok per token:
      sigmoid over all experts, then top-k (choice shifted by e_score_correction_bias),
      renormalised
    """

    def __init__(self, config: ArchitectureConfig):
        # TextModel's embedding, final norm and RoPE; its layers would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.layers = nn.ModuleList(
            [MiniMaxM2DecoderLayer(config, index) for index in range(config.num_hidden_layers)]
        )
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class MiniMaxM2CausalLMModel(MoECausalLMModel):
    """MiniMaxM2 causal LM built on :class:`MiniMaxM2TextModel`.

    Replicates HuggingFace's ``MiniMaxM2ForCausalLM``.
    """

    config_class = MiniMaxM2Config

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = MiniMaxM2TextModel(config)

    def preprocess_weights(self, state_dict):
        # The checkpoint's names for these weights differ from the generated layers'.
        state_dict = rename_weight_keys(
            state_dict,
            [
                (
                    ".block_sparse_moe.e_score_correction_bias",
                    ".block_sparse_moe.gate.e_score_correction_bias",
                ),
                (
                    ".mlp.e_score_correction_bias",
                    ".block_sparse_moe.gate.e_score_correction_bias",
                ),
                (".block_sparse_moe.", ".mlp."),
                (".w1.", ".gate_proj."),
                (".w3.", ".up_proj."),
                (".w2.", ".down_proj."),
            ],
        )
        return super().preprocess_weights(state_dict)
