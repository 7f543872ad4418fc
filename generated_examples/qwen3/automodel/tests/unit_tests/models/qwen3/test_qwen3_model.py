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

"""Qwen3ForCausalLM against HF's ``Qwen3ForCausalLM``.

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
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3ForCausalLM as HFQwen3ForCausalLM

from nemo_automodel.components.models.common import BackendConfig
from nemo_automodel.components.models.common.tie_word_embeddings import TieSupport
from nemo_automodel.components.models.qwen3.model import ModelClass, Qwen3ForCausalLM, layer_types
from nemo_automodel.components.models.qwen3.state_dict_adapter import Qwen3StateDictAdapter

ARCH = "Qwen3ForCausalLM"
MODULE = "nemo_automodel.components.models.qwen3.model"
DEVICE_ENV = "AUTOMODEL_TEST_DEVICE"
# onboard's tiny qwen3 config: 1 x full_attention, 1 x sliding_attention.
TINY = {
    "attention_bias": True,
    "attention_dropout": 0.0,
    "bos_token_id": 255,
    "eos_token_id": 254,
    "head_dim": 16,
    "hidden_act": "silu",
    "hidden_size": 96,
    "initializer_range": 0.02,
    "intermediate_size": 128,
    "max_position_embeddings": 128,
    "max_window_layers": 2,
    "num_attention_heads": 6,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": 4,
    "tie_word_embeddings": True,
    "use_sliding_window": True,
    "vocab_size": 256,
    "layer_types": ["full_attention", "sliding_attention"],
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


@pytest.fixture(scope="module")
def device() -> torch.device:
    name = os.environ.get(DEVICE_ENV, "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"{DEVICE_ENV}={name} but CUDA is not available")
    torch.set_float32_matmul_precision("highest")  # TF32 would round RoPE angles differently
    return torch.device(name)


def atol(device: torch.device) -> float:
    return TOLERANCE[device.type]


def make_config(attn: str = "eager", **overrides: object) -> Qwen3Config:
    config = Qwen3Config(**{**TINY, **overrides})
    config.architectures = [ARCH]
    config._attn_implementation = attn
    config.dtype = torch.float32  # never the library default (bf16 for some models)
    return config


TINY_KINDS = layer_types(make_config())


def backend() -> BackendConfig:
    return BackendConfig(attn="sdpa", linear="torch", rms_norm="torch_fp32", rope_fusion=False)


def hf_reference(config: Qwen3Config, device: torch.device) -> HFQwen3ForCausalLM:
    torch.manual_seed(1234)
    model = HFQwen3ForCausalLM(copy.deepcopy(config)).float()
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


def generated(config: Qwen3Config, device: torch.device) -> Qwen3ForCausalLM:
    return Qwen3ForCausalLM(copy.deepcopy(config), backend=backend()).to(device)


def load(model: Qwen3ForCausalLM, checkpoint: dict[str, torch.Tensor]) -> Qwen3ForCausalLM:
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
    cls = Qwen3ForCausalLM
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
    assert ModelRegistry.get_model_cls_from_model_arch(ARCH) is Qwen3ForCausalLM


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
    adapter = Qwen3StateDictAdapter(make_config())
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


@pytest.mark.parametrize("kind", sorted(set(TINY_KINDS)))
def test_rotary_embedding_matches_hf(pair, device: torch.device, kind: str) -> None:
    hf, model, _ = pair
    x = hidden(device)
    theirs, ours = rope_pair(hf, model, kind, x, positions(device))
    assert_same(ours[0], theirs[0], atol(device))
    assert_same(ours[1], theirs[1], atol(device))


@pytest.mark.parametrize("layer", LAYERS)
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
def test_norms_match_hf(pair, device: torch.device, layer: int) -> None:
    hf, model, _ = pair
    x = hidden(device)
    ours_layer, hf_layer = model.model.layers[layer], hf.model.layers[layer]
    with torch.no_grad():
        for name in NORMS:
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
    mask = additive_mask(kind, x.shape[1], device)
    with torch.no_grad():
        theirs = hf.model.layers[layer](
            x, attention_mask=mask, position_ids=position_ids, position_embeddings=hf_cos_sin
        )
        ours = model.model.layers[layer](x, attention_mask=mask, position_ids=position_ids, position_embeddings=cos_sin)
    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
    ours = ours[0] if isinstance(ours, tuple) else ours
    assert_same(ours, theirs, atol(device))


# -- full model -------------------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_logits_match_hf(tmp_path: Path, device: torch.device, attn: str) -> None:
    config = make_config(attn)
    hf = hf_reference(config, device)
    model = load(generated(config, device), saved_checkpoint(hf, tmp_path))
    ids = token_ids(device)
    with torch.no_grad():
        assert_same(model(input_ids=ids).logits, hf(input_ids=ids).logits, atol(device))


def shifted_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    vocab = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), ids[:, 1:].reshape(-1))


def test_loss_and_gradients_match_hf(pair, device: torch.device) -> None:
    hf, model, _ = pair
    ids = token_ids(device)
    hf_loss = shifted_loss(hf(input_ids=ids).logits, ids)
    loss = shifted_loss(model(input_ids=ids).logits, ids)
    hf_loss.backward()
    loss.backward()
    assert_same(loss, hf_loss, atol(device))
    # the module trees are HF's: every parameter has HF's in-memory name
    grads = {name: p.grad for name, p in model.named_parameters()}
    hf_grads = {name: p.grad for name, p in hf.named_parameters()}
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


# -- tensor parallelism -----------------------------------------------------------------------

TP_WORLD = 2


def tensor_parallel_rank(rank: int, checkpoint: dict[str, torch.Tensor], store: str) -> None:
    """One CPU rank: AutoModel's FSDP2 strategy shards the generated model over a
    tensor-parallel mesh (fp32, gloo) with the plan it selects for this class; the logits, the
    loss and every gradient must equal the unsharded model's."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from torch.distributed.tensor import DTensor, Shard

    from nemo_automodel.components.distributed.parallelizer import fsdp2_strategy_parallelize
    from nemo_automodel.components.distributed.tp_replicas import synchronize_tp_replica_gradients

    # a forked rank runs single-threaded: the parent's OpenMP threads do not survive the fork,
    # and a parallel region would wait on them for ever
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=TP_WORLD)
    try:
        cpu = torch.device("cpu")
        whole = load(generated(make_config(), cpu), checkpoint)
        mesh = init_device_mesh("cpu", (1, 1, TP_WORLD), mesh_dim_names=("dp_replicate", "dp_shard_cp", "tp"))
        fp32 = MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32, output_dtype=torch.float32)
        sharded = fsdp2_strategy_parallelize(load(generated(make_config(), cpu), checkpoint), mesh, mp_policy=fp32)
        split = [
            name
            for name, param in sharded.named_parameters()
            if isinstance(param, DTensor) and isinstance(param.placements[-1], Shard)
        ]
        assert split, "the plan sharded no parameter over the tensor-parallel ranks"
        ids = token_ids(cpu)
        logits = sharded(input_ids=ids).logits
        logits = logits.full_tensor() if isinstance(logits, DTensor) else logits
        expected = whole(input_ids=ids).logits
        # each rank sums its share of a row-wise projection's inputs and the ranks' partial sums
        # are added after: through every layer, fp32 logits agree to about 1e-6, not bit for bit
        assert_same(logits, expected, 10 * atol(cpu))
        shifted_loss(logits, ids).backward()
        shifted_loss(expected, ids).backward()
        # the recipes reduce the gradients of replicated parameters (the plan's
        # replicated_with_grad_allreduce ones summed) once, before the optimizer step
        synchronize_tp_replica_gradients([sharded], mesh)
        grads = {name: param.grad for name, param in sharded.named_parameters()}
        for name, param in whole.named_parameters():
            grad = grads[name]
            grad = grad.full_tensor() if isinstance(grad, DTensor) else grad
            diff = (grad - param.grad).abs().max().item()
            assert diff <= 20 * atol(cpu), f"{name}: max abs diff {diff:.3g}"
    finally:
        torch.distributed.destroy_process_group()


