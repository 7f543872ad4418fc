# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from Qwen/Qwen2.5-VL-3B-Instruct (revision unknown), transformers
# 5.18.0 modeling_qwen2_5_vl.py sha256:1b7a2a6403d309cd.
# Closest mobius class: CausalLMModel (registry key llama).

"""Qwen25VL vision-language model.

The text model of :class:`~mobius.models.base.CausalLMModel` on merged embeddings, with:

- attention biases (q/k/v True, o False)
- vision encoder: mobius' windowed ViT over flattened patches and image_grid_thw, windows
  and full-attention layers read from the composite config
- merger: ln_q -> group_rows -> mlp.0 -> gelu -> mlp.2
- image features fill the placeholder tokens in reading order over the whole batch
- positions: M-RoPE sections (chunks) from text_config.rope_parameters.mrope_section,
  computed by the host

Replicates HuggingFace's ``Qwen2_5_VLForConditionalGeneration``.
"""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnxscript import OpBuilder, nn

from mobius._configs import (
    ArchitectureConfig,
    Qwen25VLConfig,
    Qwen25VLMultiModalConfig,
)
from mobius.components import Embedding, Linear, Qwen25VLVisionModel, RMSNorm, get_activation
from mobius.models.base import CausalLMModel


class Qwen25VLCausalLMModel(CausalLMModel):
    """Qwen25VL causal LM.

    Replicates HuggingFace's ``Qwen2_5_VLForConditionalGeneration``.
    """

    config_class = Qwen25VLConfig


def _vision_field(config: ArchitectureConfig, name: str):
    """A field of Qwen25VLMultiModalConfig, or its default for a plain ArchitectureConfig.

    mobius' build tests build every registered class from a plain ArchitectureConfig.
    """
    return getattr(config, name, getattr(Qwen25VLMultiModalConfig, name))


class Qwen25VLMergerActivation(nn.Module):
    """The activation between the merger's linears (a step without weights)."""

    def __init__(self, activation: str):
        super().__init__()
        self._act = get_activation(activation)

    def forward(self, op: OpBuilder, features: ir.Value) -> ir.Value:
        return self._act(op, features)


class Qwen25VLPatchMerger(nn.Module):
    """Each merge block's patches to one token.

    ln_q over every patch, the block's spatial_merge_size ** 2 patches (consecutive rows)
    concatenated, then mlp.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self._width = (
            config.vision.hidden_size * _vision_field(config, "spatial_merge_size") ** 2
        )
        self.ln_q = RMSNorm(config.vision.hidden_size, eps=1e-06)
        self.mlp = nn.ModuleList(
            [
                Linear(
                    config.vision.hidden_size
                    * _vision_field(config, "spatial_merge_size") ** 2,
                    config.vision.hidden_size
                    * _vision_field(config, "spatial_merge_size") ** 2,
                    bias=True,
                ),
                Qwen25VLMergerActivation("gelu"),
                Linear(
                    config.vision.hidden_size
                    * _vision_field(config, "spatial_merge_size") ** 2,
                    config.hidden_size,
                    bias=True,
                ),
            ]
        )

    def forward(self, op: OpBuilder, features: ir.Value) -> ir.Value:
        features = self.ln_q(op, features)
        features = op.Reshape(features, op.Constant(value_ints=[-1, self._width]))
        for layer in self.mlp:
            features = layer(op, features)
        return features


class Qwen25VLVisionTransformer(Qwen25VLVisionModel):
    """mobius' windowed ViT with the generated merger.

    Its windows and full-attention layers are read from the composite config.
    """

    def __init__(self, config: ArchitectureConfig):
        vision = config.vision
        super().__init__(
            depth=vision.num_hidden_layers,
            hidden_size=vision.hidden_size,
            intermediate_size=vision.intermediate_size,
            num_heads=vision.num_attention_heads,
            patch_size=vision.patch_size,
            temporal_patch_size=_vision_field(config, "temporal_patch_size"),
            in_channels=vision.in_channels,
            out_hidden_size=config.hidden_size,
            spatial_merge_size=_vision_field(config, "spatial_merge_size"),
            fullatt_block_indexes=_vision_field(config, "fullatt_block_indexes"),
            window_size=_vision_field(config, "window_size"),
        )
        self.merger = Qwen25VLPatchMerger(config)

    def preprocess_weights(
        self, state_dict: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """HF's names, the merger's included, are the graph's."""
        return dict(state_dict)


class Qwen25VLVisionEncoder(nn.Module):
    """Flattened patches with their grids -> image_features [tokens, hidden].

    pixel_values [patches, channels x frames x patch x patch] and image_grid_thw [images, 3]:
    every image's patches in one sequence.
    """

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.visual = Qwen25VLVisionTransformer(config)

    def forward(
        self, op: OpBuilder, pixel_values: ir.Value, image_grid_thw: ir.Value
    ) -> ir.Value:
        return self.visual(op, pixel_values, image_grid_thw)


class Qwen25VLEmbedding(nn.Module):
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


class Qwen25VLDecoder(Qwen25VLCausalLMModel):
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


class Qwen25VLMultiModalModel(nn.Module):
    """Qwen25VL: vision encoder, embedding and decoder, built as three graphs.

    Replicates HuggingFace's ``Qwen2_5_VLForConditionalGeneration``.
    """

    default_task = "qwen-vl"
    category = "Multimodal"
    config_class = Qwen25VLMultiModalConfig

    def __init__(self, config: ArchitectureConfig):
        super().__init__()
        self.config = config
        self.decoder = Qwen25VLDecoder(config)
        self.vision_encoder = Qwen25VLVisionEncoder(config)
        self.embedding = Qwen25VLEmbedding(config)

    def preprocess_weights(
        self, state_dict: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Checkpoint names to the three graphs' (only this top-level method runs)."""
        text, tower, result = {}, {}, {}
        for name, tensor in state_dict.items():
            if name.startswith("model.embed_tokens."):
                leaf = name.removeprefix("model.")
                result[f"embedding.{leaf}"] = tensor
                # HF ties the head to the embeddings; the decoder, which takes embeddings, holds
                # the only other copy
                text["lm_head.weight"] = tensor
            elif name.startswith("model."):
                text[f"model.{name.removeprefix('model.')}"] = tensor
            elif name.startswith("visual.merger."):
                leaf = name.removeprefix("visual.merger.")
                result[f"vision_encoder.visual.merger.{leaf}"] = tensor
            elif name.startswith("visual."):
                tower[name.removeprefix("visual.")] = tensor
            else:
                raise KeyError(f"unexpected checkpoint tensor {name}")
        for name, tensor in self.decoder.preprocess_weights(text).items():
            if name.startswith("model.embed_tokens."):
                continue  # the decoder runs on embeddings: its head holds the tied copy
            result[f"decoder.{name}"] = tensor
        # The tower keeps HF's names, its merger's included.
        vision_tower = self.vision_encoder.visual
        for name, tensor in vision_tower.preprocess_weights(tower).items():
            result[f"vision_encoder.visual.{name}"] = tensor
        return result
