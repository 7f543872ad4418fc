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
# onboard 0.1.0: generated from Qwen/Qwen3-0.6B (revision unknown), transformers 5.18.0
# modeling_qwen3.py sha256:849d80c7674793b3, for nemo-automodel 0.7.0. Closest AutoModel class:
# LlamaForCausalLM.

"""Qwen3 causal language model for NeMo AutoModel, on HF's ``modeling_qwen3.py``.

The module tree is HF's own: the attention and decoder layer subclass ``Qwen3Attention`` and
``Qwen3DecoderLayer`` (with HF's ``Qwen3MLP`` and ``Qwen3RMSNorm``), so parameter names and
layouts equal the checkpoint's. What AutoModel owns is written here: the attention forward
(NeMo's fp32 RoPE, HF's attention dispatch), the RoPE tables, the model and causal-LM classes
with their backend, tie policy, capabilities and logits.

Closest AutoModel class: ``nemo_automodel.components.models.llama.model.LlamaForCausalLM``.
Beyond it, this architecture has:

- attention.qk_norm per_head (it has none)
- attention.sliding_window per_layer (it has none)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from transformers import Qwen3Config
from transformers.cache_utils import Cache, DynamicCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention as HFQwen3Attention
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer as HFQwen3DecoderLayer
from transformers.models.qwen3.modeling_qwen3 import Qwen3PreTrainedModel as HFQwen3PreTrainedModel
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, eager_attention_forward
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple

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
from nemo_automodel.components.models.qwen3.state_dict_adapter import Qwen3StateDictAdapter
from nemo_automodel.shared.import_utils import get_check_model_inputs_decorator
from nemo_automodel.shared.utils import dtype_from_str

__all__ = ["Qwen3ForCausalLM"]

check_model_inputs = get_check_model_inputs_decorator()
THD_UNSUPPORTED = (
    "packed THD inputs need a Transformer Engine attention path, which this generated model "
    "does not have; use BSHD batches (packed_sequence_size: 0)"
)


def layer_types(config: Qwen3Config) -> list[str]:
    """The attention kind of every layer, derived the way HF derives it."""
    # attention kind of every layer
    return list(config.layer_types)


class Qwen3Attention(HFQwen3Attention):
    """HF's attention (its projections, norms and config reading) with a NeMo forward.

    The forward rotates q and k with NeMo's fp32 ``apply_rotary_pos_emb`` and dispatches through
    ``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]`` as HF does.
    """

    def __init__(self, config: Qwen3Config, layer_idx: int, backend: BackendConfig) -> None:
        super().__init__(config=config, layer_idx=layer_idx)
        self.backend = backend
        self.attention_type = layer_types(config)[layer_idx]
        # sliding layers attend to config.sliding_window tokens
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
        query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)

        cos, sin = position_embeddings[:2]
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
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
        return self.o_proj(attn_output), attn_weights


class Qwen3DecoderLayer(HFQwen3DecoderLayer):
    """HF's decoder layer, with the attention above.

    pre-norm layers, as Qwen3DecoderLayer places them; gated MLP, silu.
    """

    def __init__(self, config: Qwen3Config, layer_idx: int, backend: BackendConfig) -> None:
        super().__init__(config=config, layer_idx=layer_idx)
        self.self_attn = Qwen3Attention(config=config, layer_idx=layer_idx, backend=backend)
        self.attention_type = self.self_attn.attention_type


class Qwen3PreTrainedModel(HFQwen3PreTrainedModel):
    """HF's base class (weight init, attention support flags), bound to the classes here."""

    config_class = Qwen3Config
    base_model_prefix = "model"
    _no_split_modules = ["Qwen3DecoderLayer"]
    _can_record_outputs = {
        "hidden_states": Qwen3DecoderLayer,
        "attentions": Qwen3Attention,
    }


class Qwen3Model(Qwen3PreTrainedModel):
    """Embeddings, decoder layers, final norm and RoPE tables, for padded BSHD batches."""

    def __init__(self, config: Qwen3Config, backend: BackendConfig) -> None:
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.vocab_size = config.vocab_size
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList(
            [
                Qwen3DecoderLayer(config=config, layer_idx=idx, backend=backend)
                for idx in range(config.num_hidden_layers)
            ]
        )
        # Qwen3RMSNorm: rms norm
        self.norm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
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
    ) -> BaseModelOutputWithPast:
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
        return BaseModelOutputWithPast(
            last_hidden_state=hidden_states,
            past_key_values=past_key_values if use_cache else None,
        )


class Qwen3ForCausalLM(HFCheckpointingMixin, Qwen3PreTrainedModel, GenerationMixin):
    """Qwen3 causal LM: HF checkpoints load through ``Qwen3StateDictAdapter``."""

    # BOTH: the HF classes honour config.tie_word_embeddings either way; tie_word_embeddings=True in
    # the checkpoint; lm_head.weight is not saved
    tie_word_embeddings_support: TieSupport = TieSupport.BOTH
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    _tp_plan = {"lm_head": "colwise_rep"}
    _pp_plan = {"lm_head": (["hidden_states"], ["logits"])}
    _keep_in_fp32_modules = ["rotary_emb"]

    @dataclass(frozen=True)
    class ModelCapabilities:
        """Parallelism copied from the closest AutoModel class where this class's plan covers it.

        Tensor parallelism is copied from LlamaForCausalLM: AutoModel shards this class with its
        own plan for nemo_automodel.components.models.qwen3.model.Qwen3ForCausalLM
        (PARALLELIZE_FUNCTIONS), which places every parameter, and
        test_tensor_parallel_matches_unsharded runs it on 2 CPU ranks.

        LlamaForCausalLM also declares cp, pp: not declared here until run on GPUs, with an
        examples/ recipe using them (CI's test_model_capabilities requires both).
        """

        supports_tp: bool = True
        supports_cp: bool = False
        supports_pp: bool = False
        supports_ep: bool = False

    @property
    def _uses_hf_attention(self) -> bool:
        """BSHD batches use HF's attention dispatch; there is no THD path."""
        return True

    def __init__(self, config: Qwen3Config, backend: BackendConfig | None = None) -> None:
        reject_unsupported_tie_word_embeddings(type(self), config)
        super().__init__(config)
        self.backend = backend or BackendConfig()
        self.model = Qwen3Model(config=config, backend=self.backend)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if self.backend.enable_hf_state_dict_adapter:
            self.state_dict_adapter = Qwen3StateDictAdapter(config)
        self.post_init()
        self.tie_weights()
        dtype = getattr(config, "dtype", None)
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
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CausalLMOutputWithPast:
        """Logits ``[B, S, V]`` (and the loss when ``labels`` are given)."""
        outputs: BaseModelOutputWithPast = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        logits = compute_lm_head_logits(self.lm_head, outputs.last_hidden_state, logits_to_keep).logits
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


ModelClass = Qwen3ForCausalLM
