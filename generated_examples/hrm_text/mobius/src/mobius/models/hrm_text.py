# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from sapientinc/HRM-Text-1B (revision unknown), transformers 5.18.0
# modeling_hrm_text.py sha256:9d44c109b567140e.
# Closest mobius class: CausalLMModel (registry key llama).

"""HrmText causal language model.

Like :class:`~mobius.models.base.CausalLMModel`, with the changes listed below.

- norms without a learnable weight
- token embeddings x config.embedding_scale
- no final norm: the last layer feeds the head
- the heads' output scaled by sigmoid(gate_proj(x)) before o_proj
- two stacks in cycles: per config.H_cycles, the low stack config.L_cycles times on low +
  high, then the high stack on high + low, each stack's layers then a norm; the low state
  starts at a learned vector, the head reads the high state; every call has its own past
  key/values
- follows config.mlp_bias (set: mlp.bias True)

Replicates HuggingFace's ``HrmTextForCausalLM``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import OpBuilder, nn

from mobius._configs import ArchitectureConfig, HrmTextConfig
from mobius._weight_utils import rename_weight_keys
from mobius.components import (
    Attention,
    DecoderLayer,
    Linear,
    create_attention_bias,
)
from mobius.components._attention import _apply_attention
from mobius.components._rotary_embedding import apply_rotary_pos_emb
from mobius.models.base import CausalLMModel, TextModel
from mobius.models.gemma import GemmaScaledWordEmbedding

# Fused checkpoint tensor -> the parts it holds, in order, as equal slices of axis 0
_FUSED_WEIGHTS = {
    "mlp.gate_up_proj.weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
    "attn.gqkv_proj.weight": (
        "self_attn.gate_proj.weight",
        "self_attn.q_proj.weight",
        "self_attn.k_proj.weight",
        "self_attn.v_proj.weight",
    ),
}


def _split_fused_weights(state_dict):
    """Cut each fused tensor into its parts, named as transformers names them on load."""
    result = {}
    for name, tensor in state_dict.items():
        fused = next((f for f in _FUSED_WEIGHTS if f in name), None)
        if fused is None:
            result[name] = tensor
            continue
        parts = _FUSED_WEIGHTS[fused]
        for part, chunk in zip(parts, torch.chunk(tensor, len(parts), dim=0)):
            result[name.replace(fused, part, 1)] = chunk
    return result


class HrmTextWeightFreeNorm(nn.Module):
    """RMSNorm with nothing to learn, as HF's: scale 1, constant."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.scale = nn.Parameter(
            [hidden_size], data=ir.tensor(np.ones(hidden_size, dtype=np.float32))
        )
        self.eps = eps

    def forward(self, op: OpBuilder, hidden_states: ir.Value):
        return op.RMSNormalization(hidden_states, self.scale, epsilon=self.eps, axis=-1)


class HrmTextAttention(Attention):
    """Like :class:`~mobius.components.Attention`, with the changes listed below.

    - the heads' output is scaled by ``sigmoid(gate_proj(hidden_states))`` before ``o_proj``.
    """

    def __init__(self, config: ArchitectureConfig, **kwargs):
        super().__init__(config, **kwargs)
        self.gate_proj = Linear(
            self.hidden_size, self.num_attention_heads * self.head_dim, bias=False
        )

    def forward(
        self,
        op: OpBuilder,
        hidden_states: ir.Value,
        attention_bias: ir.Value | None,
        position_embeddings: tuple | None = None,
        past_key_value: tuple | None = None,
        static_cache=None,
    ):
        query = self.q_proj(op, hidden_states)
        key = self.k_proj(op, hidden_states)
        value = self.v_proj(op, hidden_states)
        gate = op.Sigmoid(self.gate_proj(op, hidden_states))
        if self.q_norm is not None and self.k_norm is not None:
            heads = [0, 0, -1, self.head_dim]
            query = op.Reshape(self.q_norm(op, op.Reshape(query, heads)), [0, 0, -1])
            key = op.Reshape(self.k_norm(op, op.Reshape(key, heads)), [0, 0, -1])
        if position_embeddings is not None:
            query = apply_rotary_pos_emb(
                op,
                x=query,
                position_embeddings=position_embeddings,
                num_heads=self.num_attention_heads,
                rotary_embedding_dim=self.rotary_embedding_dim,
                interleaved=self._rope_interleave,
            )
            key = apply_rotary_pos_emb(
                op,
                x=key,
                position_embeddings=position_embeddings,
                num_heads=self.num_key_value_heads,
                rotary_embedding_dim=self.rotary_embedding_dim,
                interleaved=self._rope_interleave,
            )
        past_key, past_value = past_key_value if past_key_value is not None else (None, None)
        attn_output, present_key, present_value = _apply_attention(
            op,
            query,
            key,
            value,
            attention_bias,
            past_key,
            past_value,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            scale=self.scaling,
            softcap=self._softcap,
            static_cache=static_cache,
        )
        attn_output = op.Mul(attn_output, gate)
        return self.o_proj(op, attn_output), (present_key, present_value)


