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
# onboard 0.1.0: generated from Qwen/Qwen3-30B-A3B (revision unknown), transformers 5.18.0
# modeling_qwen3_moe.py sha256:510cbec619d1cc66, for nemo-automodel 0.7.0. Closest AutoModel class:
# Qwen3ForCausalLM.

"""Checkpoint boundary of Qwen3MoeForCausalLM: HF on-disk tensors <-> the native state dict.

The checkpoint keeps one tensor per expert; AutoModel's ``GroupedExperts`` hold each layer's
experts grouped and transposed for ``x @ w``: ``mlp.experts.gate_and_up_projs [E, dim, 2 *
moe_inter_dim]`` and ``mlp.experts.down_projs [E, moe_inter_dim, dim]``.
``MoESplitExpertsStateDictMixin`` converts both ways (under expert parallelism, only this rank's
experts). Every other tensor keeps HF's name. A tied checkpoint omits ``lm_head.weight``:
``from_hf`` aliases it to the embeddings and ``to_hf`` drops it again, so
``to_hf(model.state_dict())`` names exactly the checkpoint's tensors (the loader reads its load
destinations from there). ``convert_single_tensor_to_hf`` is the per-tensor form that streaming
saves use.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import torch

from nemo_automodel.components.checkpoint.state_dict_adapter import StateDictAdapter
from nemo_automodel.components.models.common import BackendConfig
from nemo_automodel.components.moe.config import MoEConfig
from nemo_automodel.components.moe.state_dict_mixin import MoESplitExpertsStateDictMixin

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

EMBEDDINGS = "model.embed_tokens.weight"
LM_HEAD = "lm_head.weight"


class Qwen3MoeStateDictAdapter(MoESplitExpertsStateDictMixin, StateDictAdapter):
    """Groups the per-expert tensors; handles the tied ``lm_head`` and ``exclude_key_regex``."""

    def __init__(
        self,
        config: Any,
        moe_config: MoEConfig,
        backend: BackendConfig,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.config = config
        self.moe_config = moe_config
        self.backend = backend
        self.dtype = dtype  # of the grouped expert tensors from_hf builds
        self._uses_model_prefix = True
        # this checkpoint: tie_word_embeddings=False in the checkpoint
        self.tied = bool(getattr(config, "tie_word_embeddings", False))

    def from_hf(
        self,
        hf_state_dict: dict[str, Any],
        device_mesh: DeviceMesh | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        native = dict(hf_state_dict)
        for key in native:  # the checkpoint's names may or may not start with "model."
            if f".{self._expert_path_segment}." in key:
                self._uses_model_prefix = key.startswith("model.")
                break
        native = self._from_hf_w_merged_experts(native, device_mesh)
        if self.tied and LM_HEAD not in native and EMBEDDINGS in native:
            native[LM_HEAD] = native[EMBEDDINGS]
        return native

    def to_hf(
        self,
        state_dict: dict[str, Any],
        exclude_key_regex: str | None = None,
        quantization: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        hf_state_dict: dict[str, Any] = {}
        for fqn, tensor in state_dict.items():
            for name, value in self.convert_single_tensor_to_hf(
                fqn, tensor, exclude_key_regex=exclude_key_regex, **kwargs
            ):
                hf_state_dict[name] = value
        return hf_state_dict

    def convert_single_tensor_to_hf(
        self, fqn: str, tensor: Any, exclude_key_regex: str | None = None, **kwargs: Any
    ) -> list[tuple[str, Any]]:
        if self.tied and fqn == LM_HEAD:
            return []
        experts = self._convert_single_merged_expert_to_hf_split_experts(fqn, tensor, **kwargs)
        converted = experts if experts is not None else [(fqn, tensor)]
        if exclude_key_regex:
            converted = [(n, v) for n, v in converted if not re.match(exclude_key_regex, n)]
        return converted
