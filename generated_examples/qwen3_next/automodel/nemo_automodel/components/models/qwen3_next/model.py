# Copyright (c) 2026, NVIDIA CORPORATION. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# onboard 0.1.0: generated from Qwen/Qwen3-Next-80B-A3B-Instruct (revision unknown), transformers
# 5.18.0 modeling_qwen3_next.py sha256:571acc3be267331e, for nemo-automodel 0.7.0. Closest AutoModel
# class: Qwen3MoeForCausalLM.

"""Qwen3Next causal language model for NeMo AutoModel, on HF's ``modeling_qwen3_next.py``.

The module tree is HF's own: the attention and decoder layer subclass ``Qwen3NextAttention`` and
``Qwen3NextDecoderLayer`` (with HF's ``Qwen3NextRMSNorm``). HF's decoder layer decides which
layers are sparse; those run AutoModel's ``MoE`` (``Gate`` + ``GroupedExperts``, configured by
an ``MoEConfig`` read from the HF config) instead of ``Qwen3NextSparseMoeBlock``, so AutoModel's
expert backends and MoE parallelizer apply, and the state-dict adapter groups the checkpoint's
per-expert tensors. What AutoModel owns is written here: the attention forward (NeMo's fp32
RoPE, HF's attention dispatch), the RoPE tables, the MoE configuration, the model and causal-LM
classes with their backend, tie policy, capabilities and logits.

The recurrent layers keep HF's own token mixers (``Qwen3NextGatedDeltaNet`` as ``linear_attn``
in the linear_attention layers): their torch paths run where fla, causal_conv1d or mamba_ssm are
not installed, and their state lives in HF's cache, which the model creates.

Closest AutoModel class: ``nemo_automodel.components.models.qwen3_moe.model.Qwen3MoeForCausalLM``.
Beyond it, this architecture has:

- norm.kind rms+1 (it has rms)
- moe.shared_experts gated (it has none)
- layers.mixers gated_deltanet (it has none)
- rope.partial True (it has False)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from transformers import Qwen3NextConfig
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import (
    create_causal_mask,
    create_recurrent_attention_mask,
    create_sliding_window_causal_mask,
)
from transformers.modeling_outputs import MoeCausalLMOutputWithPast, MoeModelOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention as HFQwen3NextAttention
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextDecoderLayer as HFQwen3NextDecoderLayer
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextPreTrainedModel as HFQwen3NextPreTrainedModel
from transformers.models.qwen3_next.modeling_qwen3_next import (
    Qwen3NextRMSNorm,
    eager_attention_forward,
    load_balancing_loss_func,
)
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextSparseMoeBlock as HFQwen3NextSparseMoeBlock
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple
from transformers.utils.output_capturing import OutputRecorder

from nemo_automodel.components.models.common import BackendConfig, compute_lm_head_logits
from nemo_automodel.components.models.common.hf_checkpointing_mixin import HFCheckpointingMixin
from nemo_automodel.components.models.common.tie_word_embeddings import (
    TieSupport,
    reject_unsupported_tie_word_embeddings,
)
from nemo_automodel.components.models.common.utils import cast_model_to_dtype
from nemo_automodel.components.models.llama.rope_utils import (
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)
from nemo_automodel.components.models.qwen3_next.state_dict_adapter import Qwen3NextStateDictAdapter
from nemo_automodel.components.moe.config import MoEConfig
from nemo_automodel.components.moe.experts import GroupedExperts, GroupedExpertsDeepEP
from nemo_automodel.components.moe.fsdp_mixin import MoEFSDPSyncMixin
from nemo_automodel.components.moe.layers import Gate, MoE
from nemo_automodel.components.moe.megatron.moe_utils import MoEAuxLossAutoScaler
from nemo_automodel.shared.import_utils import get_check_model_inputs_decorator
from nemo_automodel.shared.utils import dtype_from_str

__all__ = ["Qwen3NextForCausalLM"]

check_model_inputs = get_check_model_inputs_decorator()
ATTENTION_TYPES = ("full_attention", "sliding_attention")
THD_UNSUPPORTED = (
    "packed THD inputs need a Transformer Engine attention path, which this generated model "
    "does not have; use BSHD batches (packed_sequence_size: 0)"
)


def layer_types(config: Qwen3NextConfig) -> list[str]:
    """The attention kind of every layer, derived the way HF derives it."""
    # attention kind of every layer
    return list(config.layer_types)


def build_moe_config(
    config: Qwen3NextConfig,
    dtype: torch.dtype | None = None,
    overrides: dict[str, object] | None = None,
) -> MoEConfig:
    """AutoModel's ``MoEConfig`` for the sparse layers, read from the HF config.

    config.num_experts routed experts of width config.moe_intermediate_size,
    config.num_experts_per_tok per token: softmax over all experts, then top-k.
    ``overrides`` replaces fields (``moe_overrides`` of the model), e.g. ``aux_loss_coeff``.
    """
    fields = {
        "dim": config.hidden_size,
        "inter_dim": config.intermediate_size,
        "moe_inter_dim": config.moe_intermediate_size,
        "n_routed_experts": config.num_experts,
        # one shared expert of width config.shared_expert_intermediate_size beside the routed ones,
        # scaled by sigmoid(shared_expert_gate(x))
        "n_shared_experts": 1,
        "shared_expert_inter_dim": config.shared_expert_intermediate_size,
        "shared_expert_gate": True,
        "n_activated_experts": config.num_experts_per_tok,
        "n_expert_groups": 0,
        "n_limited_groups": 0,
        "score_func": "softmax",
        "softmax_before_topk": True,
        "norm_topk_prob": config.norm_topk_prob,
        "route_scale": 1.0,
        "router_bias": False,
        "expert_bias": False,
        "expert_activation": "swiglu",  # silu(gate) * up, as HF's experts with hidden_act silu
        # each expert's down-projection output is scaled by its routing weight, as HF's experts
        # scale it
        "apply_router_weight_after_down": True,
        "train_gate": True,
        "gate_bias_update_factor": 0.0,
        # Gate's own per-layer loss stays off: with output_router_logits the causal LM adds HF's,
        # which pools the router statistics of every sparse layer (AutoModel's Gate cannot).
        "aux_loss_coeff": 0.0,
        "dtype": dtype or torch.get_default_dtype(),
    }
    return MoEConfig(**{**fields, **(overrides or {})})


class RouterLogits(nn.Module):
    """The router's logits ``[tokens, experts]`` as they are: HF's output recorder collects them
    here for ``output_router_logits``."""

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return logits


class Qwen3NextGate(Gate):
    """AutoModel's router, showing its logits to ``RouterLogits`` before it scores them."""

    def __init__(self, config: MoEConfig, gate_precision: torch.dtype | None = None) -> None:
        super().__init__(config, gate_precision=gate_precision)
        self.router_logits = RouterLogits()

    def _route_scores(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        return super()._route_scores(self.router_logits(scores))


class Qwen3NextSparseMoE(MoE):
    """AutoModel's ``MoE`` with HF's training-time router behaviour.

    Its router shows its logits for HF's load-balancing loss.
    """

    def __init__(self, config: Qwen3NextConfig, moe_config: MoEConfig, backend: BackendConfig) -> None:
        super().__init__(moe_config, backend)
        if type(self.gate) is Gate:  # backend.fake_balanced_gate routes without logits
            gate = Qwen3NextGate(moe_config, gate_precision=backend.gate_precision)
            gate.use_routing_core = self.gate.use_routing_core
            self.gate = gate


class Qwen3NextAttention(HFQwen3NextAttention):
    """HF's attention (its projections, norms and config reading) with a NeMo forward.

    The forward rotates q and k with NeMo's fp32 ``apply_rotary_pos_emb`` and dispatches through
    ``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]`` as HF does.
    """

    def __init__(self, config: Qwen3NextConfig, layer_idx: int, backend: BackendConfig) -> None:
        super().__init__(config=config, layer_idx=layer_idx)
        self.backend = backend
        self.attention_type = layer_types(config)[layer_idx]
        self.sliding_window = config.sliding_window if self.attention_type == "sliding_attention" else None

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention over padded ``[B, S, H]`` hidden states; returns the output and weights."""
        if kwargs.get("qkv_format") == "thd":
            raise NotImplementedError(THD_UNSUPPORTED)
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        # q_norm / k_norm over each head, before RoPE
        # q_proj gives each head's query, then its gate: the output is scaled by sigmoid(gate)
        # before o_proj
        query_states, gate = torch.chunk(
            self.q_proj(hidden_states).view(*input_shape, -1, self.head_dim * 2), 2, dim=-1
        )
        gate = gate.reshape(*input_shape, -1)
        query_states = self.q_norm(query_states).transpose(1, 2)
        key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)

        cos, sin = position_embeddings[:2]
        # RoPE rotates the first config.partial_rotary_factor of each head (the tables' width); the rest
        # passes through
        rotary = cos.shape[-1]
        query_rot, key_rot = apply_rotary_pos_emb(query_states[..., :rotary], key_states[..., :rotary], cos, sin)
        query_states = torch.cat((query_rot, query_states[..., rotary:]), dim=-1)
        key_states = torch.cat((key_rot, key_states[..., rotary:]), dim=-1)
        if past_key_values is not None:
            key_states, value_states = past_key_values.update(key_states, value_states, self.layer_idx)

        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        # q.k scaled by head_dim ** -0.5 (self.scaling, set by the HF __init__)
        attn_output, attn_weights = attention_interface(
            self,
            query_states,
            key_states,
            value_states,
            attention_mask,
            dropout=self.attention_dropout if self.training else 0.0,
            scaling=self.scaling,
            sliding_window=self.sliding_window,
            **kwargs,
        )
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = attn_output * torch.sigmoid(gate)
        return self.o_proj(attn_output), attn_weights


class Qwen3NextDecoderLayer(HFQwen3NextDecoderLayer):
    """HF's decoder layer, with the attention above.

    pre-norm layers, as Qwen3NextDecoderLayer places them; AutoModel's MoE in sparse layers,
    HF's gated silu MLP in dense ones.
    """

    def __init__(
        self,
        config: Qwen3NextConfig,
        layer_idx: int,
        backend: BackendConfig,
        moe_config: MoEConfig,
    ) -> None:
        super().__init__(config=config, layer_idx=layer_idx)
        self.attention_type = layer_types(config)[layer_idx]
        if self.attention_type in ATTENTION_TYPES:
            self.self_attn = Qwen3NextAttention(config=config, layer_idx=layer_idx, backend=backend)
        # linear_attention layers keep HF's Qwen3NextGatedDeltaNet (self.linear_attn,
        # modeling_qwen3_next.py)
        # Qwen3NextDecoderLayer builds Qwen3NextSparseMoeBlock for the sparse layers (every
        # config.decoder_sparse_step-th layer not in config.mlp_only_layers); those get AutoModel's
        # MoE
        if isinstance(self.mlp, HFQwen3NextSparseMoeBlock):
            self.mlp = Qwen3NextSparseMoE(config, moe_config, backend)


class Qwen3NextPreTrainedModel(HFQwen3NextPreTrainedModel):
    """HF's base class (weight init, attention support flags), bound to the classes here."""

    config_class = Qwen3NextConfig
    base_model_prefix = "model"
    _no_split_modules = ["Qwen3NextDecoderLayer"]
    _can_record_outputs = {
        "hidden_states": Qwen3NextDecoderLayer,
        "attentions": Qwen3NextAttention,
        "router_logits": OutputRecorder(RouterLogits, index=0),
    }

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """HF's init, plus the router and experts of AutoModel's MoE, drawn as HF draws its own."""
        super()._init_weights(module)
        std = self.config.initializer_range
        if isinstance(module, Gate):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, (GroupedExperts, GroupedExpertsDeepEP)):
            init.normal_(module.gate_and_up_projs, mean=0.0, std=std)
            init.normal_(module.down_projs, mean=0.0, std=std)


