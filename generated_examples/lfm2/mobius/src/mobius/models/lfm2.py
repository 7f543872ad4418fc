# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from LiquidAI/LFM2-1.2B (revision unknown), transformers 5.18.0
# modeling_lfm2.py sha256:6cae625be71715af.
# Closest mobius class: CausalLMModel (registry key llama).

"""Lfm2 causal language model.

Like :class:`~mobius.models.base.CausalLMModel`, with the changes listed below.

- short-convolution layers: c * conv(b * x) over in_proj's thirds, with the last 2 inputs
  as state
- q_norm / k_norm over each head before RoPE

Replicates HuggingFace's ``Lfm2ForCausalLM``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from onnxscript import OpBuilder, nn

from mobius._configs import ArchitectureConfig, Lfm2Config
from mobius._weight_utils import rename_weight_keys
from mobius.components import (
    MLP,
    DecoderLayer,
    Linear,
    RMSNorm,
    create_attention_bias,
)
from mobius.components._common import INT64_MAX
from mobius.models.base import CausalLMModel, TextModel

if TYPE_CHECKING:
    import onnx_ir as ir


class Lfm2DepthwiseConv(nn.Module):
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


class Lfm2ShortConv(nn.Module):
    """HF's gated short convolution, with the last inputs of its convolution as state.

    ``in_proj`` gives b, c, x (thirds, in that order), ``y = c * conv(b * x)`` with a
    causal depthwise convolution, then ``out_proj``. The state is the convolution's last
    ``short_conv_kernel - 1`` inputs. Padded positions are zeroed first, as HF does, so they
    never reach the state.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        hidden, bias = config.hidden_size, config.short_conv_bias
        self.in_proj = Linear(hidden, 3 * hidden, bias=bias)
        self.conv = Lfm2DepthwiseConv(hidden, config.short_conv_kernel, bias)
        self.out_proj = Linear(hidden, hidden, bias=bias)
        self.state_width = config.short_conv_kernel - 1

    def forward(
        self,
        op: OpBuilder,
        hidden_states: ir.Value,
        attention_mask: ir.Value,
        conv_state: ir.Value,
    ):
        keep = _current_positions(op, attention_mask, hidden_states)
        projected = self.in_proj(op, op.Mul(hidden_states, keep))
        b, c, x = op.Split(projected, num_outputs=3, axis=-1, _outputs=3)
        gated = op.Transpose(op.Mul(b, x), perm=[0, 2, 1])  # [batch, hidden, steps]
        window = op.Concat(conv_state, gated, axis=2)
        present = op.Slice(window, [-self.state_width], [INT64_MAX], [2])
        convolved = op.Transpose(self.conv(op, window), perm=[0, 2, 1])
        return self.out_proj(op, op.Mul(c, convolved)), present


class Lfm2ShortConvDecoderLayer(nn.Module):
    """A layer that mixes tokens with :class:`Lfm2ShortConv`.

    Its norms and MLP are the attention layers'.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.conv = Lfm2ShortConv(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

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
        mixed, *states = self.conv(op, hidden_states, attention_bias, *past_key_value)
        hidden_states = op.Add(residual, mixed)

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(op, hidden_states)
        hidden_states = op.Add(residual, self.mlp(op, hidden_states))
        return hidden_states, tuple(states)


class Lfm2TextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - short-convolution layers: c * conv(b * x) over in_proj's thirds, with the last 2
      inputs as state
    """

    def __init__(self, config: ArchitectureConfig):
        # TextModel's embedding, final norm and RoPE; its layers would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        layer_types = config.layer_types
        self.layers = nn.ModuleList(
            [
                Lfm2ShortConvDecoderLayer(config)
                if layer_types[index] == "conv"
                else DecoderLayer(
                    config,
                    norm_class=RMSNorm,
                )
                for index in range(config.num_hidden_layers)
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
        if attention_mask is None:  # CausalLMTask(static_cache=True)
            raise NotImplementedError(
                "Lfm2TextModel has no static-cache path: its layers need the mask"
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
        attention_bias["conv"] = attention_mask  # short_conv layers zero padded positions
        position_embeddings["conv"] = None
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


class Lfm2CausalLMModel(CausalLMModel):
    """Lfm2 causal LM built on :class:`Lfm2TextModel`.

    Replicates HuggingFace's ``Lfm2ForCausalLM``.
    """

    config_class = Lfm2Config
    default_task = "hybrid-text-generation"

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = Lfm2TextModel(config)

    def preprocess_weights(self, state_dict):
        # Checkpoints saved from the base model (not the causal LM) leave out "model.".
        top_level = ("lm_head", "model")
        state_dict = {
            name if name.split(".")[0] in top_level else f"model.{name}": tensor
            for name, tensor in state_dict.items()
        }
        # The checkpoint's names for these weights differ from the generated layers'.
        state_dict = rename_weight_keys(
            state_dict,
            [
                ("model.embedding_norm.", "model.norm."),
                (".feed_forward.", ".mlp."),
                (".self_attn.out_proj.", ".self_attn.o_proj."),
                (".self_attn.q_layernorm.", ".self_attn.q_norm."),
                (".self_attn.k_layernorm.", ".self_attn.k_norm."),
                (".mlp.w1.", ".mlp.gate_proj."),
                (".mlp.w3.", ".mlp.up_proj."),
                (".mlp.w2.", ".mlp.down_proj."),
                (".operator_norm.", ".input_layernorm."),
                (".ffn_norm.", ".post_attention_layernorm."),
            ],
        )
        return super().preprocess_weights(state_dict)
