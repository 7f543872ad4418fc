# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from Qwen/Qwen3-Next-80B-A3B-Instruct (revision unknown),
# transformers 5.18.0 modeling_qwen3_next.py sha256:571acc3be267331e.
# Closest mobius class: Qwen2MoECausalLMModel (registry key qwen2_moe).

"""Qwen3Next causal language model.

Like :class:`~mobius.models.moe.Qwen2MoECausalLMModel`, with the changes listed below.

- gated DeltaNet layers (16 key heads, 32 value heads), q and k L2-normalised with HF's
  epsilon 1e-06
- norms scale by (1 + w)
- each head's output scaled by sigmoid of a gate q_proj gives beside its query (mobius'
  Qwen35Attention)
- config.num_experts routed experts, config.num_experts_per_tok per token: softmax over all
  experts, then top-k, renormalised
- a shared expert behind a sigmoid gate
- dense layers chosen by config.mlp_only_layers
- q_norm / k_norm over each head before RoPE
- follows config.attention_bias (set: attention.o_bias True, attention.qkv_bias True)
- follows config.norm_topk_prob (unset: moe.renormalize False)

Replicates HuggingFace's ``Qwen3NextForCausalLM``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from onnxscript import OpBuilder, nn

from mobius._configs import ArchitectureConfig, Qwen3NextConfig
from mobius.components import (
    MLP,
    Linear,
    MoELayer,
    OffsetRMSNorm,
    PostGatedRMSNorm,
    Qwen35Attention,
    SoftmaxTopKGate,
    StaticCacheState,
    create_attention_bias,
    get_activation,
)
from mobius.components._common import INT64_MAX
from mobius.models.base import TextModel
from mobius.models.moe import Qwen2MoECausalLMModel

if TYPE_CHECKING:
    import onnx_ir as ir


class Qwen3NextMoELayer(MoELayer):
    """Routed experts plus a shared expert scaled by sigmoid(shared_expert_gate(x))."""

    def __init__(self, config: ArchitectureConfig, gate: nn.Module):
        super().__init__(config, gate=gate)
        shared = dataclasses.replace(
            config, intermediate_size=config.shared_expert_intermediate_size
        )
        self.shared_expert = MLP(shared)
        self.shared_expert_gate = Linear(config.hidden_size, 1, bias=False)

    def forward(self, op: OpBuilder, hidden_states: ir.Value):
        routed = super().forward(op, hidden_states)
        shared = self.shared_expert(op, hidden_states)
        shared = op.Mul(shared, op.Sigmoid(self.shared_expert_gate(op, hidden_states)))
        return op.Add(routed, shared)


def _is_moe_layer(config: ArchitectureConfig, index: int) -> bool:
    step = config.decoder_sparse_step or 1
    return index not in config.mlp_only_layers and (index + 1) % step == 0


def _feed_forward(config: ArchitectureConfig, index: int) -> nn.Module:
    """Layer ``index``'s feed-forward block, whatever mixes its tokens.

    Routed experts where ``_is_moe_layer`` says, else the dense MLP.
    """
    if _is_moe_layer(config, index):
        gate = SoftmaxTopKGate(
            config.hidden_size,
            config.num_local_experts,
            config.num_experts_per_tok,
            norm_topk_prob=config.norm_topk_prob,
        )
        return Qwen3NextMoELayer(config, gate=gate)
    return MLP(config)


class Qwen3NextDecoderLayer(nn.Module):
    """Pre-norm decoder layer whose MLP is routed experts (or dense)."""

    # hands a static cache on to the attention, as DecoderLayer does
    _supports_static_cache = True

    def __init__(self, config: ArchitectureConfig, index: int):
        super().__init__()
        self.self_attn = Qwen35Attention(config)
        self.mlp = _feed_forward(config, index)
        self.input_layernorm = OffsetRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = OffsetRMSNorm(
            config.hidden_size, eps=config.rms_norm_eps
        )

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


class Qwen3NextDepthwiseConv(nn.Module):
    """A depthwise causal Conv1d under HF's names (weight [channels, 1, taps])."""

    def __init__(self, channels: int, kernel_size: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter([channels, 1, kernel_size])
        self.bias = nn.Parameter([channels]) if bias else None
        self.channels = channels

    def forward(self, op: OpBuilder, window: ir.Value):
        inputs = [window, self.weight] + ([self.bias] if self.bias is not None else [])
        return op.Conv(*inputs, group=self.channels)


def _current_positions(op: OpBuilder, attention_mask: ir.Value, hidden_states: ir.Value):
    """1.0 where this call's positions hold tokens, 0.0 where they are padding: [B, S, 1]."""
    steps = op.Shape(hidden_states, start=1, end=2)
    current = op.Slice(attention_mask, op.Neg(steps), [INT64_MAX], [1])
    return op.Unsqueeze(op.CastLike(current, hidden_states), [-1])


class Qwen3NextGatedDeltaNet(nn.Module):
    """HF's gated DeltaNet, with q and k L2-normalised under HF's epsilon.

    ``in_proj_qkvz`` and ``in_proj_ba`` hold, for each key head in turn, its q, k and the v, z
    (b, a) of the value heads that share it; they are split here, not reordered on load.
    q, k and v pass a causal depthwise convolution; the gated delta rule (decay ``exp(g)``,
    ``g = -exp(A_log) * softplus(a + dt_bias)``, rate ``sigmoid(b)``) runs in
    ``LinearAttention``; an RMS norm of each head gated by ``silu(z)``; ``out_proj``. Unlike
    mobius' ``GatedDeltaNet``, q and k are divided by ``sqrt(sum x^2 + 1e-06)`` as HF's
    l2norm does (a padded position's zero key stays zero, not NaN), and padded positions are
    zeroed before the projections.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.key_heads = config.linear_num_key_heads
        self.value_heads = config.linear_num_value_heads
        self.key_head_dim = config.linear_key_head_dim
        self.value_head_dim = config.linear_value_head_dim
        self.key_dim = self.key_heads * self.key_head_dim
        self.value_dim = self.value_heads * self.value_head_dim
        conv_dim = 2 * self.key_dim + self.value_dim
        self.state_width = config.linear_conv_kernel_dim - 1
        self.activation = get_activation(config.linear_activation)
        hidden = config.hidden_size
        self.in_proj_qkvz = Linear(hidden, 2 * self.key_dim + 2 * self.value_dim, bias=False)
        self.in_proj_ba = Linear(hidden, 2 * self.value_heads, bias=False)
        self.conv1d = Qwen3NextDepthwiseConv(conv_dim, config.linear_conv_kernel_dim, False)
        self.dt_bias = nn.Parameter([self.value_heads])
        self.A_log = nn.Parameter([self.value_heads])
        self.norm = PostGatedRMSNorm(self.value_head_dim, eps=config.linear_norm_eps)
        self.out_proj = Linear(self.value_dim, hidden, bias=False)

    def forward(
        self,
        op: OpBuilder,
        hidden_states: ir.Value,
        attention_mask: ir.Value,
        conv_state: ir.Value,
        recurrent_state: ir.Value,
    ):
        keep = _current_positions(op, attention_mask, hidden_states)
        query, key, value, gate, b, a = self._project(op, op.Mul(hidden_states, keep))
        mixed = op.Transpose(op.Concat(query, key, value, axis=-1), perm=[0, 2, 1])
        window = op.Concat(conv_state, mixed, axis=2)
        conv_present = op.Slice(window, [-self.state_width], [INT64_MAX], [2])
        convolved = op.Transpose(self.activation(op, self.conv1d(op, window)), perm=[0, 2, 1])
        query, key, value = op.Split(
            convolved, [self.key_dim, self.key_dim, self.value_dim], axis=-1, _outputs=3
        )
        decay = op.Mul(
            op.Neg(op.Exp(self.A_log)), op.Softplus(op.Add(a, self.dt_bias))
        )  # log of each value head's decay
        y, recurrent_present = op.LinearAttention(
            self._l2_normalised(op, query),
            self._l2_normalised(op, key),
            value,
            recurrent_state,
            decay,
            op.Sigmoid(b),
            scale=self.key_head_dim**-0.5,
            q_num_heads=self.key_heads,
            kv_num_heads=self.value_heads,
            update_rule="gated_delta",
            _domain="com.microsoft",
            _outputs=2,
        )
        per_head = [0, 0, self.value_heads, self.value_head_dim]
        normed = self.norm(op, op.Reshape(y, per_head), op.Reshape(gate, per_head))
        return (
            self.out_proj(op, op.Reshape(normed, [0, 0, self.value_dim])),
            conv_present,
            recurrent_present,
        )

    def _project(self, op: OpBuilder, hidden_states: ir.Value):
        """q, k, v and the gate z ``[B, S, width]``; b and a ``[B, S, value_heads]``."""
        shared = self.value_heads // self.key_heads  # value heads per key head
        grouped = op.Reshape(self.in_proj_qkvz(op, hidden_states), [0, 0, self.key_heads, -1])
        widths = [self.key_head_dim, self.key_head_dim] + [shared * self.value_head_dim] * 2
        parts = op.Split(grouped, widths, axis=-1, _outputs=4)
        query, key, value, gate = (op.Reshape(part, [0, 0, -1]) for part in parts)
        ba = op.Reshape(self.in_proj_ba(op, hidden_states), [0, 0, self.key_heads, -1])
        b, a = (
            op.Reshape(part, [0, 0, -1])
            for part in op.Split(ba, num_outputs=2, axis=-1, _outputs=2)
        )
        return query, key, value, gate, b, a

    def _l2_normalised(self, op: OpBuilder, value: ir.Value):
        """Each key head's vector over ``sqrt(sum x^2 + eps)``, HF's l2norm."""
        heads = op.Reshape(value, [0, 0, self.key_heads, self.key_head_dim])
        eps = op.CastLike(op.Constant(value_float=1e-06), heads)
        squares = op.Add(op.ReduceSumSquare(heads, [-1], keepdims=1), eps)
        return op.Reshape(op.Div(heads, op.Sqrt(squares)), [0, 0, self.key_dim])


class Qwen3NextGatedDeltaNetDecoderLayer(nn.Module):
    """A layer that mixes tokens with :class:`Qwen3NextGatedDeltaNet`.

    Its norms and feed-forward block are the attention layers'.
    """

    def __init__(self, config: ArchitectureConfig, index: int):
        super().__init__()
        self.linear_attn = Qwen3NextGatedDeltaNet(config)
        self.mlp = _feed_forward(config, index)
        self.input_layernorm = OffsetRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = OffsetRMSNorm(
            config.hidden_size, eps=config.rms_norm_eps
        )

    def forward(
        self,
        op: OpBuilder,
        hidden_states: ir.Value,
        attention_bias: ir.Value,
        position_embeddings: tuple | None,
        past_key_value: tuple,
    ):
        """``attention_bias`` is the 2-D padding mask here; ``past_key_value`` the states."""
        del position_embeddings  # no RoPE here
        residual = hidden_states
        hidden_states = self.input_layernorm(op, hidden_states)
        mixed, *states = self.linear_attn(op, hidden_states, attention_bias, *past_key_value)
        hidden_states = op.Add(residual, mixed)

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(op, hidden_states)
        hidden_states = op.Add(residual, self.mlp(op, hidden_states))
        return hidden_states, tuple(states)


class Qwen3NextTextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - gated DeltaNet layers (16 key heads, 32 value heads), q and k L2-normalised with HF's
      epsilon 1e-06
    - norms scale by (1 + w)
    - each head's output scaled by sigmoid of a gate q_proj gives beside its query (mobius'
      Qwen35Attention)
    - config.num_experts routed experts, config.num_experts_per_tok per token: softmax over
      all experts, then top-k, renormalised
    - a shared expert behind a sigmoid gate
    - dense layers chosen by config.mlp_only_layers
    - follows config.attention_bias (set: attention.o_bias True, attention.qkv_bias True)
    - follows config.norm_topk_prob (unset: moe.renormalize False)
    """

    def __init__(self, config: ArchitectureConfig):
        # TextModel's embedding, final norm and RoPE; its layers would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        layer_types = config.layer_types
        self.layers = nn.ModuleList(
            [
                Qwen3NextGatedDeltaNetDecoderLayer(config, index)
                if layer_types[index] == "linear_attention"
                else Qwen3NextDecoderLayer(config, index)
                for index in range(config.num_hidden_layers)
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
        if attention_mask is None:  # CausalLMTask(static_cache=True)
            raise NotImplementedError(
                "Qwen3NextTextModel has no static-cache path: its layers need the mask"
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
        attention_bias["linear_attention"] = (
            attention_mask  # gated_deltanet layers zero padded positions
        )
        position_embeddings["linear_attention"] = None
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


class Qwen3NextCausalLMModel(Qwen2MoECausalLMModel):
    """Qwen3Next causal LM built on :class:`Qwen3NextTextModel`.

    Replicates HuggingFace's ``Qwen3NextForCausalLM``.
    """

    config_class = Qwen3NextConfig
    default_task = "hybrid-text-generation"

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = Qwen3NextTextModel(config)