def test_tensor_parallel_matches_unsharded(reference, tmp_path: Path) -> None:
    """ModelCapabilities.supports_tp is declared because this passes: every rank's share of
    HF's plan gives the unsharded logits and gradients."""
    _, checkpoint = reference
    torch.multiprocessing.start_processes(
        tensor_parallel_rank,
        args=(checkpoint, str(tmp_path / "store")),
        nprocs=TP_WORLD,
        start_method="fork",
    )


# -- dropout in train mode --------------------------------------------------------------------

# The dropout keys HF's modules read, each switched on with its own probability (a key read in
# place of another shows); where each drops in the generated model:
# config.attention_dropout: Qwen3Attention, the generated attention forward, on the attention
# weights
DROPOUTS = {
    "attention_dropout": 0.1,
}
DROPOUT_SEED = 11  # both models draw their dropout masks after this seed


def assert_same_gradients(model, hf, tolerance: float) -> None:
    """Every parameter's gradient: the module trees are HF's, so are the names."""
    grads = {name: p.grad for name, p in model.named_parameters()}
    hf_grads = {name: p.grad for name, p in hf.named_parameters()}
    assert sorted(grads) == sorted(hf_grads)
    for name, grad in hf_grads.items():
        assert grads[name] is not None, name
        assert_same(grads[name], grad, tolerance)


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
    ids = token_ids(device)
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
