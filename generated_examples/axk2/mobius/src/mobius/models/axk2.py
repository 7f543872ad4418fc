# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from skt/A.X-K2 (revision unknown), transformers 5.18.0
# modeling_axk2.py sha256:d2a4a5920dfe8437.
# Closest mobius class: DeepSeekV3CausalLMModel (registry key dots1).

"""AXK2 causal language model.

Like :class:`~mobius.models.deepseek.DeepSeekV3CausalLMModel`, with the changes listed below.

- multi-head latent attention (low-rank q and kv)
- DeepSeek Sparse Attention: a lightning indexer (16 heads of 128, RoPE on halves) keeps
  each query's top 2048 keys, its keys cached beside the KV cache
- latent norms with a fixed epsilon 1e-06
- config.num_local_experts routed experts, config.num_experts_per_tok per token: sigmoid
  over all experts, then top-k (choice shifted by e_score_correction_bias), renormalised, x
  config.routed_scaling_factor
- a shared expert always added
- dense layers chosen by config.mlp_layer_types
- gated norms: y * sigmoid(up(silu(down(y)))), y the plain norm of x, through a rank of
  config.gated_norm_rank (input_layernorm in every layer, post_attention_layernorm in
  layers with experts)
- queries and an output gate from one projection of both q latents (normed, raw); the
  heads' output scaled by sigmoid(gate) before o_proj
- follows config.norm_topk_prob (unset: moe.renormalize False)

Replicates HuggingFace's ``AXK2ForCausalLM``.
"""

from __future__ import annotations

import dataclasses
import math

import onnx_ir as ir
from onnxscript import OpBuilder, nn

from mobius._configs import ArchitectureConfig, AXK2Config
from mobius._model_package import ModelPackage
from mobius._weight_utils import rename_weight_keys
from mobius.components import (
    MLP,
    DeepSeekMLA,
    LayerNorm,
    Linear,
    MoELayer,
    RMSNorm,
    create_attention_bias,
    get_activation,
    initialize_rope,
)
from mobius.components._rotary_embedding import apply_rotary_pos_emb
from mobius.models.base import CausalLMModel, TextModel
from mobius.models.deepseek import DeepSeekV3CausalLMModel
from mobius.tasks import CausalLMTask
from mobius.tasks._base import _make_graph, _make_model
from mobius.tasks._cache_utils import _make_kv_cache_inputs, _register_kv_cache_outputs


