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

"""Qwen3NextForCausalLM against HF's ``Qwen3NextForCausalLM``.

The tiny config has every layer kind. CPU by default; ``AUTOMODEL_TEST_DEVICE=cuda`` runs the
same tests on a GPU. Models are built directly (``NeMoAutoModelForCausalLM`` needs CUDA), in
float32, with every HF parameter perturbed so a wrong norm offset or an unmapped bias shows.
The checkpoint is what ``save_pretrained`` writes.
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
from transformers import Qwen3NextConfig
from transformers.core_model_loading import revert_weight_conversion
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextForCausalLM as HFQwen3NextForCausalLM
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextSparseMoeBlock as HFQwen3NextSparseMoeBlock

from nemo_automodel.components.models.common import BackendConfig
from nemo_automodel.components.models.common.tie_word_embeddings import TieSupport
from nemo_automodel.components.models.qwen3_next.model import (
    ModelClass,
    Qwen3NextForCausalLM,
    build_moe_config,
    layer_types,
)
from nemo_automodel.components.models.qwen3_next.state_dict_adapter import Qwen3NextStateDictAdapter
from nemo_automodel.components.moe.fsdp_mixin import MoEFSDPSyncMixin
from nemo_automodel.components.moe.layers import MoE

ARCH = "Qwen3NextForCausalLM"
MODULE = "nemo_automodel.components.models.qwen3_next.model"
DEVICE_ENV = "AUTOMODEL_TEST_DEVICE"
# onboard's tiny qwen3_next config: 1 x full_attention, 1 x linear_attention.
TINY = {
    "attention_dropout": 0.0,
    "bos_token_id": 255,
    "decoder_sparse_step": 1,
    "eos_token_id": 254,
    "full_attention_interval": 4,
    "head_dim": 16,
    "hidden_act": "silu",
    "hidden_size": 96,
    "initializer_range": 0.02,
    "intermediate_size": 128,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_value_head_dim": 24,
    "max_position_embeddings": 128,
    "mlp_only_layers": [],
    "moe_intermediate_size": 32,
    "norm_topk_prob": False,
    "num_attention_heads": 6,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "output_router_logits": False,
    "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 32,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 256,
    "attention_bias": True,
    "layer_types": ["full_attention", "linear_attention"],
}
NORMS = [
    "input_layernorm",
    "post_attention_layernorm",
    "self_attn.q_norm",
    "self_attn.k_norm",
]  # norm attributes of every decoder layer
LAYERS = list(range(TINY["num_hidden_layers"]))
FAR = 3000  # positions far enough that every RoPE frequency turns
TOLERANCE = {"cpu": 1e-6, "cuda": 1e-4}
ROUTING_MARGIN = 1e-4  # router logits closer than this may pick different experts in the two
DENSE_OVERRIDE = {"mlp_only_layers": [0]}  # makes layer 0 dense
# the tiny config's load-balancing coefficient, or one that shows where the config has 0
COEFFICIENT = TINY.get("router_aux_loss_coef") or 0.01


@pytest.fixture(scope="module")
def device() -> torch.device:
    name = os.environ.get(DEVICE_ENV, "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"{DEVICE_ENV}={name} but CUDA is not available")
    torch.set_float32_matmul_precision("highest")  # TF32 would round RoPE angles differently
    return torch.device(name)


def atol(device: torch.device) -> float:
    return TOLERANCE[device.type]


def make_config(attn: str = "eager", **overrides: object) -> Qwen3NextConfig:
    config = Qwen3NextConfig(**{**TINY, **overrides})
    config.architectures = [ARCH]
    config._attn_implementation = attn
    config.dtype = torch.float32  # never the library default (bf16 for some models)
    return config


TINY_KINDS = layer_types(make_config())
ATTENTION_KINDS = ("full_attention", "sliding_attention")
ATTENTION_LAYERS = [i for i, kind in enumerate(TINY_KINDS) if kind in ATTENTION_KINDS]
# layer index -> the attribute of HF's recurrent mixer the generated layer keeps
MIXERS = {"linear_attention": "linear_attn"}
MIXER_LAYERS = [i for i, kind in enumerate(TINY_KINDS) if kind in MIXERS]
CHUNK = 64  # HF's chunked prefill scans this many tokens at once; prompts cross it


def sparse_layers() -> list[int]:
    """The layers HF's decoder builds its MoE block for, on the tiny config."""
    with torch.device("meta"):
        hf = HFQwen3NextForCausalLM(make_config())
    return [i for i, layer in enumerate(hf.model.layers) if isinstance(layer.mlp, HFQwen3NextSparseMoeBlock)]


