"""The HF transformers reference: a tiny model with every parameter perturbed, run eagerly.

The checkpoint the candidate loads is what ``save_pretrained`` writes, i.e. the on-disk layout.
A hybrid's cache is read per layer and converted to mobius' state names and layout (``_HFCache``),
so that any candidate can be compared against one convention.
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from onboard.checkpoint import tensors
from onboard.errors import UnsupportedFeatureError
from onboard.parity.harness import KV_NAMES, Batch, LayerStates, Step, split_cache
from onboard.parity.torch_probes import TorchProbes
from onboard.tiny_model import build_tiny_model, perturb


def build_reference(hf_config: Any, *, seed: int = 0, device: str = "cpu") -> Any:
    """The tiny HF model, every parameter perturbed: a causal LM, or a VLM when the config has a
    vision side."""
    vlm = getattr(hf_config, "vision_config", None) is not None
    auto_class = "AutoModelForImageTextToText" if vlm else "AutoModelForCausalLM"
    model = build_tiny_model(hf_config, seed=seed, auto_class=auto_class)
    return perturb(model, seed=seed + 1).to(device)


def saved_checkpoint(model: Any) -> dict[str, Any]:
    """The tensors ``save_pretrained`` writes (on-disk names and layout), loaded back on CPU."""
    return tensors(model)


# What HF's causal LMs call their cache, as argument and output
_CACHE_KWARGS = ("cache", "past_key_values", "cache_params")


@dataclass(frozen=True)
class _Seen:
    """What a model without a KV cache (OpenAI GPT) has seen: each decode step reruns it all."""

    input_ids: np.ndarray
    position_ids: np.ndarray


class HFRunner:
    """Runs the reference model; its ``Step.state`` is the transformers cache object, or the
    tokens seen so far when the model keeps no cache (its ``kv`` is then empty)."""

    provider = "transformers"
    left_padding_refused: str | None = None

    def __init__(self, model: Any, *, probe: bool = False) -> None:
        """``probe``: report each step's intermediate outputs (``Step.probes``) too."""
        self.model = model
        self._probes = TorchProbes(model) if probe else None
        self.device = next(model.parameters()).device
        params = inspect.signature(model.forward).parameters
        # transformers 5.24 says cache; Mamba's models say cache_params
        self._cache_kwarg = next((k for k in _CACHE_KWARGS if k in params), "past_key_values")
        # AutoModel's own training classes take no cache argument at all: nothing to compare
        self.takes_cache = any(k in params for k in _CACHE_KWARGS)
        self._cache = _HFCache.of(model.config)
        self._decode_mask_dropped: bool | None = None

    def prefill(self, batch: Batch) -> Step:
        return self._run(batch, None)

    def decode(self, previous: Step, batch: Batch) -> Step:
        if not isinstance(previous.state, _Seen):
            return self._run(batch, previous.state)
        seen = previous.state
        ids = np.concatenate([seen.input_ids, batch.input_ids], axis=1)
        positions = np.concatenate([seen.position_ids, batch.position_ids], axis=1)
        step = self._run(Batch(ids, batch.attention_mask, positions), None)
        new = batch.input_ids.shape[1]
        probes = {name: value[:, -new:] for name, value in step.probes.items()}
        return Step(logits=step.logits[:, -new:], kv=(), state=step.state, probes=probes)

    def _forward(self, kwargs: dict[str, Any]) -> Any:
        """HF's forward with a cache: a failure there is the reference's own, not onboard's
        (Qwen3-Next with no attention layer cannot report its cache's length)."""
        try:
            return self.model(**kwargs)
        except Exception as exc:
            name = type(self.model).__name__
            raise UnsupportedFeatureError(
                f"the reference {name} does not run with a cache at the tiny sizes onboard uses "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})"
            ) from None

    def _run(self, batch: Batch, cache: Any) -> Step:
        import torch

        kwargs = {
            "input_ids": torch.from_numpy(batch.input_ids).to(self.device),
            "attention_mask": torch.from_numpy(batch.attention_mask).to(self.device),
            "position_ids": torch.from_numpy(batch.position_ids).to(self.device),
            "use_cache": True,
        }
        if cache is not None:
            kwargs[self._cache_kwarg] = cache
            if self._drops_decode_mask(kwargs):
                del kwargs["attention_mask"]
        probing = self._probes.recording() if self._probes is not None else nullcontext({})
        with torch.no_grad(), probing as probes:
            out = self._forward(kwargs)
        new_cache = next((out[k] for k in _CACHE_KWARGS if out.get(k) is not None), None)
        if new_cache is None:
            return Step(
                logits=out.logits.float().cpu().numpy(),
                kv=(),
                state=_Seen(batch.input_ids, batch.position_ids),
                probes=probes,
            )
        kv, states = split_cache(tuple(self._cache.layer(layer) for layer in new_cache.layers))
        return Step(
            logits=out.logits.float().cpu().numpy(),
            kv=kv,
            state=new_cache,
            states=states,
            probes=probes,
        )

    def _drops_decode_mask(self, kwargs: dict[str, Any]) -> bool:
        """Whether HF's generate leaves the mask out of decode steps, as it does for Mamba,
        whose mixer would broadcast the one new position against the whole mask: the reference
        decodes as generate does (asked once, of the model's prepare_inputs_for_generation)."""
        if self._decode_mask_dropped is None:
            try:
                prepared = self.model.prepare_inputs_for_generation(
                    **kwargs, is_first_iteration=False
                )
                self._decode_mask_dropped = prepared.get("attention_mask") is None
            except Exception:  # a model that cannot say keeps the mask
                self._decode_mask_dropped = False
        return self._decode_mask_dropped


