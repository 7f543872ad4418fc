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

"""LlavaForConditionalGeneration against HF's ``LlavaForConditionalGeneration``.

The text model has its own tests (test_llava_model.py). These cover what the VLM adds:
HF's vision tower and projector with the checkpoint's weights, the feature selection, the merge
on a batch of two rows with an image each, a prompt without images, and the adapter's routes
(every checkpoint tensor, the tower's and the projector's included). CPU by default;
``AUTOMODEL_TEST_DEVICE=cuda`` runs them on a GPU.
"""

from __future__ import annotations

import copy
import importlib
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import LlavaConfig
from transformers.models.llava.modeling_llava import LlavaForConditionalGeneration as HFLlavaForConditionalGeneration

from nemo_automodel.components.models.common import BackendConfig
from nemo_automodel.components.models.common.tie_word_embeddings import TieSupport
from nemo_automodel.components.models.llava.model import LlavaForConditionalGeneration, ModelClass
from nemo_automodel.components.models.llava.state_dict_adapter import LlavaStateDictAdapter

ARCH = "LlavaForConditionalGeneration"
MODULE = "nemo_automodel.components.models.llava.model"
DEVICE_ENV = "AUTOMODEL_TEST_DEVICE"

TINY = {
    "ignore_index": -100,
    "image_token_index": 255,
    "pad_token_id": 0,
    "projector_hidden_act": "gelu",
    "text_config": {
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-05,
        "vocab_size": 256,
        "tie_word_embeddings": False,
        "hidden_size": 96,
        "intermediate_size": 128,
        "num_attention_heads": 6,
        "num_key_value_heads": 6,
        "num_hidden_layers": 2,
        "model_type": "llama",
    },
    "tie_word_embeddings": False,
    "vision_config": {
        "hidden_size": 32,
        "image_size": 56,
        "intermediate_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 24,
        "patch_size": 14,
        "projection_dim": 768,
        "vocab_size": 32000,
        "model_type": "clip_vision_model",
    },
    "vision_feature_layer": -2,
    "vision_feature_select_strategy": "default",
    "vocab_size": 256,
}
TOLERANCE = {"cpu": 1e-6, "cuda": 1e-4}
TEXT_BEFORE = (3, 6)  # text tokens before each row's image placeholders
ROW_TEXT = 8  # text tokens per row, and more in a row whose image has fewer placeholders


@pytest.fixture(scope="module")
def device() -> torch.device:
    name = os.environ.get(DEVICE_ENV, "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"{DEVICE_ENV}={name} but CUDA is not available")
    torch.set_float32_matmul_precision("highest")
    return torch.device(name)


def atol(device: torch.device) -> float:
    return TOLERANCE[device.type]


def make_config(attn: str = "eager", **overrides: object) -> LlavaConfig:
    config = LlavaConfig(**{**copy.deepcopy(TINY), **overrides})
    config.architectures = [ARCH]
    config._attn_implementation = attn
    config.dtype = torch.float32  # never the library default
    return config


def backend() -> BackendConfig:
    return BackendConfig(attn="sdpa", linear="torch", rms_norm="torch_fp32", rope_fusion=False)


def hf_reference(config: LlavaConfig, device: torch.device) -> HFLlavaForConditionalGeneration:
    torch.manual_seed(1234)
    model = HFLlavaForConditionalGeneration(copy.deepcopy(config)).float()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # HF initialises norms to 1 and biases to 0: perturb them all
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.05)
    return model.to(device).eval()


def saved_checkpoint(model: torch.nn.Module, folder: Path) -> dict[str, torch.Tensor]:
    """The tensors as ``save_pretrained`` writes them: the on-disk names and layout."""
    model.save_pretrained(folder)
    tensors: dict[str, torch.Tensor] = {}
    for path in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(path))
    return tensors


def generated(config: LlavaConfig, device: torch.device) -> LlavaForConditionalGeneration:
    return LlavaForConditionalGeneration(copy.deepcopy(config), backend=backend()).to(device)


def load(model: LlavaForConditionalGeneration, checkpoint: dict[str, torch.Tensor]) -> LlavaForConditionalGeneration:
    model.load_state_dict(model.state_dict_adapter.from_hf(dict(checkpoint)), strict=True)
    return model.eval()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, device: torch.device):
    """The HF reference and its checkpoint, built once (tests never change its weights)."""
    hf = hf_reference(make_config(), device)
    return hf, saved_checkpoint(hf, tmp_path_factory.mktemp("checkpoint"))


@pytest.fixture
def pair(reference, device: torch.device):
    """The HF reference, a fresh generated model with the same weights, and the checkpoint."""
    hf, checkpoint = reference
    hf.zero_grad(set_to_none=True)
    return hf, load(generated(make_config(), device), checkpoint), checkpoint