SPARSE_LAYERS = sparse_layers()


def backend() -> BackendConfig:
    return BackendConfig(
        attn="sdpa",
        linear="torch",
        rms_norm="torch_fp32",
        rope_fusion=False,
        experts="torch",
        dispatcher="torch",
    )


def adapter_for(config: Qwen3NextConfig) -> Qwen3NextStateDictAdapter:
    moe_config = build_moe_config(config, torch.float32)
    return Qwen3NextStateDictAdapter(config, moe_config, backend(), dtype=torch.float32)


def hf_reference(config: Qwen3NextConfig, device: torch.device) -> HFQwen3NextForCausalLM:
    torch.manual_seed(1234)
    model = HFQwen3NextForCausalLM(copy.deepcopy(config)).float()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # HF initialises norms to 1 (or 0) and biases to 0: perturb them all
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


def generated(config: Qwen3NextConfig, device: torch.device) -> Qwen3NextForCausalLM:
    return Qwen3NextForCausalLM(copy.deepcopy(config), backend=backend()).to(device)


def load(model: Qwen3NextForCausalLM, checkpoint: dict[str, torch.Tensor]) -> Qwen3NextForCausalLM:
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


def token_ids(device: torch.device, batch: int = 2, length: int = 16, seed: int = 42):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, TINY["vocab_size"], (batch, length), generator=generator)
    return ids.to(device)


def routing_margin(hf, ids: torch.Tensor, noise_seed: int | None = None, **inputs) -> float:
    """The smallest gap between HF's k-th and (k+1)-th router logit, over tokens and layers
    (in training, with the jitter drawn after ``noise_seed``, when given)."""
    gaps = []

    def record(module, inputs, outputs) -> None:
        experts = next(t for t in outputs if not t.is_floating_point())
        logits = next(t for t in outputs if t.is_floating_point() and t.shape != experts.shape)
        top = logits.float().topk(experts.shape[-1] + 1, dim=-1).values
        gaps.append((top[:, -2] - top[:, -1]).min().item())

    hooks = [
        layer.mlp.gate.register_forward_hook(record)
        for layer in hf.model.layers
        if isinstance(layer.mlp, HFQwen3NextSparseMoeBlock)
    ]
    try:
        with torch.no_grad():
            if noise_seed is not None:
                hf.train()
                torch.manual_seed(noise_seed)
            hf(input_ids=ids, **inputs)
    finally:
        hf.eval()
        for hook in hooks:
            hook.remove()
    return min(gaps, default=float("inf"))


def routed_token_ids(hf, device: torch.device, noise_seed: int | None = None, **inputs) -> torch.Tensor:
    """A batch where HF routes every token with a clear winner (also with the jitter drawn
    after ``noise_seed``, when given).

    Two router logits within float rounding of each other pick either expert, depending on
    summation order; the whole-model comparisons draw a batch without such near-ties.
    """
    for seed in range(42, 142):
        ids = token_ids(device, seed=seed)
        margin = routing_margin(hf, ids, **inputs)
        if noise_seed is not None:
            margin = min(margin, routing_margin(hf, ids, noise_seed, **inputs))
        if margin >= ROUTING_MARGIN:
            return ids
    raise AssertionError(f"no batch routes every token with a margin of {ROUTING_MARGIN}")


def hidden(device: torch.device, length: int = 9) -> torch.Tensor:
    generator = torch.Generator().manual_seed(7)
    return torch.randn(2, length, TINY["hidden_size"], generator=generator).to(device)


