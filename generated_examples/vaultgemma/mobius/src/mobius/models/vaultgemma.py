# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from google/vaultgemma-1b (revision unknown), transformers 5.18.0
# modeling_vaultgemma.py sha256:3eeb3fb03312086e.
# Closest mobius class: Gemma2CausalLMModel (registry key gemma2).

"""VaultGemma causal language model.

Like :class:`~mobius.models.gemma.Gemma2CausalLMModel`, with the changes listed below.

- norms scale by (1 + w)
- embeddings x sqrt(hidden_size), exact
- q.k scaled by config.query_pre_attn_scalar**-0.5
- attention kind per layer from config.layer_types
- sliding-window mask on the default EP too
- attention logits soft-capped
- follows config.attention_bias (set: attention.o_bias True, attention.qkv_bias True)

Replicates HuggingFace's ``VaultGemmaForCausalLM``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from onnxscript import OpBuilder, nn

from mobius._configs import ArchitectureConfig, VaultGemmaConfig
from mobius._weight_utils import rename_weight_keys
from mobius.components import (
    DecoderLayer,
    OffsetRMSNorm,
    create_attention_bias,
)
from mobius.models.base import TextModel
from mobius.models.gemma import Gemma2CausalLMModel, GemmaScaledWordEmbedding

if TYPE_CHECKING:
    import onnx_ir as ir


class VaultGemmaTextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - norms scale by (1 + w)
    - embeddings x sqrt(hidden_size), exact
    - q.k scaled by config.query_pre_attn_scalar**-0.5
    - attention kind per layer from config.layer_types
    - sliding-window mask on the default EP too
    - follows config.attention_bias (set: attention.o_bias True, attention.qkv_bias True)
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
            [
                DecoderLayer(
                    config,
                    norm_class=OffsetRMSNorm,
                    attention_scale=config.query_pre_attn_scalar**-0.5,
                )
                for _ in range(config.num_hidden_layers)
            ]
        )
        self.norm = OffsetRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(
        self,
        op: OpBuilder,
        input_ids: ir.Value,
        attention_mask: ir.Value,
        position_ids: ir.Value,
        past_key_values: list | None = None,
        inputs_embeds: ir.Value | None = None,
    ):
        if attention_mask is None:
            # A static cache takes the library's causal path, as mobius' own windowed models do.
            return super().forward(
                op, input_ids, attention_mask, position_ids, past_key_values, inputs_embeds
            )
        if inputs_embeds is not None:
            hidden_states = inputs_embeds
        else:
            hidden_states = self.embed_tokens(op, input_ids)
        query = input_ids if input_ids is not None else hidden_states
        rotary = self.rotary_emb(op, position_ids) if self.rotary_emb is not None else None
        position_embeddings = dict.fromkeys(("sliding_attention", "full_attention"), rotary)
        attention_bias = {
            "sliding_attention": create_attention_bias(
                op,
                input_ids=query,
                attention_mask=attention_mask,
                sliding_window=self.config.sliding_window,
                dtype=self._dtype,
            ),
            "full_attention": create_attention_bias(
                op,
                input_ids=query,
                attention_mask=attention_mask,
                dtype=self._dtype,
            ),
        }
        present_key_values = []
        past_kvs = past_key_values or [None] * len(self.layers)
        layer_types = self.config.layer_types or ["full_attention"] * len(self.layers)
        for layer, layer_type, past_kv in zip(self.layers, layer_types, past_kvs, strict=True):
            hidden_states, present_kv = layer(
                op,
                hidden_states=hidden_states,
                attention_bias=attention_bias[layer_type],
                position_embeddings=position_embeddings[layer_type],
                past_key_value=past_kv,
            )
            present_key_values.append(present_kv)
        hidden_states = self.norm(op, hidden_states)
        return hidden_states, present_key_values


class VaultGemmaCausalLMModel(Gemma2CausalLMModel):
    """VaultGemma causal LM built on :class:`VaultGemmaTextModel`.

    Replicates HuggingFace's ``VaultGemmaForCausalLM``.
    """

    config_class = VaultGemmaConfig

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = VaultGemmaTextModel(config)

    def preprocess_weights(self, state_dict):
        # The checkpoint's names for these weights differ from the generated layers'.
        state_dict = rename_weight_keys(
            state_dict,
            [
                (".pre_feedforward_layernorm.", ".post_attention_layernorm."),
            ],
        )
        return super().preprocess_weights(state_dict)
