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
# onboard 0.1.0: generated from llava-hf/llava-1.5-7b-hf (revision unknown), transformers 5.18.0
# modeling_llava.py sha256:e5cb54d23a718bf7, for nemo-automodel 0.7.0. Closest AutoModel class:
# LlamaForCausalLM.

"""Llava vision-language model for NeMo AutoModel, its text model on HF's ``modeling_llama.py``.

``LlavaForConditionalGeneration`` holds ``model.vision_tower`` (HF's tower for
``config.vision_config``, built with ``AutoModel.from_config`` as HF's own VLM builds it),
``model.multi_modal_projector`` (HF's ``LlavaMultiModalProjector``), ``model.language_model``
(``LlavaTextModel``, below) and ``lm_head``. It selects the tower's hidden states the projector
reads and puts the projected features in the rows of the image placeholder tokens;
``LlavaStateDictAdapter`` routes each checkpoint prefix to its part. ``LlavaTextForCausalLM`` is
the text model alone, for text-only checkpoints of the backbone.

Text model:

The module tree is HF's own: the attention and decoder layer subclass ``LlamaAttention`` and
``LlamaDecoderLayer`` (with HF's ``LlamaMLP`` and ``LlamaRMSNorm``), so parameter names and
layouts equal the checkpoint's. What AutoModel owns is written here: the attention forward
(NeMo's fp32 RoPE, HF's attention dispatch), the RoPE tables, the model and causal-LM classes
with their backend, tie policy, capabilities and logits.

Closest AutoModel class: ``nemo_automodel.components.models.llama.model.LlamaForCausalLM``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from transformers import AutoModel, LlamaConfig, LlavaConfig
from transformers.cache_utils import Cache, DynamicCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaAttention as HFLlamaAttention
from transformers.models.llama.modeling_llama import LlamaDecoderLayer as HFLlamaDecoderLayer
from transformers.models.llama.modeling_llama import LlamaPreTrainedModel as HFLlamaPreTrainedModel
from transformers.models.llama.modeling_llama import LlamaRMSNorm, eager_attention_forward
from transformers.models.llava.modeling_llava import LlavaMultiModalProjector as HFLlavaMultiModalProjector
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
from nemo_automodel.components.models.llava.state_dict_adapter import LlavaStateDictAdapter, LlavaTextStateDictAdapter
from nemo_automodel.shared.import_utils import get_check_model_inputs_decorator
from nemo_automodel.shared.utils import dtype_from_str

__all__ = ["LlavaForConditionalGeneration", "LlavaTextForCausalLM"]

check_model_inputs = get_check_model_inputs_decorator()
THD_UNSUPPORTED = (
    "packed THD inputs need a Transformer Engine attention path, which this generated model "
    "does not have; use BSHD batches (packed_sequence_size: 0)"
)


def layer_types(config: LlamaConfig) -> list[str]:
    """The attention kind of every layer, derived the way HF derives it."""
    # no sliding layers: attention kind of every layer (config.json)
    return ["full_attention"] * config.num_hidden_layers


class LlavaTextAttention(HFLlamaAttention):
    """HF's attention (its projections, norms and config reading) with a NeMo forward.

    The forward rotates q and k with NeMo's fp32 ``apply_rotary_pos_emb`` and dispatches through
    ``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]`` as HF does.
    """

    def __init__(self, config: LlamaConfig, layer_idx: int, backend: BackendConfig) -> None:
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
        # no q/k norm
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
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


class LlavaTextDecoderLayer(HFLlamaDecoderLayer):
    """HF's decoder layer, with the attention above.

    pre-norm layers, as LlamaDecoderLayer places them; gated MLP, silu.
    """

    def __init__(self, config: LlamaConfig, layer_idx: int, backend: BackendConfig) -> None:
        super().__init__(config=config, layer_idx=layer_idx)
        self.self_attn = LlavaTextAttention(config=config, layer_idx=layer_idx, backend=backend)
        self.attention_type = self.self_attn.attention_type


class LlavaTextPreTrainedModel(HFLlamaPreTrainedModel):
    """HF's base class (weight init, attention support flags), bound to the classes here."""

    config_class = LlamaConfig
    base_model_prefix = "model"
    _no_split_modules = ["LlavaTextDecoderLayer"]
    _can_record_outputs = {
        "hidden_states": LlavaTextDecoderLayer,
        "attentions": LlavaTextAttention,
    }


class LlavaTextModel(LlavaTextPreTrainedModel):
    """Embeddings, decoder layers, final norm and RoPE tables, for padded BSHD batches."""

    def __init__(self, config: LlamaConfig, backend: BackendConfig) -> None:
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.vocab_size = config.vocab_size
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList(
            [
                LlavaTextDecoderLayer(config=config, layer_idx=idx, backend=backend)
                for idx in range(config.num_hidden_layers)
            ]
        )
        # LlamaRMSNorm: rms norm
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
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