def positions(device: torch.device, length: int = 9) -> torch.Tensor:
    return (torch.arange(length) + FAR).unsqueeze(0).expand(2, -1).to(device)


def additive_mask(kind: str, length: int, device: torch.device) -> torch.Tensor:
    """A causal mask (banded for sliding layers) as eager attention adds it."""
    query = torch.arange(length).unsqueeze(1)
    key = torch.arange(length).unsqueeze(0)
    allowed = key <= query
    if kind == "sliding_attention":
        allowed &= query - key < TINY["sliding_window"]
    mask = torch.zeros(length, length).masked_fill(~allowed, torch.finfo(torch.float32).min)
    return mask[None, None].expand(2, 1, -1, -1).to(device)


def rope_pair(hf, model, kind: str, x: torch.Tensor, position_ids: torch.Tensor):
    """(HF's cos/sin, the generated model's cos/sin) for layers of ``kind``."""
    theirs = hf.model.rotary_emb(x, position_ids)
    ours = model.model.rotary_emb(x, position_ids)
    return theirs, ours


def assert_same(ours: torch.Tensor, theirs: torch.Tensor, tolerance: float) -> None:
    diff = (ours.double() - theirs.double()).abs().max().item()
    assert ours.shape == theirs.shape and diff <= tolerance, f"max abs diff {diff:.3g}"


# -- smoke ------------------------------------------------------------------------------------


def test_forward_shapes(device: torch.device) -> None:
    torch.manual_seed(0)
    model = generated(make_config(), device)
    ids = token_ids(device, length=9)
    out = model(input_ids=ids, labels=ids)
    assert out.logits.shape == (2, 9, TINY["vocab_size"])
    assert out.logits.dtype == torch.float32
    assert torch.isfinite(out.loss)
    cached = model(input_ids=ids, use_cache=True)
    assert cached.past_key_values.get_seq_length() == 9


def test_class_contract() -> None:
    cls = Qwen3NextForCausalLM
    assert ModelClass is cls
    assert isinstance(cls.tie_word_embeddings_support, TieSupport)
    assert "tie_weights" in cls.__dict__
    assert ("ModelCapabilities" in cls.__dict__) != ("get_capabilities" in cls.__dict__)
    chosen = backend()
    model = cls(make_config(), backend=chosen)
    assert model.backend is chosen  # a misspelt keyword would have been dropped silently
    assert issubclass(cls, MoEFSDPSyncMixin)  # AutoModel's MoE parallelizer handles it


def test_moe_overrides_reach_every_sparse_layer() -> None:
    model = Qwen3NextForCausalLM(make_config(), backend=backend(), moe_overrides={"aux_loss_coeff": 0.01})
    assert model.model.moe_config.aux_loss_coeff == 0.01
    gates = [model.model.layers[i].mlp.gate for i in SPARSE_LAYERS]
    assert gates and all(gate.aux_loss_coeff == 0.01 for gate in gates)
    with pytest.raises(ValueError):
        Qwen3NextForCausalLM(
            make_config(),
            moe_config=model.model.moe_config,
            moe_overrides={"aux_loss_coeff": 0.0},
        )


def test_registry_resolves_to_generated_class() -> None:
    from nemo_automodel._transformers.registry import ModelRegistry

    importlib.import_module(MODULE)  # an import error would make the registry fall back to HF
    assert ModelRegistry.has_custom_model(ARCH)
    assert ModelRegistry.get_model_cls_from_model_arch(ARCH) is Qwen3NextForCausalLM


# -- state-dict adapter -----------------------------------------------------------------------


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


def test_adapter_round_trip_is_exact(tmp_path: Path, device: torch.device) -> None:
    checkpoint = saved_checkpoint(hf_reference(make_config(), device), tmp_path)
    adapter = adapter_for(make_config())
    assert_same_tensors(adapter.to_hf(adapter.from_hf(dict(checkpoint))), checkpoint)


