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

"""Checkpoint boundaries of LlavaForConditionalGeneration and LlavaTextForCausalLM: HF on-disk tensors <-> native.

``LlavaStateDictAdapter`` serves ``LlavaForConditionalGeneration``: each checkpoint tensor
belongs to one part by its prefix (the text model, its head, the vision tower, the projector),
and the adapter moves it under that part's native prefix and back; a tensor under no known
prefix is an error, never dropped. ``LlavaTextStateDictAdapter`` serves the text model alone.

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


class LlavaTextStateDictAdapter(StateDictAdapter):
    """Identity on names and layouts; handles the tied ``lm_head`` and ``exclude_key_regex``."""

    def __init__(self, config: Any) -> None:
        # this checkpoint: tie_word_embeddings=False in the checkpoint
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


# (checkpoint prefix, native prefix) of each part: the text model, its head, the tower, the projector
ROUTES = (
    ("language_model.model.", "model.language_model."),
    ("language_model.lm_head.", "lm_head."),
    ("vision_tower.", "model.vision_tower."),
    ("multi_modal_projector.", "model.multi_modal_projector."),
)
# (published prefix, checkpoint prefix): names of checkpoints published before transformers 5, also
# read by from_hf
ALIASES = (("vision_tower.vision_model.", "vision_tower."),)
VLM_EMBEDDINGS = "model.language_model.embed_tokens.weight"


class LlavaStateDictAdapter(StateDictAdapter):
    """Routes each tensor to its part by prefix; handles the tied ``lm_head`` and ``exclude_key_regex``."""

    def __init__(self, config: Any) -> None:
        self.tied = bool(getattr(config, "tie_word_embeddings", False))

    def from_hf(
        self,
        hf_state_dict: dict[str, Any],
        device_mesh: DeviceMesh | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        native = {_routed(_aliased(key), ROUTES): value for key, value in hf_state_dict.items()}
        if self.tied and LM_HEAD not in native and VLM_EMBEDDINGS in native:
            native[LM_HEAD] = native[VLM_EMBEDDINGS]
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
        name = _routed(fqn, tuple((native, disk) for disk, native in ROUTES))
        if exclude_key_regex and re.match(exclude_key_regex, name):
            return []
        return [(name, tensor)]


def _routed(name: str, routes: tuple[tuple[str, str], ...]) -> str:
    """``name`` under the new prefix of the route whose old prefix it has; none is an error."""
    for old, new in routes:
        if name.startswith(old):
            return new + name.removeprefix(old)
    raise KeyError(f"{name!r} is under none of the prefixes {[old for old, _ in routes]}")


def _aliased(name: str) -> str:
    """A published checkpoint's name as transformers 5 saves it."""
    for published, saved in ALIASES:
        if name.startswith(published):
            return saved + name.removeprefix(published)
    return name