class AXK2Indexer(nn.Module):
    """DeepSeek Sparse Attention's lightning indexer: which keys each query attends to.

    Each query scores every key it may see by ``sum_h w_h relu(q_h . k) / sqrt(head_dim)``:
    ``index_n_heads`` queries from the low-rank query (``wq_b``), one key per position
    (``k_norm(wk(x))``, cached across steps), the first ``qk_rope_head_dim`` channels of both
    rotated by halves, and one weight per head (``weights_proj``). The
    ``index_topk`` best keys of each row are kept.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.num_heads = config.index_n_heads
        self.head_dim = config.index_head_dim
        self.rope_dim = config.qk_rope_head_dim
        self.topk = config.index_topk
        self.wq_b = Linear(config.q_lora_rank, self.num_heads * self.head_dim, bias=False)
        self.wk = Linear(config.hidden_size, self.head_dim, bias=False)
        self.k_norm = LayerNorm(self.head_dim, eps=1e-06)
        self.weights_proj = Linear(config.hidden_size, self.num_heads, bias=False)

    def forward(
        self,
        op: OpBuilder,
        hidden_states: ir.Value,
        q_resid: ir.Value,
        position_embeddings: tuple,
        attention_bias: ir.Value,
        past_keys: ir.Value | None,
    ):
        """The keys each query keeps, and every key so far.

        ``kept`` is [batch, 1, queries, keys], True at each row's top-k keys; ``keys`` is
        [batch, keys, head_dim], the cache's layout.
        """
        parts = [self.rope_dim, self.head_dim - self.rope_dim]
        query = op.Reshape(self.wq_b(op, q_resid), [0, 0, self.num_heads, self.head_dim])
        q_rot, q_pass = op.Split(query, parts, axis=-1, _outputs=2)
        q_rot = self._rotate(
            op, op.Reshape(q_rot, [0, 0, -1]), position_embeddings, self.num_heads
        )
        q_rot = op.Reshape(q_rot, [0, 0, self.num_heads, self.rope_dim])
        query = op.Concat(q_rot, q_pass, axis=-1)  # [batch, queries, heads, head_dim]
        key = self.k_norm(op, self.wk(op, hidden_states))
        k_rot, k_pass = op.Split(key, parts, axis=-1, _outputs=2)
        key = op.Concat(self._rotate(op, k_rot, position_embeddings, 1), k_pass, axis=-1)
        keys = key if past_keys is None else op.Concat(past_keys, key, axis=1)
        # [batch, queries, heads, keys], each head's ReLU'd scores
        scores = op.MatMul(query, op.Unsqueeze(op.Transpose(keys, perm=[0, 2, 1]), [1]))
        scores = op.Relu(op.Mul(scores, self.head_dim**-0.5))
        weights = op.Mul(self.weights_proj(op, hidden_states), self.num_heads**-0.5)
        index = op.MatMul(op.Unsqueeze(weights, [2]), scores)  # summed over the heads
        # causal and padding: a key a query may not see scores the dtype's minimum
        index = op.Add(op.Transpose(index, perm=[0, 2, 1, 3]), attention_bias)
        count = op.Min(op.Shape(index, start=3, end=4), op.Constant(value_ints=[self.topk]))
        _, top = op.TopK(index, count, axis=-1, _outputs=2)
        zeros = op.CastLike(op.ConstantOfShape(op.Shape(index)), index)
        ones = op.Expand(op.CastLike(1.0, index), op.Shape(top))
        kept = op.ScatterElements(zeros, top, ones, axis=-1)
        return op.Greater(kept, op.CastLike(0.0, kept)), keys

    def _rotate(
        self, op: OpBuilder, x: ir.Value, position_embeddings: tuple, heads: int
    ) -> ir.Value:
        return apply_rotary_pos_emb(
            op,
            x=x,
            position_embeddings=position_embeddings,
            num_heads=heads,
            rotary_embedding_dim=0,
            interleaved=False,
        )


class AXK2Attention(DeepSeekMLA):
    """DeepSeek's latent attention over the keys its lightning indexer keeps.

    The attention is computed here (MatMul, Softmax) with the selection in its mask: the cpu
    EP rewrites ONNX Attention to GroupQueryAttention, which drops that mask. Only the dynamic
    KV cache: each step's keys join the cached ones.
    """

    def __init__(self, config: ArchitectureConfig, scale: float):
        super().__init__(config, scale=scale)
        self.indexer = AXK2Indexer(config)
        # in q_b_proj's place (never called): one projection of both q latents to each head's
        # query and output gate
        self.q_gate_proj = Linear(
            2 * config.q_lora_rank,
            self.num_heads * (self.qk_head_dim + self.v_head_dim),
            bias=False,
        )
        self._lowest = float(config.dtype.min)  # the masked value of the attention bias

    def forward(
        self,
        op: OpBuilder,
        hidden_states: ir.Value,
        attention_bias: ir.Value,
        position_embeddings: tuple,
        past_key_value: tuple | None = None,
    ):
        heads, nope, rope = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim
        q_latent = self.q_a_proj(op, hidden_states)
        q_resid = self.q_a_layernorm(op, q_latent)
        both = op.Concat(q_resid, q_latent, axis=-1)
        fused = op.Reshape(
            self.q_gate_proj(op, both), [0, 0, heads, self.qk_head_dim + self.v_head_dim]
        )
        query, gate = op.Split(fused, [self.qk_head_dim, self.v_head_dim], axis=-1, _outputs=2)
        q_nope, q_rope = op.Split(query, [nope, rope], axis=-1, _outputs=2)
        q_rope = self._rotate(op, op.Reshape(q_rope, [0, 0, -1]), position_embeddings, heads)
        query = op.Concat(q_nope, op.Reshape(q_rope, [0, 0, heads, rope]), axis=-1)
        compressed = self.kv_a_proj_with_mqa(op, hidden_states)
        latent, k_rope = op.Split(compressed, [self.kv_lora_rank, rope], axis=-1, _outputs=2)
        kv = self.kv_b_proj(op, self.kv_a_layernorm(op, latent))
        kv = op.Reshape(kv, [0, 0, heads, nope + self.v_head_dim])
        k_nope, value = op.Split(kv, [nope, self.v_head_dim], axis=-1, _outputs=2)
        k_rope = op.Reshape(self._rotate(op, k_rope, position_embeddings, 1), [0, 0, 1, rope])
        key = op.Concat(k_nope, op.Expand(k_rope, [1, 1, heads, 1]), axis=-1)
        # [batch, heads, positions, head_dim], the cache's layout, the cached positions first
        query, key, value = (op.Transpose(v, perm=[0, 2, 1, 3]) for v in (query, key, value))
        past_indexer_keys = None
        if past_key_value is not None:
            key = op.Concat(past_key_value[0], key, axis=2)
            value = op.Concat(past_key_value[1], value, axis=2)
            past_indexer_keys = past_key_value[2]
        kept, indexer_keys = self.indexer(
            op, hidden_states, q_resid, position_embeddings, attention_bias, past_indexer_keys
        )
        # the keys the indexer did not keep are masked as causality masks them
        bias = op.Where(kept, attention_bias, op.CastLike(self._lowest, attention_bias))
        scores = op.Mul(op.MatMul(query, op.Transpose(key, perm=[0, 1, 3, 2])), self.scaling)
        probs = op.Softmax(op.Add(scores, bias), axis=-1)
        attended = op.MatMul(probs, value)  # [batch, heads, queries, v_head_dim]
        attn_output = op.Reshape(op.Transpose(attended, perm=[0, 2, 1, 3]), [0, 0, -1])
        attn_output = op.Mul(attn_output, op.Sigmoid(op.Reshape(gate, [0, 0, -1])))
        return self.o_proj(op, attn_output), (key, value, indexer_keys)

    def _rotate(
        self, op: OpBuilder, x: ir.Value, position_embeddings: tuple, heads: int
    ) -> ir.Value:
        return apply_rotary_pos_emb(
            op,
            x=x,
            position_embeddings=position_embeddings,
            num_heads=heads,
            rotary_embedding_dim=0,
            interleaved=self._rope_interleave,
        )


class AXK2Task(CausalLMTask):
    """mobius' text-generation task, with the lightning indexer's keys cached too.

    Each layer that runs an indexer takes ``past_key_values.{i}.indexer_key`` [batch,
    past_sequence_len, index_head_dim] beside its keys and values and returns
    ``present.{i}.indexer_key``, as HF's cache keeps them. Only the dynamic KV cache.
    """

    def build(self, module: nn.Module, config: ArchitectureConfig) -> ModelPackage:
        if self._static_cache:
            raise NotImplementedError(
                "the indexer reads every cached key: build with the dynamic KV cache"
            )
        batch, sequence = ir.SymbolicDim("batch"), ir.SymbolicDim("sequence_len")
        past = ir.SymbolicDim("past_sequence_len")
        graph, builder = _make_graph()
        input_ids = builder.input(
            "input_ids", dtype=ir.DataType.INT64, shape=[batch, sequence]
        )
        attention_mask = builder.input(
            "attention_mask",
            dtype=ir.DataType.INT64,
            shape=[batch, "past_sequence_len + sequence_len"],
        )
        position_ids = builder.input(
            "position_ids", dtype=ir.DataType.INT64, shape=[batch, sequence]
        )
        key_dim = config.qk_nope_head_dim + config.qk_rope_head_dim
        kv_caches = _make_kv_cache_inputs(
            builder,
            config.num_hidden_layers,
            config.num_attention_heads,
            config.head_dim,
            config.dtype,
            batch,
            past,
            key_head_dim=key_dim,
            value_head_dim=config.v_head_dim,
        )
        past_key_values = []
        for index, kv in enumerate(kv_caches):
            name = f"past_key_values.{index}.indexer_key"
            shape = [batch, past, config.index_head_dim]
            past_key_values.append((*kv, builder.input(name, dtype=config.dtype, shape=shape)))
        logits, presents = module(
            builder.op,
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
        )
        builder.add_output(logits, "logits")
        _register_kv_cache_outputs(
            builder,
            [present[:2] for present in presents],
            batch=batch,
            num_kv_heads=config.num_attention_heads,
            key_head_dim=key_dim,
            value_head_dim=config.v_head_dim,
            total_seq_len="past_sequence_len + sequence_len",
            dtype=config.dtype,
        )
        for index, present in enumerate(presents):
            if len(present) == 3:
                builder.add_output(present[2], f"present.{index}.indexer_key")
        return ModelPackage({"model": _make_model(graph)}, config=config)


class AXK2NormGate(nn.Module):
    """A gated norm's low-rank gate, ``fc2(silu(fc1(x)))``."""

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.fc1 = Linear(config.hidden_size, config.gated_norm_rank, bias=False)
        self.fc2 = Linear(config.gated_norm_rank, config.hidden_size, bias=False)
        self._act = get_activation("silu")

    def forward(self, op: OpBuilder, hidden_states: ir.Value):
        return self.fc2(op, self._act(op, self.fc1(op, hidden_states)))


