# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from llava-hf/llava-1.5-7b-hf (revision unknown), transformers
# 5.18.0 modeling_llava.py sha256:e5cb54d23a718bf7.
# Closest mobius class: CausalLMModel (registry key llama).

"""Llava vision-language model.

The text model of :class:`~mobius.models.base.CausalLMModel` on merged embeddings, with:

- vision features: hidden state -2 of the tower, without the class token
- projector: linear_1 -> gelu -> linear_2
- image features fill the placeholder tokens in reading order over the whole batch

Replicates HuggingFace's ``LlavaForConditionalGeneration``.
"""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnxscript import OpBuilder, nn

from mobius._configs import (
    ArchitectureConfig,
    LlavaConfig,
    LlavaMultiModalConfig,
)
from mobius.components import Embedding, Linear, get_activation
from mobius.models.base import CausalLMModel
from mobius.models.clip import ClipVisionConfigView, CLIPVisionModel


class LlavaCausalLMModel(CausalLMModel):
    """Llava causal LM.

    Replicates HuggingFace's ``LlavaForConditionalGeneration``.
    """

    config_class = LlavaConfig


def _vision_field(config: ArchitectureConfig, name: str):
    """A field of LlavaMultiModalConfig, or its default for a plain ArchitectureConfig.

    mobius' build tests build every registered class from a plain ArchitectureConfig.
    """
    return getattr(config, name, getattr(LlavaMultiModalConfig, name))


class LlavaMultiModalProjector(nn.Module):
    """The tower's features to the text's width: linear_1, gelu, linear_2."""

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        bias = _vision_field(config, "multimodal_projector_bias")
        self.linear_1 = Linear(config.vision.hidden_size, config.hidden_size, bias=bias)
        self._act = get_activation(_vision_field(config, "projector_hidden_act"))
        self.linear_2 = Linear(config.hidden_size, config.hidden_size, bias=bias)

    def forward(self, op: OpBuilder, features: ir.Value) -> ir.Value:
        features = self.linear_1(op, features)
        features = self._act(op, features)
        features = self.linear_2(op, features)
        return features


class LlavaVisionEncoder(nn.Module):
    """pixel_values [batch, channels, size, size] -> image_features [batch x patches, hidden].

    CLIPVisionModel runs the layers up to the selected hidden state and never post-norms it, as
    HF reads ``hidden_states[vision_feature_layer]``.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self._hidden_size = config.hidden_size
        self.vision_tower = CLIPVisionModel(
            ClipVisionConfigView(config.vision),
            feature_layer=_vision_field(config, "vision_feature_layer"),
            drop_class_token=_vision_field(config, "drop_class_token"),
        )
        self.multi_modal_projector = LlavaMultiModalProjector(config)

    def forward(self, op: OpBuilder, pixel_values: ir.Value) -> ir.Value:
        features = self.multi_modal_projector(op, self.vision_tower(op, pixel_values))
        return op.Reshape(features, op.Constant(value_ints=[-1, self._hidden_size]))


class LlavaEmbedding(nn.Module):
    """Token embeddings, with each image placeholder's row taken from the image features.

    Placeholders take feature rows in reading order over the whole batch, as HF's
    ``masked_scatter`` does: the count runs on across rows instead of restarting on each.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.embed_tokens = Embedding(
            config.vocab_size, config.hidden_size, config.pad_token_id
        )
        self._image_token_id = config.image_token_id
        self._hidden_size = config.hidden_size

    def forward(
        self, op: OpBuilder, input_ids: ir.Value, image_features: ir.Value
    ) -> ir.Value:
        embeddings = self.embed_tokens(op, input_ids)
        is_image = op.Equal(input_ids, op.Constant(value_int=self._image_token_id))
        flat = op.Reshape(
            op.Cast(is_image, to=ir.DataType.INT64), op.Constant(value_ints=[-1])
        )
        row = op.Sub(op.CumSum(flat, op.Constant(value_int=0)), op.Constant(value_int=1))
        row = op.Reshape(op.Clip(row, op.Constant(value_int=0)), op.Shape(input_ids))
        # One zero row past the features keeps Gather valid when there are none (decode steps).
        zero = op.CastLike(
            op.ConstantOfShape(op.Constant(value_ints=[1, self._hidden_size])), image_features
        )
        rows = op.Gather(op.Concat(image_features, zero, axis=0), row, axis=0)
        # A placeholder with no feature row left (a decode step that generated the image
        # token) keeps its token embedding, as HF merges only when it has image features
        filled = op.And(is_image, op.Less(row, op.Shape(image_features, start=0, end=1)))
        return op.Where(op.Unsqueeze(filled, [-1]), rows, embeddings)


class LlavaDecoder(LlavaCausalLMModel):
    """The text model on merged embeddings, with its KV cache."""

    def forward(
        self,
        op: OpBuilder,
        inputs_embeds: ir.Value,
        attention_mask: ir.Value,
        position_ids: ir.Value,
        past_key_values: list | None = None,
    ):
        hidden_states, present_key_values = self.model(
            op,
            input_ids=None,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
        )
        return self.lm_head(op, hidden_states), present_key_values


class LlavaMultiModalModel(nn.Module):
    """Llava: vision encoder, embedding and decoder, built as three graphs.

    Replicates HuggingFace's ``LlavaForConditionalGeneration``.
    """

    default_task = "vision-language"
    category = "Multimodal"
    config_class = LlavaMultiModalConfig

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.config = config
        self.decoder = LlavaDecoder(config)
        self.vision_encoder = LlavaVisionEncoder(config)
        self.embedding = LlavaEmbedding(config)

    def preprocess_weights(
        self, state_dict: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Checkpoint names to the three graphs' (only this top-level method runs)."""
        text, tower, result = {}, {}, {}
        for name, tensor in state_dict.items():
            if name.startswith("language_model.model.embed_tokens."):
                leaf = name.removeprefix("language_model.model.")
                result[f"embedding.{leaf}"] = tensor
            elif name.startswith("language_model.model."):
                text[f"model.{name.removeprefix('language_model.model.')}"] = tensor
            elif name.startswith("language_model.lm_head."):
                text[f"lm_head.{name.removeprefix('language_model.lm_head.')}"] = tensor
            elif name.startswith("multi_modal_projector."):
                leaf = name.removeprefix("multi_modal_projector.")
                result[f"vision_encoder.multi_modal_projector.{leaf}"] = tensor
            elif name.startswith("vision_tower."):
                tower[name.removeprefix("vision_tower.")] = tensor
            else:
                raise KeyError(f"unexpected checkpoint tensor {name}")
        for name, tensor in self.decoder.preprocess_weights(text).items():
            result[f"decoder.{name}"] = tensor
        # Published checkpoints add vision_model. under the tower; CLIPVisionModel strips it
        # and drops what HF computes but never reads (later layers, the post norm).
        vision_tower = self.vision_encoder.vision_tower
        for name, tensor in vision_tower.preprocess_weights(tower).items():
            result[f"vision_encoder.vision_tower.{name}"] = tensor
        return result