def cache_states(config: Any, cache: Any) -> tuple[LayerStates, ...]:
    """A hybrid's recurrent states per layer in mobius' layout, read from a transformers 5
    cache (``_HFCache``); () for a cache of keys and values only."""
    layers = getattr(cache, "layers", None)
    if not layers:
        return ()
    read = _HFCache.of(config)
    states = split_cache(tuple(read.layer(layer) for layer in layers))[1]
    return states if any(set(layer) - set(KV_NAMES) for layer in states) else ()


# Config fields that only Mamba-style (SSM) mixers have; DeltaNet-style ones have linear_* sizes.
_SSM_FIELDS = ("mamba_d_state", "ssm_state_size", "state_size")


@dataclass(frozen=True)
class _HFCache:
    """Reads one layer of a transformers 5 cache in mobius' names and layout.

    Attention layers hold ``keys``/``values`` (DeepSeek Sparse Attention's also its lightning
    indexer's keys, ``indexer_keys``); linear-attention layers (Mamba, DeltaNet, LFM2's
    short convolution) hold ``conv_states[0]``/``recurrent_states[0]``; MLP and MoE layers hold
    nothing. HF keeps the last ``d_conv`` conv inputs where mobius keeps ``d_conv - 1``, and HF's
    Mamba2 SSM state is ``[B, heads, d_head, d_state]`` where mobius' is ``[B, heads, d_state,
    d_head]``. DeltaNet's ``[B, heads, d_k, d_v]`` is the same on both sides. All three measured
    against mobius' Bamba and Qwen3-Next with square states, where only the values tell.
    """

    recurrent_name: str  # ssm_state (Mamba) or recurrent_state (DeltaNet, lightning)

    @classmethod
    def of(cls, config: Any) -> _HFCache:
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        ssm = any(getattr(text, field, None) is not None for field in _SSM_FIELDS)
        return cls("ssm_state" if ssm else "recurrent_state")

    def layer(self, layer: Any) -> LayerStates:
        states: dict[str, np.ndarray] = {}
        if getattr(layer, "keys", None) is not None:
            states["key"], states["value"] = _numpy(layer.keys), _numpy(layer.values)
        conv = getattr(layer, "conv_states", {}).get(0)
        if conv is not None:
            kernel = layer.conv_kernel_size.get(0) or conv.shape[-1]
            states["conv_state"] = _numpy(conv[..., conv.shape[-1] - (kernel - 1) :])
        indexer = getattr(layer, "indexer_keys", None)  # DeepSeek Sparse Attention's
        if indexer is not None and indexer.numel():
            states["indexer_key"] = _numpy(indexer)  # [B, T, index_head_dim], as mobius'
        recurrent = getattr(layer, "recurrent_states", {}).get(0)
        if recurrent is not None:
            if self.recurrent_name == "ssm_state" and recurrent.dim() == 4:
                recurrent = recurrent.transpose(-1, -2)
            states[self.recurrent_name] = _numpy(recurrent)
        return states


def _numpy(tensor: Any) -> np.ndarray:
    """A copy: transformers updates conv and recurrent states in place on the next step."""
    return tensor.detach().float().cpu().numpy().copy()