class AXK2GatedNorm(nn.Module):
    """A norm scaled by a low-rank gate of its own output: ``y * sigmoid(gate(y))``, ``y`` the plain norm of ``x``."""

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = AXK2NormGate(config)

    def forward(self, op: OpBuilder, hidden_states: ir.Value):
        normed = self.norm(op, hidden_states)
        gate = self.mlp(op, normed)
        return op.Mul(normed, op.Sigmoid(gate))


def _split_fused_experts(state_dict):
    """``experts.gate_up_proj [E, 2I, H]``, ``experts.down_proj [E, H, I]``: one per expert."""
    result = {}
    for name, tensor in state_dict.items():
        if name.endswith(".experts.gate_up_proj"):
            prefix = name.removesuffix("gate_up_proj")
            for expert, weights in enumerate(tensor):
                gate, up = weights.chunk(2, dim=0)
                result[f"{prefix}{expert}.gate_proj.weight"] = gate
                result[f"{prefix}{expert}.up_proj.weight"] = up
        elif name.endswith(".experts.down_proj"):
            prefix = name.removesuffix("down_proj")
            for expert, down in enumerate(tensor):
                result[f"{prefix}{expert}.down_proj.weight"] = down
        else:
            result[name] = tensor
    return result


class AXK2Router(nn.Module):
    """Routes each token to its top-k experts, returning (weights, experts) like mobius' gates.

    Sigmoid over all experts, then top-k (choice shifted by e_score_correction_bias), x
    config.routed_scaling_factor.
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


class AXK2MoELayer(MoELayer):
    """Routed experts plus a shared expert added for every token."""

    def __init__(self, config: ArchitectureConfig, gate: nn.Module):
        super().__init__(config, gate=gate)
        shared = dataclasses.replace(
            config, intermediate_size=config.shared_expert_intermediate_size
        )
        self.shared_experts = MLP(shared)

    def forward(self, op: OpBuilder, hidden_states: ir.Value):
        routed = super().forward(op, hidden_states)
        shared = self.shared_experts(op, hidden_states)
        return op.Add(routed, shared)


def _is_moe_layer(config: ArchitectureConfig, index: int) -> bool:
    return config.mlp_layer_types[index] == "sparse"


class AXK2DecoderLayer(nn.Module):
    """Pre-norm decoder layer whose MLP is routed experts (or dense), with latent attention."""

    def __init__(self, config: ArchitectureConfig, index: int):
        super().__init__()
        self.self_attn = AXK2Attention(
            config,
            scale=config.attention_scale,
        )
        # HF builds the latent norms with a fixed epsilon; DeepSeekMLA reads rms_norm_eps.
        self.self_attn.q_a_layernorm = RMSNorm(config.q_lora_rank, eps=1e-06)
        self.self_attn.kv_a_layernorm = RMSNorm(config.kv_lora_rank, eps=1e-06)
        if _is_moe_layer(config, index):
            gate = AXK2Router(config)
            self.mlp = AXK2MoELayer(config, gate=gate)
        else:
            self.mlp = MLP(config)
        self.input_layernorm = AXK2GatedNorm(config)
        self.post_attention_layernorm = (
            AXK2GatedNorm(config)
            if _is_moe_layer(config, index)
            else RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        )

    def forward(
        self,
        op: OpBuilder,
        hidden_states: ir.Value,
        attention_bias: ir.Value | None,
        position_embeddings: tuple | None,
        past_key_value: tuple | None,
    ):
        residual = hidden_states
        hidden_states = self.input_layernorm(op, hidden_states)
        attn_output, present_key_value = self.self_attn(
            op,
            hidden_states=hidden_states,
            attention_bias=attention_bias,
            position_embeddings=position_embeddings,
            past_key_value=past_key_value,
        )
        hidden_states = op.Add(residual, attn_output)

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(op, hidden_states)
        hidden_states = self.mlp(op, hidden_states)
        hidden_states = op.Add(residual, hidden_states)
        return hidden_states, present_key_value


class AXK2TextModel(TextModel):
    """Like :class:`~mobius.models.base.TextModel`, with the changes listed below.

    - multi-head latent attention (low-rank q and kv)
    - DeepSeek Sparse Attention: a lightning indexer (16 heads of 128, RoPE on halves)
      keeps each query's top 2048 keys, its keys cached beside the KV cache
    - latent norms with a fixed epsilon 1e-06
    - config.num_local_experts routed experts, config.num_experts_per_tok per token:
      sigmoid over all experts, then top-k (choice shifted by e_score_correction_bias),
      renormalised, x config.routed_scaling_factor
    - a shared expert always added
    - dense layers chosen by config.mlp_layer_types
    - gated norms: y * sigmoid(up(silu(down(y)))), y the plain norm of x, through a rank of
      config.gated_norm_rank (input_layernorm in every layer, post_attention_layernorm in
      layers with experts)
    - queries and an output gate from one projection of both q latents (normed, raw); the
      heads' output scaled by sigmoid(gate) before o_proj
    - follows config.norm_topk_prob (unset: moe.renormalize False)
    """

    def __init__(self, config: ArchitectureConfig):
        # TextModel's embedding, final norm and RoPE; its layers would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.layers = nn.ModuleList(
            [AXK2DecoderLayer(config, index) for index in range(config.num_hidden_layers)]
        )
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        # RoPE covers only the qk_rope_head_dim slice of each latent-attention head.
        self.rotary_emb = initialize_rope(
            dataclasses.replace(config, head_dim=config.qk_rope_head_dim)
        )

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
                "AXK2TextModel has no static-cache path: its layers need the mask"
            )
        if inputs_embeds is not None:
            hidden_states = inputs_embeds
        else:
            hidden_states = self.embed_tokens(op, input_ids)
        query = input_ids if input_ids is not None else hidden_states
        rotary = self.rotary_emb(op, position_ids) if self.rotary_emb is not None else None
        position_embeddings = dict.fromkeys(("indexed_attention",), rotary)
        attention_bias = {
            "indexed_attention": create_attention_bias(
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


class AXK2CausalLMModel(DeepSeekV3CausalLMModel):
    """AXK2 causal LM built on :class:`AXK2TextModel`.

    Replicates HuggingFace's ``AXK2ForCausalLM``.
    """

    config_class = AXK2Config
    default_task = AXK2Task()  # caches the indexer's keys too

    def __init__(self, config: ArchitectureConfig):
        # the parent's head; its text model would be replaced below
        super().__init__(dataclasses.replace(config, num_hidden_layers=0))
        self.config = config
        self.model = AXK2TextModel(config)

    def preprocess_weights(self, state_dict):
        # The checkpoint's names for these weights differ from the generated layers'.
        state_dict = rename_weight_keys(
            state_dict,
            [
                ("W_down", "mlp.fc1"),
                ("W_up", "mlp.fc2"),
                ("self_attn.q_b_proj.", "self_attn.q_gate_proj."),
            ],
        )
        # transformers v5 keeps experts fused in memory, as some checkpoints do: split them.
        state_dict = _split_fused_experts(state_dict)
        # DeepSeekV3CausalLMModel.preprocess_weights moves MoE weights under its own layer
        # layout, which the generated MoE layer does not use.
        return CausalLMModel.preprocess_weights(self, state_dict)
