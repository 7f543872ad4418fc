# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from Qwen/Qwen3-30B-A3B (revision unknown), transformers 5.18.0
# modeling_qwen3_moe.py sha256:510cbec619d1cc66.
# Closest mobius class: Qwen2MoECausalLMModel (registry key qwen2_moe).

"""Qwen3MoE causal language model.

Like :class:`~mobius.models.moe.Qwen2MoECausalLMModel`, with the changes listed below.

- config.num_local_experts routed experts, config.num_experts_per_tok per token: softmax
  over all experts, then top-k, renormalised
- dense layers chosen by config.mlp_only_layers
- q_norm / k_norm over each head before RoPE
- follows config.attention_bias (set: attention.o_bias True, attention.qkv_bias True)
- follows config.norm_topk_prob (unset: moe.renormalize False)
- follows config.use_sliding_window (set: attention.sliding_window uniform)

Replicates HuggingFace's ``Qwen3MoeForCausalLM``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from onnxscript import OpBuilder, nn

from mobius._build_context import ep_capabilities, get_build_dtype
from mobius._configs import ArchitectureConfig, Qwen3MoEConfig
from mobius.components import (
    MLP,
    Attention,
    MoELayer,
    RMSNorm,
    SoftmaxTopKGate,
    StaticCacheState,
    create_attention_bias,
)
from mobius.components._rotary_embedding import BaseRope, _MRopeBase
from mobius.models.base import TextModel
from mobius.models.moe import Qwen2MoECausalLMModel

if TYPE_CHECKING:
    import onnx_ir as ir


def _is_moe_layer(config: ArchitectureConfig, index: int) -> bool:
    step = config.decoder_sparse_step or 1
    return index not in config.mlp_only_layers and (index + 1) % step == 0


class Qwen3MoEDecoderLayer(nn.Module):
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
            gate = SoftmaxTopKGate(
                config.hidden_size,
                config.num_local_experts,
                config.num_experts_per_tok,
                norm_topk_prob=config.norm_topk_prob,
            )
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


class Qwen3MoETextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - config.num_local_experts routed experts, config.num_experts_per_tok per token:
      softmax over all experts, then top-k, renormalised
    - dense layers chosen by config.mlp_only_layers
    - follows config.attention_bias (set: attention.o_bias True, attention.qkv_bias True)
    - follows config.norm_topk_prob (unset: moe.renormalize False)
    - follows config.use_sliding_window (set: attention.sliding_window uniform)
    """

    def __init__(self, config: ArchitectureConfig):
        # TextModel's embedding, final norm and RoPE; its layers would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.layers = nn.ModuleList(
            [Qwen3MoEDecoderLayer(config, index) for index in range(config.num_hidden_layers)]
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
        if attention_mask is None or self._emits_group_query_attention(attention_mask):
            # GroupQueryAttention applies the (uniform) window itself; a static cache (no
            # mask) takes the library's causal path, as mobius' own windowed models do.
            return super().forward(
                op, input_ids, attention_mask, position_ids, past_key_values, inputs_embeds
            )
        if inputs_embeds is not None:
            hidden_states = inputs_embeds
        else:
            hidden_states = self.embed_tokens(op, input_ids)
        query = input_ids if input_ids is not None else hidden_states
        rotary = self.rotary_emb(op, position_ids) if self.rotary_emb is not None else None
        position_embeddings = dict.fromkeys(("sliding_attention",), rotary)
        attention_bias = {
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

    def _emits_group_query_attention(self, attention_mask: ir.Value | None) -> bool:
        """The condition under which ``TextModel.forward`` emits GroupQueryAttention."""
        capabilities = ep_capabilities()
        return (
            attention_mask is not None
            and get_build_dtype() in capabilities.gqa_dtypes
            and capabilities.supports_fused_rope
            and isinstance(self.rotary_emb, BaseRope)
            and not isinstance(self.rotary_emb, _MRopeBase)
        )


class Qwen3MoECausalLMModel(Qwen2MoECausalLMModel):
    """Qwen3MoE causal LM built on :class:`Qwen3MoETextModel`.

    Replicates HuggingFace's ``Qwen3MoeForCausalLM``.
    """

    config_class = Qwen3MoEConfig

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = Qwen3MoETextModel(config)
