# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from ember-tiny (revision unknown), remote code
# configuration_ember.py sha256:30f12be99ba75ed6, modeling_ember.py sha256:5b7a2b95ab46e1c2
# (transformers 5.18.0).
# Closest mobius class: Gemma2CausalLMModel (registry key gemma2).

"""Ember causal language model.

Like :class:`~mobius.models.gemma.Gemma2CausalLMModel`, with the changes listed below.

- norms before and after attention and the MLP
- embeddings x sqrt(hidden_size), exact
- q_norm / k_norm over each head before RoPE
- attention biases (q/k/v True, o False)

Replicates HuggingFace's ``EmberForCausalLM``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from onnxscript import OpBuilder, nn

from mobius._configs import ArchitectureConfig, EmberConfig
from mobius.components import (
    MLP,
    Attention,
    RMSNorm,
    StaticCacheState,
)
from mobius.models.base import TextModel
from mobius.models.gemma import Gemma2CausalLMModel, GemmaScaledWordEmbedding

if TYPE_CHECKING:
    import onnx_ir as ir


class EmberDecoderLayer(nn.Module):
    """Norms before and after attention and the MLP decoder layer."""

    # hands a static cache on to the attention, as DecoderLayer does
    _supports_static_cache = True

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.self_attn = Attention(
            config,
            rms_norm_class=RMSNorm,
        )
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.pre_feedforward_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_feedforward_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

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
        attn_output = self.post_attention_layernorm(op, attn_output)
        hidden_states = op.Add(residual, attn_output)

        residual = hidden_states
        hidden_states = self.pre_feedforward_layernorm(op, hidden_states)
        hidden_states = self.mlp(op, hidden_states)
        hidden_states = self.post_feedforward_layernorm(op, hidden_states)
        hidden_states = op.Add(residual, hidden_states)
        return hidden_states, present_key_value


class EmberTextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - norms before and after attention and the MLP
    - embeddings x sqrt(hidden_size), exact
    """

    def __init__(self, config: ArchitectureConfig):
        # TextModel's embedding, final norm and RoPE; its layers would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.embed_tokens = GemmaScaledWordEmbedding(
            config.vocab_size,
            config.hidden_size,
            config.pad_token_id,
            embed_scale=config.hidden_size**0.5,
        )
        self.layers = nn.ModuleList(
            [EmberDecoderLayer(config) for _ in range(config.num_hidden_layers)]
        )
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class EmberCausalLMModel(Gemma2CausalLMModel):
    """Ember causal LM built on :class:`EmberTextModel`.

    Replicates HuggingFace's ``EmberForCausalLM``.
    """

    config_class = EmberConfig

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = EmberTextModel(config)