class Qwen3NextModel(Qwen3NextPreTrainedModel):
    """Embeddings, decoder layers, final norm and RoPE tables, for padded BSHD batches."""

    def __init__(self, config: Qwen3NextConfig, backend: BackendConfig, moe_config: MoEConfig) -> None:
        super().__init__(config)
        self.moe_config = moe_config  # where AutoModel's MoE parallelizer reads it
        self.padding_idx = config.pad_token_id
        self.vocab_size = config.vocab_size
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList(
            [
                Qwen3NextDecoderLayer(config=config, layer_idx=idx, backend=backend, moe_config=moe_config)
                for idx in range(config.num_hidden_layers)
            ]
        )
        # Qwen3NextRMSNorm: rms norm scaling by (1 + w)
        self.norm = Qwen3NextRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        # RoPE of full_attention layers as config.rope_parameters sets it
        self.rotary_emb = LlamaRotaryEmbedding(config=config)
        self.layer_types = layer_types(config)
        self.gradient_checkpointing = False
        self.post_init()

    @check_model_inputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MoeModelOutputWithPast:
        """Run the decoder; ``attention_mask`` is a padding mask ``[B, S]`` or prepared masks."""
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        if kwargs.get("qkv_format") == "thd":
            raise NotImplementedError(THD_UNSUPPORTED)
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache(config=self.config)
        if position_ids is None:
            past_seen = past_key_values.get_seq_length() if past_key_values is not None else 0
            position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)
            position_ids = (position_ids + past_seen).unsqueeze(0)

        if not isinstance(causal_mask_mapping := attention_mask, dict):
            mask_kwargs = {
                "config": self.config,
                "inputs_embeds": inputs_embeds,
                "attention_mask": attention_mask,
                "past_key_values": past_key_values,
                "position_ids": position_ids,
            }
            causal_mask_mapping = {}
            if "full_attention" in self.layer_types:
                causal_mask_mapping["full_attention"] = create_causal_mask(**mask_kwargs)
            if "sliding_attention" in self.layer_types:
                causal_mask_mapping["sliding_attention"] = create_sliding_window_causal_mask(**mask_kwargs)
            # linear_attention layers take the 2-D padding mask (None when nothing is padded)
            causal_mask_mapping["linear_attention"] = create_recurrent_attention_mask(**mask_kwargs)

        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for decoder_layer in self.layers[: self.config.num_hidden_layers]:
            hidden_states = decoder_layer(
                hidden_states,
                attention_mask=causal_mask_mapping[decoder_layer.attention_type],
                position_ids=position_ids,
                past_key_values=past_key_values,
                position_embeddings=position_embeddings,
                **kwargs,
            )
        hidden_states = self.norm(hidden_states)
        return MoeModelOutputWithPast(
            last_hidden_state=hidden_states,
            past_key_values=past_key_values if use_cache else None,
        )