def images(device: torch.device) -> dict[str, torch.Tensor]:
    """The image inputs of two images, one per row: ``pixel_values``."""
    vision = make_config().vision_config
    generator = torch.Generator().manual_seed(3)
    shape = (len(TEXT_BEFORE), vision.num_channels, vision.image_size, vision.image_size)
    return {"pixel_values": torch.randn(shape, generator=generator).to(device)}


def hf_features_per_image(hf: HFLlavaForConditionalGeneration, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """HF's projected features of each image, ``[tokens, hidden]``."""
    per_image = hf.get_image_features(**inputs).pooler_output
    return [f.reshape(-1, f.shape[-1]) for f in per_image]


def hf_features(hf: HFLlavaForConditionalGeneration, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """HF's projected features, ``[image tokens, hidden]``, image after image."""
    return torch.cat(hf_features_per_image(hf, inputs))


def image_prompts(hf: HFLlavaForConditionalGeneration, device: torch.device) -> torch.Tensor:
    """Two rows, each with its image's placeholders at a different place in its own text."""
    config = hf.config
    with torch.no_grad():
        counts = [f.shape[0] for f in hf_features_per_image(hf, images(device))]
    generator = torch.Generator().manual_seed(4)
    rows = []
    for before, count in zip(TEXT_BEFORE, counts, strict=True):
        length = ROW_TEXT + max(counts) - count  # rows of equal length
        text = torch.randint(1, config.text_config.vocab_size, (length,), generator=generator)
        text[text == config.image_token_id] = 1
        image = torch.full((count,), config.image_token_id)
        rows.append(torch.cat([text[:before], image, text[before:]]))
    return torch.stack(rows).to(device)


def text_prompt(hf: HFLlavaForConditionalGeneration, device: torch.device) -> torch.Tensor:
    config = hf.config
    generator = torch.Generator().manual_seed(5)
    ids = torch.randint(1, config.text_config.vocab_size, (2, 9), generator=generator)
    ids[ids == config.image_token_id] = 1
    return ids.to(device)


def assert_same(got: torch.Tensor, want: torch.Tensor, tolerance: float) -> None:
    assert got.shape == want.shape
    difference = (got.double() - want.double()).abs().max().item()
    assert difference <= tolerance, f"max abs difference {difference:.3g} > {tolerance:g}"


def assert_same_tensors(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want), {
        "missing": sorted(set(want) - set(got)),
        "extra": sorted(set(got) - set(want)),
    }
    for name, tensor in want.items():
        value = got[name].detach().cpu()
        assert value.shape == tensor.shape, f"{name}: shape {value.shape} != {tensor.shape}"
        assert value.dtype == tensor.dtype, f"{name}: dtype {value.dtype} != {tensor.dtype}"
        assert torch.equal(value, tensor), f"{name}: values differ"


# -- class and registry -----------------------------------------------------------------------


def test_class_contract() -> None:
    cls = LlavaForConditionalGeneration
    assert ModelClass is cls
    assert isinstance(cls.tie_word_embeddings_support, TieSupport)
    assert "tie_weights" in cls.__dict__
    assert ("ModelCapabilities" in cls.__dict__) != ("get_capabilities" in cls.__dict__)
    chosen = backend()
    model = cls(make_config(), backend=chosen)
    assert model.backend is chosen  # a misspelt keyword would have been dropped silently


def test_registry_resolves_to_generated_class() -> None:
    from nemo_automodel._transformers.registry import ModelRegistry

    importlib.import_module(MODULE)  # an import error would make the registry fall back to HF
    assert ModelRegistry.has_custom_model(ARCH)
    assert ModelRegistry.get_model_cls_from_model_arch(ARCH) is LlavaForConditionalGeneration


# -- state-dict adapter -----------------------------------------------------------------------


def test_adapter_round_trip_is_exact(reference) -> None:
    _, checkpoint = reference
    adapter = LlavaStateDictAdapter(make_config())
    assert_same_tensors(adapter.to_hf(adapter.from_hf(dict(checkpoint))), checkpoint)


def test_adapter_export_matches_checkpoint(pair) -> None:
    _, model, checkpoint = pair
    assert_same_tensors(model.state_dict_adapter.to_hf(model.state_dict()), checkpoint)


def test_convert_single_tensor_matches_to_hf(pair) -> None:
    _, model, _ = pair
    adapter = model.state_dict_adapter
    state = model.state_dict()
    single = {}
    for fqn, tensor in state.items():
        single.update(adapter.convert_single_tensor_to_hf(fqn, tensor))
    assert_same_tensors(single, {k: v.cpu() for k, v in adapter.to_hf(state).items()})


def test_adapter_refuses_a_tensor_of_no_part(reference) -> None:
    _, checkpoint = reference
    adapter = LlavaStateDictAdapter(make_config())
    with pytest.raises(KeyError):
        adapter.from_hf({**checkpoint, "unknown_part.weight": torch.zeros(1)})


def test_adapter_reads_published_names(reference) -> None:
    """Checkpoints published before transformers 5 name the tower's tensors differently."""
    _, checkpoint = reference
    adapter = LlavaStateDictAdapter(make_config())
    published = {}
    for name, tensor in checkpoint.items():
        for old, saved in (("vision_tower.vision_model.", "vision_tower."),):
            if name.startswith(saved):
                name = old + name.removeprefix(saved)
        published[name] = tensor
    assert published != checkpoint
    assert_same_tensors(adapter.from_hf(published), adapter.from_hf(dict(checkpoint)))


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_tie_word_embeddings(tmp_path: Path, device: torch.device, tied: bool) -> None:
    config = make_config(tie_word_embeddings=tied)
    checkpoint = saved_checkpoint(hf_reference(config, device), tmp_path)
    model = load(generated(config, device), checkpoint)
    assert (model.lm_head.weight is model.get_input_embeddings().weight) is tied
    assert_same_tensors(model.state_dict_adapter.to_hf(model.state_dict()), checkpoint)


# -- the vision side against HF ---------------------------------------------------------------


def test_vision_tower_matches_hf(pair, device: torch.device) -> None:
    """Every hidden state of the tower (the selection may read any of them)."""
    hf, model, _ = pair
    inputs = images(device)
    with torch.no_grad():
        want = hf.model.vision_tower(**inputs, output_hidden_states=True).hidden_states
        got = model.model.vision_tower(**inputs, output_hidden_states=True).hidden_states
    assert len(got) == len(want)
    for state, expected in zip(got, want, strict=True):
        assert_same(state, expected, atol(device))


def test_image_features_match_hf(pair, device: torch.device) -> None:
    hf, model, _ = pair
    inputs = images(device)
    with torch.no_grad():
        assert_same(model.model.get_image_features(**inputs), hf_features(hf, inputs), atol(device))


def merged_embeddings(model: torch.nn.Module, language_model: torch.nn.Module, **inputs) -> torch.Tensor:
    """What ``language_model`` receives as ``inputs_embeds`` when ``model`` runs ``inputs``."""
    seen = {}

    def keep(_module, _args, kwargs) -> None:
        seen["embeddings"] = kwargs["inputs_embeds"]

    handle = language_model.register_forward_pre_hook(keep, with_kwargs=True)
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        handle.remove()
    return seen["embeddings"]


def test_merged_embeddings_match_hf(pair, device: torch.device) -> None:
    """Each row's placeholders hold its own image's features."""
    hf, model, _ = pair
    inputs = {"input_ids": image_prompts(hf, device), **images(device)}
    want = merged_embeddings(hf, hf.model.language_model, **inputs)
    got = merged_embeddings(model, model.model.language_model, **inputs)
    assert_same(got, want, atol(device))


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_logits_match_hf(tmp_path: Path, device: torch.device, attn: str) -> None:
    config = make_config(attn)
    hf = hf_reference(config, device)
    model = load(generated(config, device), saved_checkpoint(hf, tmp_path))
    inputs = {"input_ids": image_prompts(hf, device), **images(device)}
    with torch.no_grad():
        assert_same(model(**inputs).logits, hf(**inputs).logits, atol(device))


def test_text_only_logits_match_hf(pair, device: torch.device) -> None:
    hf, model, _ = pair
    ids = text_prompt(hf, device)
    with torch.no_grad():
        assert_same(model(input_ids=ids).logits, hf(input_ids=ids).logits, atol(device))


def test_decode_steps_match_hf(pair, device: torch.device) -> None:
    """Prefill with the images, then three text tokens through the KV cache."""
    hf, model, _ = pair
    ids = image_prompts(hf, device)
    with torch.no_grad():
        want = hf(input_ids=ids, **images(device), use_cache=True)
        got = model(input_ids=ids, **images(device), use_cache=True)
        for _ in range(3):
            token = want.logits[:, -1:].argmax(-1)
            want = hf(input_ids=token, past_key_values=want.past_key_values, use_cache=True)
            got = model(input_ids=token, past_key_values=got.past_key_values, use_cache=True)
            assert_same(got.logits, want.logits, atol(device))


def shifted_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    vocab = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), ids[:, 1:].reshape(-1))


def test_loss_and_gradients_match_hf(pair, device: torch.device) -> None:
    """Gradients reach the tower and the projector as they do in HF's model."""
    hf, model, _ = pair
    ids = image_prompts(hf, device)
    hf_loss = shifted_loss(hf(input_ids=ids, **images(device)).logits, ids)
    loss = shifted_loss(model(input_ids=ids, **images(device)).logits, ids)
    hf_loss.backward()
    loss.backward()
    assert_same(loss, hf_loss, atol(device))
    # the parts sit where HF's do: every parameter has HF's in-memory name
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    hf_grads = {name: p.grad for name, p in hf.named_parameters() if p.grad is not None}
    assert sorted(grads) == sorted(hf_grads)
    assert any(name.startswith("model.vision_tower.") for name in grads)
    for name, grad in hf_grads.items():
        assert_same(grads[name], grad, 20 * atol(device))