def test_adapter_export_matches_checkpoint(pair) -> None:
    _, model, checkpoint = pair
    exported = model.state_dict_adapter.to_hf(model.state_dict())
    assert_same_tensors(exported, checkpoint)


def test_convert_single_tensor_matches_to_hf(pair) -> None:
    _, model, _ = pair
    adapter = model.state_dict_adapter
    state = model.state_dict()
    single = {}
    for fqn, tensor in state.items():
        single.update(adapter.convert_single_tensor_to_hf(fqn, tensor))
    assert_same_tensors(single, {k: v.cpu() for k, v in adapter.to_hf(state).items()})


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_tie_word_embeddings(tmp_path: Path, device: torch.device, tied: bool) -> None:
    config = make_config(tie_word_embeddings=tied)
    checkpoint = saved_checkpoint(hf_reference(config, device), tmp_path)
    assert ("lm_head.weight" in checkpoint) is not tied
    model = load(generated(config, device), checkpoint)
    embeddings = model.get_input_embeddings().weight
    assert (model.lm_head.weight is embeddings) is tied
    assert_same_tensors(model.state_dict_adapter.to_hf(model.state_dict()), checkpoint)


# -- layers against HF ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(set(TINY_KINDS) & set(ATTENTION_KINDS)))
def test_rotary_embedding_matches_hf(pair, device: torch.device, kind: str) -> None:
    hf, model, _ = pair
    x = hidden(device)
    theirs, ours = rope_pair(hf, model, kind, x, positions(device))
    assert_same(ours[0], theirs[0], atol(device))
    assert_same(ours[1], theirs[1], atol(device))


@pytest.mark.parametrize("layer", ATTENTION_LAYERS)
def test_attention_matches_hf(pair, device: torch.device, layer: int) -> None:
    hf, model, _ = pair
    kind = TINY_KINDS[layer]
    x, position_ids = hidden(device), positions(device)
    hf_cos_sin, cos_sin = rope_pair(hf, model, kind, x, position_ids)
    mask = additive_mask(kind, x.shape[1], device)
    with torch.no_grad():
        theirs = hf.model.layers[layer].self_attn(x, position_embeddings=hf_cos_sin, attention_mask=mask)[0]
        ours = model.model.layers[layer].self_attn(x, position_embeddings=cos_sin, attention_mask=mask)[0]
    assert_same(ours, theirs, atol(device))


@pytest.mark.parametrize("layer", LAYERS)
def test_mlp_matches_hf(pair, device: torch.device, layer: int) -> None:
    hf, model, _ = pair
    x = hidden(device)
    with torch.no_grad():
        ours = model.model.layers[layer].mlp(x)
        assert_same(ours, hf.model.layers[layer].mlp(x), atol(device))


@pytest.mark.parametrize("layer", LAYERS)
def test_sparse_layers_match_hf(pair, layer: int) -> None:
    hf, model, _ = pair
    ours = isinstance(model.model.layers[layer].mlp, MoE)
    assert ours == isinstance(hf.model.layers[layer].mlp, HFQwen3NextSparseMoeBlock)


@pytest.mark.parametrize("layer", SPARSE_LAYERS)
def test_router_matches_hf(pair, device: torch.device, layer: int) -> None:
    """Every token picks the same experts as in HF (fp32), with the same weights."""
    hf, model, _ = pair
    x = hidden(device).reshape(-1, TINY["hidden_size"])
    every_token = torch.ones(x.shape[0], dtype=torch.bool, device=device)
    with torch.no_grad():
        outputs = hf.model.layers[layer].mlp.gate(x)
        weights, experts, _ = model.model.layers[layer].mlp.gate(x, every_token, None)
    hf_experts = next(t for t in outputs if not t.is_floating_point())
    hf_weights = next(t for t in outputs if t.is_floating_point() and t.shape == hf_experts.shape)
    hf_experts, hf_order = hf_experts.sort(dim=-1)
    experts, order = experts.sort(dim=-1)
    assert torch.equal(experts, hf_experts)
    assert_same(weights.gather(-1, order), hf_weights.gather(-1, hf_order), atol(device))


