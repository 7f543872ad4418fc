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

"""Checkpoint boundary of Qwen3ForCausalLM: HF on-disk tensors <-> the native state dict.

The native module tree is HF's, so names and layouts are equal; the adapter exists to make the
boundary explicit and complete. A tied checkpoint omits ``lm_head.weight``: ``from_hf`` aliases
it to the embeddings and ``to_hf`` drops it again, so ``to_hf(model.state_dict())`` names
exactly the checkpoint's tensors (the loader reads its load destinations from there).
``convert_single_tensor_to_hf`` is the per-tensor form that streaming saves use.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from nemo_automodel.components.checkpoint.state_dict_adapter import StateDictAdapter

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

EMBEDDINGS = "model.embed_tokens.weight"
LM_HEAD = "lm_head.weight"


class Qwen3StateDictAdapter(StateDictAdapter):
    """Identity on names and layouts; handles the tied ``lm_head`` and ``exclude_key_regex``."""

    def __init__(self, config: Any) -> None:
        # this checkpoint: tie_word_embeddings=True in the checkpoint; lm_head.weight is not saved
        self.tied = bool(getattr(config, "tie_word_embeddings", False))

    def from_hf(
        self,
        hf_state_dict: dict[str, Any],
        device_mesh: DeviceMesh | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        native = dict(hf_state_dict)
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
            for name, value in self.convert_single_tensor_to_hf(fqn, tensor, exclude_key_regex=exclude_key_regex):
                hf_state_dict[name] = value
        return hf_state_dict

    def convert_single_tensor_to_hf(
        self, fqn: str, tensor: Any, exclude_key_regex: str | None = None, **kwargs: Any
    ) -> list[tuple[str, Any]]:
        if self.tied and fqn == LM_HEAD:
            return []
        if exclude_key_regex and re.match(exclude_key_regex, fqn):
            return []
        return [(fqn, tensor)]
