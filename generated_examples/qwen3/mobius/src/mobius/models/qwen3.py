# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from Qwen/Qwen3-0.6B (revision unknown), transformers 5.18.0
# modeling_qwen3.py sha256:849d80c7674793b3.
# Closest mobius class: CausalLMModel (registry key llama).

"""Qwen3 causal language model.

Like :class:`~mobius.models.base.CausalLMModel`, with the changes listed below.

- q_norm / k_norm over each head before RoPE
- follows config.attention_bias (set: attention.o_bias True, attention.qkv_bias True)
- follows config.use_sliding_window (set: attention.sliding_window per_layer)

Replicates HuggingFace's ``Qwen3ForCausalLM``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from onnxscript import OpBuilder, nn

from mobius._configs import ArchitectureConfig, Qwen3Config
from mobius.components import (
    DecoderLayer,
    RMSNorm,
    create_attention_bias,
)
from mobius.models.base import CausalLMModel, TextModel

if TYPE_CHECKING:
    import onnx_ir as ir


class Qwen3TextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - follows config.attention_bias (set: attention.o_bias True, attention.qkv_bias True)
    - follows config.use_sliding_window (set: attention.sliding_window per_layer)
    """

    def __init__(self, config: ArchitectureConfig):
        # TextModel's embedding, final norm and RoPE; its layers would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.layers = nn.ModuleList(
            [
                DecoderLayer(
                    config,
                    norm_class=RMSNorm,
                )
                for _ in range(config.num_hidden_layers)
            ]
        )
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

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
        position_embeddings = dict.fromkeys(("full_attention", "sliding_attention"), rotary)
        attention_bias = {
            "full_attention": create_attention_bias(
                op,
                input_ids=query,
                attention_mask=attention_mask,
                dtype=self._dtype,
            ),
            "sliding_attention": create_attention_bias(
                op,
                input_ids=query,
                attention_mask=attention_mask,
                sliding_window=self.config.sliding_window,
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


class Qwen3CausalLMModel(CausalLMModel):
    """Qwen3 causal LM built on :class:`Qwen3TextModel`.

    Replicates HuggingFace's ``Qwen3ForCausalLM``.
    """

    config_class = Qwen3Config

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = Qwen3TextModel(config)