def has_submodule(module: torch.nn.Module, name: str) -> bool:
    try:
        module.get_submodule(name)
    except AttributeError:
        return False
    return True


@pytest.mark.parametrize("layer", LAYERS)
def test_norms_match_hf(pair, device: torch.device, layer: int) -> None:
    hf, model, _ = pair
    x = hidden(device)
    ours_layer, hf_layer = model.model.layers[layer], hf.model.layers[layer]
    names = [name for name in NORMS if has_submodule(hf_layer, name)]  # mixer layers: fewer
    assert names == [name for name in NORMS if has_submodule(ours_layer, name)]
    with torch.no_grad():
        for name in names:
            ours, theirs = ours_layer.get_submodule(name), hf_layer.get_submodule(name)
            width = ours.weight.shape[-1]
            y = x[..., :width]
            assert_same(ours(y), theirs(y), atol(device))
        final_norm = model.model.norm(x)
        assert_same(final_norm, hf.model.norm(x), atol(device))


@pytest.mark.parametrize("layer", LAYERS)
def test_decoder_layer_matches_hf(pair, device: torch.device, layer: int) -> None:
    hf, model, _ = pair
    kind = TINY_KINDS[layer]
    x, position_ids = hidden(device), positions(device)
    hf_cos_sin, cos_sin = rope_pair(hf, model, kind, x, position_ids)
    # recurrent layers take the 2-D padding mask, None when nothing is padded
    mask = additive_mask(kind, x.shape[1], device) if kind in ATTENTION_KINDS else None
    with torch.no_grad():
        theirs = hf.model.layers[layer](
            x, attention_mask=mask, position_ids=position_ids, position_embeddings=hf_cos_sin
        )
        ours = model.model.layers[layer](x, attention_mask=mask, position_ids=position_ids, position_embeddings=cos_sin)
    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
    ours = ours[0] if isinstance(ours, tuple) else ours
    assert_same(ours, theirs, atol(device))


@pytest.mark.parametrize("layer", MIXER_LAYERS)
def test_mixer_matches_hf(pair, device: torch.device, layer: int) -> None:
    """The recurrent mixer over a prompt longer than HF's chunk, loaded from the checkpoint."""
    hf, model, _ = pair
    attribute = MIXERS[TINY_KINDS[layer]]
    x = hidden(device, length=CHUNK + 9)
    with torch.no_grad():
        theirs = getattr(hf.model.layers[layer], attribute)(x)
        ours = getattr(model.model.layers[layer], attribute)(x)
    assert_same(ours, theirs, atol(device))


def test_decode_steps_match_hf(pair, device: torch.device) -> None:
    """A prefill longer than the chunk, then three cached steps: the recurrent state carries."""
    hf, model, _ = pair
    ids = routed_token_ids(hf, device)
    prompt = ids.repeat(1, CHUNK // ids.shape[1] + 1)
    # fp32 rounding grows with a prompt five times the other tests' through every layer
    tolerance = 10 * atol(device)
    with torch.no_grad():
        theirs = hf(input_ids=prompt, use_cache=True)
        ours = model(input_ids=prompt, use_cache=True)
        assert_same(ours.logits, theirs.logits, tolerance)
        for step in range(3):
            token = ids[:, step : step + 1]
            # positions given, as generate gives them (Bamba's HF model decodes at 0 otherwise)
            position = torch.full_like(token, prompt.shape[1] + step)
            theirs = hf(
                input_ids=token,
                position_ids=position,
                past_key_values=theirs.past_key_values,
                use_cache=True,
            )
            ours = model(
                input_ids=token,
                position_ids=position,
                past_key_values=ours.past_key_values,
                use_cache=True,
            )
            assert_same(ours.logits, theirs.logits, tolerance)


# -- full model -------------------------------------------------------------------------------


def test_dense_layers_match_hf(tmp_path: Path, device: torch.device) -> None:
    """A config with a dense first layer: HF's MLP there, the same checkpoint, the same logits."""
    config = make_config(**DENSE_OVERRIDE)
    hf = hf_reference(config, device)
    checkpoint = saved_checkpoint(hf, tmp_path)
    model = load(generated(config, device), checkpoint)
    sparse = [isinstance(layer.mlp, MoE) for layer in model.model.layers]
    assert sparse == [isinstance(layer.mlp, HFQwen3NextSparseMoeBlock) for layer in hf.model.layers]
    assert not sparse[0] and any(sparse)
    assert_same_tensors(model.state_dict_adapter.to_hf(model.state_dict()), checkpoint)
    ids = routed_token_ids(hf, device)
    with torch.no_grad():
        assert_same(model(input_ids=ids).logits, hf(input_ids=ids).logits, atol(device))


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_logits_match_hf(tmp_path: Path, device: torch.device, attn: str) -> None:
    config = make_config(attn)
    hf = hf_reference(config, device)
    model = load(generated(config, device), saved_checkpoint(hf, tmp_path))
    ids = routed_token_ids(hf, device)
    # AutoModel's GroupedExperts sum the experts' outputs in another order than HF's experts:
    # through every layer, fp32 logits agree to about 1e-6, not bit for bit
    with torch.no_grad():
        assert_same(model(input_ids=ids).logits, hf(input_ids=ids).logits, 10 * atol(device))


def shifted_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    vocab = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), ids[:, 1:].reshape(-1))