class HrmTextNoNorm(nn.Module):
    """Stands in for a norm HF does not have (the final one: the last layer feeds the head)."""

    def forward(self, op: OpBuilder, hidden_states: ir.Value) -> ir.Value:
        return hidden_states


class HrmTextTextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - norms without a learnable weight
    - token embeddings x config.embedding_scale
    - no final norm: the last layer feeds the head
    - the heads' output scaled by sigmoid(gate_proj(x)) before o_proj
    - two stacks in cycles: per config.H_cycles, the low stack config.L_cycles times on low
      + high, then the high stack on high + low, each stack's layers then a norm; the low
      state starts at a learned vector, the head reads the high state; every call has its
      own past key/values
    - follows config.mlp_bias (set: mlp.bias True)
    """

    def __init__(self, config: ArchitectureConfig):
        # TextModel's embedding, final norm and RoPE; its layers would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.embed_tokens = GemmaScaledWordEmbedding(
            config.vocab_size,
            config.hidden_size,
            config.pad_token_id,
            embed_scale=config.embedding_multiplier,
        )
        self.layers = nn.ModuleList(
            [
                DecoderLayer(
                    config,
                    norm_class=HrmTextWeightFreeNorm,
                )
                for _ in range(2 * config.num_layers_per_stack)  # both stacks
            ]
        )
        for layer in self.layers:
            layer.self_attn = HrmTextAttention(
                config,
                rms_norm_class=HrmTextWeightFreeNorm,
            )
        # The low stack's layers, then the high stack's, each reused by every call of it
        per_stack = config.num_layers_per_stack
        self.high_layers = nn.ModuleList(list(self.layers)[per_stack:])
        self.layers = nn.ModuleList(list(self.layers)[:per_stack])
        self.stack_norm = HrmTextWeightFreeNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.low_state_init = nn.Parameter([config.hidden_size])
        self.norm = HrmTextNoNorm()

    def forward(
        self,
        op: OpBuilder,
        input_ids: ir.Value,
        attention_mask: ir.Value,
        position_ids: ir.Value,
        past_key_values: list | None = None,
        inputs_embeds: ir.Value | None = None,
    ):
        if attention_mask is None:  # CausalLMTask(static_cache=True)
            raise NotImplementedError(
                "HrmTextTextModel has no static-cache path: its layers need the mask"
            )
        if inputs_embeds is not None:
            hidden_states = inputs_embeds
        else:
            hidden_states = self.embed_tokens(op, input_ids)
        query = input_ids if input_ids is not None else hidden_states
        rotary = self.rotary_emb(op, position_ids) if self.rotary_emb is not None else None
        position_embeddings = dict.fromkeys(("full_attention",), rotary)
        attention_bias = {
            "full_attention": create_attention_bias(
                op,
                input_ids=query,
                attention_mask=attention_mask,
                dtype=self._dtype,
            ),
        }
        present_key_values = []
        past_kvs = iter(past_key_values or [None] * self.config.num_hidden_layers)

        def run_stack(layers: nn.ModuleList, hidden_states: ir.Value) -> ir.Value:
            """One call of a stack: its layers, each on the next past key/values, then the norm."""
            for layer in layers:
                hidden_states, present_kv = layer(
                    op,
                    hidden_states=hidden_states,
                    attention_bias=attention_bias["full_attention"],
                    position_embeddings=position_embeddings["full_attention"],
                    past_key_value=next(past_kvs),
                )
                present_key_values.append(present_kv)
            return self.stack_norm(op, hidden_states)

        low = op.Expand(
            op.CastLike(self.low_state_init, hidden_states), op.Shape(hidden_states)
        )
        high = hidden_states
        for _ in range(self.config.H_cycles):
            for _ in range(self.config.L_cycles):
                low = run_stack(self.layers, op.Add(low, high))
            high = run_stack(self.high_layers, op.Add(high, low))
        hidden_states = high
        hidden_states = self.norm(op, hidden_states)
        return hidden_states, present_key_values


class HrmTextCausalLMModel(CausalLMModel):
    """HrmText causal LM built on :class:`HrmTextTextModel`.

    Replicates HuggingFace's ``HrmTextForCausalLM``.
    """

    config_class = HrmTextConfig

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = HrmTextTextModel(config)

    def preprocess_weights(self, state_dict):
        # Checkpoints saved from the base model (not the causal LM) leave out "model.".
        top_level = ("lm_head", "model")
        state_dict = {
            name if name.split(".")[0] in top_level else f"model.{name}": tensor
            for name, tensor in state_dict.items()
        }
        # The checkpoint keeps these weights fused; transformers cuts them into equal parts.
        state_dict = _split_fused_weights(state_dict)
        # The checkpoint's names for these weights differ from the generated layers'.
        state_dict = rename_weight_keys(
            state_dict,
            [
                (".attn.o_proj.", ".self_attn.o_proj."),
                ("model.L_module.layers.", "model.layers."),
                ("model.H_module.layers.", "model.high_layers."),
                ("model.z_L_init", "model.low_state_init"),
            ],
        )
        return super().preprocess_weights(state_dict)
