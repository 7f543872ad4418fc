"""The HF transformers reference: a tiny model with every parameter perturbed, run eagerly.

The checkpoint the candidate loads is what ``save_pretrained`` writes, i.e. the on-disk layout.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from onboard.checkpoint import tensors
from onboard.parity.harness import Batch, Step
from onboard.tiny_model import build_tiny_model, perturb


def build_reference(hf_config: Any, *, seed: int = 0, device: str = "cpu") -> Any:
    return perturb(build_tiny_model(hf_config, seed=seed), seed=seed + 1).to(device)


def saved_checkpoint(model: Any) -> dict[str, Any]:
    """The tensors ``save_pretrained`` writes (on-disk names and layout), loaded back on CPU."""
    return tensors(model)


@dataclass(frozen=True)
class _Seen:
    """What a model without a KV cache (OpenAI GPT) has seen: each decode step reruns it all."""

    input_ids: np.ndarray
    position_ids: np.ndarray


class HFRunner:
    """Runs the reference model; its ``Step.state`` is the transformers cache object, or the
    tokens seen so far when the model keeps no cache (its ``kv`` is then empty)."""

    provider = "transformers"
    supports_left_padding = True

    def __init__(self, model: Any) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"  # transformers 5.24

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
        return Step(logits=step.logits[:, -new:], kv=(), state=step.state)

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
        with torch.no_grad():
            out = self.model(**kwargs)
        new_cache = out.get("cache", out.get("past_key_values"))
        if new_cache is None:
            return Step(
                logits=out.logits.float().cpu().numpy(),
                kv=(),
                state=_Seen(batch.input_ids, batch.position_ids),
            )
        return Step(
            logits=out.logits.float().cpu().numpy(),
            kv=_cache_arrays(new_cache),
            state=new_cache,
        )


def _cache_arrays(cache: Any) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    layers = []
    for layer in cache.layers:
        layers.append((layer.keys.float().cpu().numpy(), layer.values.float().cpu().numpy()))
    return tuple(layers)