def test_loss_and_gradients_match_hf(pair, device: torch.device) -> None:
    hf, model, _ = pair
    ids = routed_token_ids(hf, device)
    hf_loss = shifted_loss(hf(input_ids=ids).logits, ids)
    loss = shifted_loss(model(input_ids=ids).logits, ids)
    hf_loss.backward()
    loss.backward()
    assert_same(loss, hf_loss, atol(device))
    grads = model.state_dict_adapter.to_hf({n: p.grad for n, p in model.named_parameters()})
    # HF keeps the experts fused in memory: its own save-time conversion gives the checkpoint's
    # per-expert names and layout, which to_hf gives for the generated model.
    hf_grads = revert_weight_conversion(hf, {n: p.grad for n, p in hf.named_parameters()})
    assert sorted(grads) == sorted(hf_grads)
    for name, grad in hf_grads.items():
        assert_same(grads[name], grad, 20 * atol(device))


def test_training_loss_decreases(pair, device: torch.device) -> None:
    _, model, _ = pair
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = token_ids(device)
    losses = []
    for _ in range(10):
        optimizer.zero_grad()
        loss = shifted_loss(model(input_ids=ids).logits, ids)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0], losses


# -- training-time router behaviour -----------------------------------------------------------


def assert_same_gradients(model, hf, tolerance: float) -> None:
    """Every parameter's gradient, in the checkpoint's names (HF's fused experts converted)."""
    grads = model.state_dict_adapter.to_hf({n: p.grad for n, p in model.named_parameters()})
    hf_grads = revert_weight_conversion(hf, {n: p.grad for n, p in hf.named_parameters()})
    assert sorted(grads) == sorted(hf_grads)
    for name, grad in hf_grads.items():
        assert grads[name] is not None, name
        assert_same(grads[name], grad, tolerance)


def padded_pair(tmp_path: Path, device: torch.device):
    """HF and the generated model in training with output_router_logits and COEFFICIENT, and a
    routed batch whose first row ends in padding: (hf, model, ids, attention mask, labels)."""
    config = make_config(output_router_logits=True, router_aux_loss_coef=COEFFICIENT)
    hf = hf_reference(config, device)
    model = load(generated(config, device), saved_checkpoint(hf, tmp_path))
    mask = torch.ones(2, 16, dtype=torch.long, device=device)
    mask[0, -5:] = 0
    ids = routed_token_ids(hf, device, attention_mask=mask)
    assert ids.shape == mask.shape
    labels = ids.masked_fill(mask == 0, -100)
    return hf.train(), model.train(), ids, mask, labels