class LlavaTextForCausalLM(HFCheckpointingMixin, LlavaTextPreTrainedModel, GenerationMixin):
    """LlavaText causal LM: HF checkpoints load through ``LlavaTextStateDictAdapter``."""

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

        Set a flag after running that axis on GPUs, together with an examples/ recipe using it
        (CI's test_model_capabilities requires both).
        """

        supports_tp: bool = False
        supports_cp: bool = False
        supports_pp: bool = False
        supports_ep: bool = False

    @property
    def _uses_hf_attention(self) -> bool:
        """BSHD batches use HF's attention dispatch; there is no THD path."""
        return True

    def __init__(self, config: LlamaConfig, backend: BackendConfig | None = None) -> None:
        reject_unsupported_tie_word_embeddings(type(self), config)
        super().__init__(config)
        self.backend = backend or BackendConfig()
        self.model = LlavaTextModel(config=config, backend=self.backend)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if self.backend.enable_hf_state_dict_adapter:
            self.state_dict_adapter = LlavaTextStateDictAdapter(config)
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


class LlavaModel(nn.Module):
    """HF's vision tower and projector beside the generated text model.

    Image features replace the embeddings of the image placeholder tokens, then the text model
    runs on the merged embeddings (and its own KV cache when decoding).
    """

    def __init__(self, config: LlavaConfig, backend: BackendConfig) -> None:
        super().__init__()
        self.config = config
        # HF's tower for config.vision_config, built as HF's VLM builds it
        self.vision_tower = AutoModel.from_config(config.vision_config)
        self.multi_modal_projector = HFLlavaMultiModalProjector(config)
        self.language_model = LlavaTextModel(config.text_config, backend=backend)

    def get_input_embeddings(self) -> nn.Module:
        return self.language_model.get_input_embeddings()

    def get_image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Projected features ``[images * tokens, text hidden]``, image after image.

        The projector reads the tower's ``hidden_states`` at the configured layer (or layers,
        concatenated along the width), without the class token when the strategy drops it.
        """
        # selection as in modeling_llava.py
        layers = self.config.vision_feature_layer
        layers = [layers] if isinstance(layers, int) else list(layers)
        outputs = self.vision_tower(pixel_values, output_hidden_states=True, return_dict=True)
        states = [outputs.hidden_states[layer] for layer in layers]
        if self.config.vision_feature_select_strategy == "default":
            states = [state[:, 1:] for state in states]
        selected = torch.cat(states, dim=-1)
        features = self.multi_modal_projector(selected)
        return features.reshape(-1, features.shape[-1])

    def merge_image_features(
        self, input_ids: torch.LongTensor, inputs_embeds: torch.Tensor, image_features: torch.Tensor
    ) -> torch.Tensor:
        """Each placeholder's embedding replaced by the next feature row, reading the whole batch
        in order (row after row), as HF's ``masked_scatter`` does."""
        placeholders = input_ids == self.config.image_token_id
        if int(placeholders.sum()) != image_features.shape[0]:
            raise ValueError(f"{int(placeholders.sum())} image tokens but {image_features.shape[0]} image features")
        mask = placeholders.unsqueeze(-1).expand_as(inputs_embeds)
        return inputs_embeds.masked_scatter(mask, image_features.to(inputs_embeds.dtype))

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        *,
        pixel_values: torch.FloatTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPast:
        """The text model's output on the merged embeddings; ``pixel_values`` one image per
        placeholder block, in the order the placeholders appear."""
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.get_input_embeddings()(input_ids)
        if pixel_values is not None:
            if input_ids is None:
                raise ValueError("pixel_values need input_ids: the placeholders mark where images go")
            features = self.get_image_features(pixel_values)
            inputs_embeds = self.merge_image_features(input_ids, inputs_embeds, features)
        return self.language_model(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            use_cache=use_cache,
            **kwargs,
        )


class LlavaForConditionalGeneration(HFCheckpointingMixin, nn.Module):
    """Llava vision-language model: HF checkpoints load through ``LlavaStateDictAdapter``."""

    # BOTH: HF's VLM ties lm_head to the text embeddings when config.tie_word_embeddings says so
    tie_word_embeddings_support: TieSupport = TieSupport.BOTH
    _tied_weights_keys = {"lm_head.weight": "model.language_model.embed_tokens.weight"}

    @dataclass(frozen=True)
    class ModelCapabilities:
        """Parallelism verified for this class: none beyond FSDP2 data parallelism yet.

        Set a flag after running that axis on GPUs, together with an examples/ recipe using it
        (CI's test_model_capabilities requires both).
        """

        supports_tp: bool = False
        supports_cp: bool = False
        supports_pp: bool = False
        supports_ep: bool = False

    def __init__(self, config: LlavaConfig, backend: BackendConfig | None = None) -> None:
        reject_unsupported_tie_word_embeddings(type(self), config)
        super().__init__()
        self.config = config
        self.backend = backend or BackendConfig()
        self.model = LlavaModel(config, backend=self.backend)
        text = config.text_config
        self.lm_head = nn.Linear(text.hidden_size, text.vocab_size, bias=False)
        if self.backend.enable_hf_state_dict_adapter:
            self.state_dict_adapter = LlavaStateDictAdapter(config)
        self.tie_weights()
        dtype = getattr(config, "dtype", None)
        if dtype is not None:
            # save_pretrained leaves the dtype as a string such as "float32" in the config.
            cast_model_to_dtype(self, dtype_from_str(dtype))

    def get_input_embeddings(self) -> nn.Module:
        return self.model.get_input_embeddings()

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def tie_weights(self, *_args: object, **_kwargs: object) -> None:
        if getattr(self.config, "tie_word_embeddings", False):
            self.lm_head.weight = self.get_input_embeddings().weight

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        *,
        pixel_values: torch.FloatTensor | None = None,
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
            pixel_values=pixel_values,
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
            vocab = logits.shape[-1]
            loss = nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, vocab).float(), labels[:, 1:].reshape(-1), ignore_index=-100
            )
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


ModelClass = LlavaForConditionalGeneration
