"""The MoE and hybrid remote-code fixtures load with their own classes and compute what they claim.

`brook-tiny` (MoE) and `tern-tiny` (conv/attention hybrid) are loaded the way remote code
loads (`trust_remote_code=True`); their prefill logits must equal the plain-torch
re-computation of `tests/fixtures/remote/check_fixtures.py` (written from `config.json` and the
safetensors alone), and a one-feature ablation of that re-computation must not. The full set of
checks is that script; this is the fast subset that runs with the suite.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.remote.conftest import REMOTE

FILES = {"config.json", "model.safetensors", "FEATURES.md"}
# one ablation per fixture that a port missing the feature would show
ABLATION = {"brook": "no_shared_expert", "tern": "no_C_gate"}


def _check_script(monkeypatch: pytest.MonkeyPatch):
    """`check_fixtures.py` as a module (it is a plain script, not importable as a package)."""
    from transformers.utils.hub import HF_MODULES_CACHE

    # the script points HF_MODULES_CACHE at a temporary folder unless it is set: keep it as is
    monkeypatch.setenv("HF_MODULES_CACHE", str(HF_MODULES_CACHE))
    path = REMOTE / "check_fixtures.py"
    spec = importlib.util.spec_from_file_location("remote_check_fixtures", path)
    module = importlib.util.module_from_spec(spec)
    with torch.random.fork_rng():  # the script seeds the global RNG when it is imported
        spec.loader.exec_module(module)
    return module


def _load(name: str):
    from transformers import AutoModelForCausalLM

    folder = REMOTE / f"{name}-tiny"
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    return folder, model


def _ids(batch: int = 2, seq: int = 7) -> torch.Tensor:
    return torch.randint(3, 256, (batch, seq), generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize("name", ["brook", "tern"])
def test_the_folder_holds_exactly_the_five_files(name: str) -> None:
    folder = REMOTE / f"{name}-tiny"
    present = {p.name for p in folder.iterdir() if p.name != "__pycache__"}
    assert present == FILES | {f"configuration_{name}.py", f"modeling_{name}.py"}
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == name
    assert config["auto_map"]["AutoModelForCausalLM"] == (
        f"modeling_{name}.{name.capitalize()}ForCausalLM"
    )


@pytest.mark.parametrize("name", ["brook", "tern"])
def test_prefill_logits_equal_the_plain_torch_recomputation(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = _check_script(monkeypatch)
    folder, model = _load(name)
    assert type(model).__module__.startswith("transformers_modules.")
    cfg = json.loads((folder / "config.json").read_text())
    sd = load_file(folder / "model.safetensors")
    ids = _ids()
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    mask = torch.ones_like(ids)
    positions = torch.arange(ids.shape[1]).expand(ids.shape)
    reference = check.REFERENCES[name]
    expected, _ = reference(sd, cfg, ids, mask, positions)
    torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)
    # the comparison is sharp enough to fail: without one feature the logits are far off
    wrong, _ = reference(sd, cfg, ids, mask, positions, frozenset({ABLATION[name]}))
    assert (wrong - logits).abs().max().item() > 1e-2


def test_brook_routes_layer_0_dense_and_the_rest_to_experts() -> None:
    _, model = _load("brook")
    layers = model.model.layers
    assert not hasattr(layers[0].mlp, "experts")
    assert [len(layer.mlp.experts) for layer in layers[1:]] == [4, 4]
    with torch.no_grad():
        out = model(input_ids=_ids(), output_router_logits=True)
    assert len(out.router_logits) == 2 and out.aux_loss is not None
    assert model(input_ids=_ids()).aux_loss is None  # the load-balancing loss is optional


def test_tern_cached_decoding_equals_the_full_forward() -> None:
    from transformers.cache_utils import DynamicLayer, LinearAttentionLayer

    _, model = _load("tern")
    ids = _ids(seq=8)
    with torch.no_grad():
        full = model(input_ids=ids).logits
        step = model(input_ids=ids[:, :2], use_cache=True)
        kinds = [type(layer) for layer in step.past_key_values.layers]
        assert kinds == [LinearAttentionLayer, DynamicLayer] * 2
        for t in range(2, ids.shape[1]):
            step = model(input_ids=ids[:, t : t + 1], past_key_values=step.past_key_values)
            torch.testing.assert_close(step.logits[:, -1], full[:, t], atol=1e-4, rtol=1e-4)
    conv_state = step.past_key_values.layers[0].conv_states[0]
    assert conv_state.shape == (2, 64, 3)


def test_the_check_script_knows_both_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    check = _check_script(monkeypatch)
    assert {"brook", "tern"} <= set(check.REFERENCES) and {"brook", "tern"} <= set(check.ABLATIONS)
    assert Path(check.__file__).parent == REMOTE