def test_load_balancing_loss_matches_hf(tmp_path: Path, device: torch.device) -> None:
    """HF's loss with output_router_logits: cross entropy + coefficient x its load-balancing
    loss over every sparse layer's router logits, the padding left out by the attention mask."""
    hf, model, ids, mask, labels = padded_pair(tmp_path, device)
    torch.manual_seed(0)
    theirs = hf(input_ids=ids, attention_mask=mask, labels=labels)
    torch.manual_seed(0)
    ours = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert len(ours.router_logits) == len(theirs.router_logits) == len(SPARSE_LAYERS)
    for mine, hfs in zip(ours.router_logits, theirs.router_logits, strict=True):
        assert_same(mine, hfs, atol(device))
    assert_same(ours.aux_loss, theirs.aux_loss, atol(device))
    assert_same(ours.loss, theirs.loss, atol(device))
    theirs.loss.backward()
    ours.loss.backward()
    assert_same_gradients(model, hf, 20 * atol(device))


@pytest.mark.parametrize("through", ["logits", "hidden_states"])
def test_logits_carry_the_load_balancing_gradient(tmp_path: Path, device: torch.device, through: str) -> None:
    """AutoModel's recipes pass no labels and compute the loss from the logits (or from the
    final hidden states and the head's weight): in training that cross entropy alone gets the
    gradients of HF's loss with the aux term."""
    hf, model, ids, mask, labels = padded_pair(tmp_path, device)
    torch.manual_seed(0)
    theirs = hf(input_ids=ids, attention_mask=mask, labels=labels)
    torch.manual_seed(0)
    ours = model(input_ids=ids, attention_mask=mask, output_hidden_states=through != "logits")
    assert ours.loss is None and ours.aux_loss is not None
    logits = ours.logits
    if through == "hidden_states":
        logits = F.linear(ours.hidden_states[-1], model.lm_head.weight)
    vocab = logits.shape[-1]
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), labels[:, 1:].reshape(-1))
    theirs.loss.backward()
    loss.backward()
    assert_same_gradients(model, hf, 20 * atol(device))


# -- dropout in train mode --------------------------------------------------------------------

# The dropout keys HF's modules read, each switched on with its own probability (a key read in
# place of another shows); where each drops in the generated model:
# config.attention_dropout: Qwen3NextAttention, the generated attention forward, on the attention
# weights
DROPOUTS = {
    "attention_dropout": 0.1,
}
DROPOUT_SEED = 11  # both models draw their dropout masks after this seed


def train_loss(model, ids: torch.Tensor, seed: int) -> torch.Tensor:
    """The model's loss in training, its dropout masks drawn after ``seed``."""
    torch.manual_seed(seed)
    return shifted_loss(model(input_ids=ids).logits, ids)


@pytest.mark.parametrize(
    "keys",
    [[key] for key in DROPOUTS] + ([list(DROPOUTS)] if len(DROPOUTS) > 1 else []),
    ids=lambda keys: "+".join(keys),
)
def test_dropout_matches_hf_in_training(tmp_path: Path, device: torch.device, keys: list[str]) -> None:
    """HF and the generated model in train mode with these dropouts on draw the same masks
    after one seed (the generated model keeps HF's modules or drops where HF does, in the same
    order), so loss and every gradient agree; with another seed the loss differs, so the
    config's dropout is active in the comparison.
    """
    config = make_config(**{key: DROPOUTS[key] for key in keys})
    hf = hf_reference(config, device)
    model = load(generated(config, device), saved_checkpoint(hf, tmp_path))
    ids = routed_token_ids(hf, device, DROPOUT_SEED)  # also with the masks drawn after the seed
    hf.train()
    model.train()
    hf_loss, loss = train_loss(hf, ids, DROPOUT_SEED), train_loss(model, ids, DROPOUT_SEED)
    assert_same(loss, hf_loss, atol(device))
    hf_loss.backward()
    loss.backward()
    assert_same_gradients(model, hf, 20 * atol(device))
    with torch.no_grad():  # other masks: the dropout is on, and the match above is not by chance
        other = train_loss(model, ids, DROPOUT_SEED + 1)
    assert (other - hf_loss).abs() > 100 * atol(device), "the dropout did not change the loss"