class Qwen3NextForCausalLM(HFCheckpointingMixin, Qwen3NextPreTrainedModel, GenerationMixin, MoEFSDPSyncMixin):
    """Qwen3Next causal LM: HF checkpoints load through ``Qwen3NextStateDictAdapter``."""

    # BOTH: the HF classes honour config.tie_word_embeddings either way; tie_word_embeddings=False
    # in the checkpoint
    tie_word_embeddings_support: TieSupport = TieSupport.BOTH
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    _tp_plan = {"lm_head": "colwise_rep"}
    _pp_plan = {"lm_head": (["hidden_states"], ["logits"])}
    _keep_in_fp32_modules = ["rotary_emb"]

    @dataclass(frozen=True)
    class ModelCapabilities:
        """Parallelism verified for this class: none beyond FSDP2 data parallelism yet.

        As an ``MoEFSDPSyncMixin`` the class goes through AutoModel's MoE parallelizer, which can
        shard the ``MoE`` experts; set a flag after running that axis on GPUs, together with an
        examples/ recipe using it (CI's test_model_capabilities requires both).

        Tensor parallelism is not declared: Qwen3MoeForCausalLM declares none to copy.

        Qwen3MoeForCausalLM also declares cp, pp, ep: not declared here until run on GPUs, with
        an examples/ recipe using them (CI's test_model_capabilities requires both).
        """

        supports_tp: bool = False
        supports_cp: bool = False
        supports_pp: bool = False
        supports_ep: bool = False

    @property
    def _uses_hf_attention(self) -> bool:
        """BSHD batches use HF's attention dispatch; there is no THD path."""
        return True

    def __init__(
        self,
        config: Qwen3NextConfig,
        moe_config: MoEConfig | None = None,
        backend: BackendConfig | None = None,
        moe_overrides: dict[str, object] | None = None,
    ) -> None:
        """``moe_config`` replaces the one read from ``config``; ``moe_overrides`` edits it."""
        reject_unsupported_tie_word_embeddings(type(self), config)
        super().__init__(config)
        self.backend = backend or BackendConfig()
        dtype = getattr(config, "dtype", None)
        if moe_config is not None and moe_overrides:
            raise ValueError("pass moe_config or moe_overrides, not both")
        if moe_config is None:
            # The experts are built in the model's dtype, like every other parameter.
            expert_dtype = dtype_from_str(dtype, torch.get_default_dtype())
            moe_config = build_moe_config(config, expert_dtype, moe_overrides)
        self.model = Qwen3NextModel(config=config, backend=self.backend, moe_config=moe_config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if self.backend.enable_hf_state_dict_adapter:
            self.state_dict_adapter = Qwen3NextStateDictAdapter(
                config, moe_config, self.backend, dtype=moe_config.dtype
            )
        self.post_init()
        self.tie_weights()
        if dtype is not None:
            # save_pretrained leaves the dtype as a string such as "float32" in the config.
            cast_model_to_dtype(self, dtype_from_str(dtype))

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed_tokens

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.model.embed_tokens = value

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def set_output_embeddings(self, new_embeddings: nn.Module) -> None:
        self.lm_head = new_embeddings

    def tie_weights(self, *_args: object, **_kwargs: object) -> None:
        if getattr(self.config, "tie_word_embeddings", False):
            self.lm_head.weight = self.model.embed_tokens.weight

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_router_logits: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MoeCausalLMOutputWithPast:
        """Logits ``[B, S, V]`` (and the loss when ``labels`` are given).

        With ``output_router_logits`` (the config's unless given) the output also holds every
        sparse layer's router logits and HF's load-balancing loss ``aux_loss``; with ``labels``
        the loss includes it times ``config.router_aux_loss_coef``, as HF's. Without ``labels``, in
        training, the final hidden states (so the logits) carry that term's gradient instead:
        AutoModel's recipes compute the loss from them and never pass labels (add ``aux_loss``
        to such a loss yourself and it counts twice).
        """
        if output_router_logits is None:
            output_router_logits = self.config.output_router_logits
        outputs: MoeModelOutputWithPast = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_router_logits=output_router_logits,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        aux_loss = None
        if output_router_logits:
            aux_loss = self.load_balancing_loss(outputs.router_logits, attention_mask)
            if labels is None and self.training and torch.is_grad_enabled():
                # the gradient of the coefficient x aux_loss joins the final hidden states' in
                # backward (the recipes' loss reads them, or the logits made from them), as
                # AutoModel's Gate joins its own loss's to the routing weights
                aux_term = self.config.router_aux_loss_coef * aux_loss
                hidden_states = MoEAuxLossAutoScaler.apply(hidden_states, aux_term)
                if outputs.hidden_states is not None:
                    outputs.hidden_states = (*outputs.hidden_states[:-1], hidden_states)
        logits = compute_lm_head_logits(self.lm_head, hidden_states, logits_to_keep).logits
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        if loss is not None and aux_loss is not None:
            # with output_router_logits, HF's causal LM adds config.router_aux_loss_coef x its
            # load-balancing loss over the router logits of every sparse layer, padding excluded by
            # the 2-D attention mask
            loss = loss + self.config.router_aux_loss_coef * aux_loss.to(loss.device)
        return MoeCausalLMOutputWithPast(
            loss=loss,
            aux_loss=aux_loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            router_logits=outputs.router_logits,
        )

    def load_balancing_loss(
        self, router_logits: tuple[torch.Tensor, ...], attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """HF's ``load_balancing_loss_func`` over the router logits of every sparse layer.

        ``attention_mask`` is the 2-D padding mask ``[B, S]`` (1 for a token) or None, as HF takes
        it: padding does not count in the experts' load or mean probability.
        """
        sparse = sum(isinstance(layer.mlp, MoE) for layer in self.model.layers)
        if len(router_logits or ()) != sparse:
            raise ValueError(
                f"{len(router_logits or ())} of {sparse} sparse layers gave router logits: the "
                "load-balancing loss needs them all (backend.fake_balanced_gate gives none)"
            )
        if attention_mask is not None and (isinstance(attention_mask, dict) or attention_mask.dim() != 2):
            raise ValueError(
                "the load-balancing loss leaves padding out by the 2-D attention mask [batch, "
                "sequence]; pass that mask, not prepared attention masks"
            )
        return load_balancing_loss_func(
            router_logits,
            self.config.num_experts,
            self.config.num_experts_per_tok,
            attention_mask,
        )


ModelClass = Qwen3NextForCausalLM
