"""Probes of a torch causal LM (the HF reference, AutoModel's classes): forward hooks.

Hooks read values and change nothing, so the model that was checked is the model probed. Each
probe keeps the first call of its module in a forward (a module called twice, as shared layers
are, reports its first use).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from onboard.parity.divergence import Capture, find_points


class TorchProbes:
    """Hooks on ``model``'s probe points, which keep values only inside ``recording()`` (two
    runners may probe one model)."""

    def __init__(self, model: Any) -> None:
        self._seen: dict[str, np.ndarray] | None = None
        modules = dict(model.named_modules())
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        head_name = next((n for n, m in modules.items() if m is head and head is not None), None)
        points = find_points(
            [(name, type(module).__name__) for name, module in modules.items()],
            _num_layers(model.config),
            head_name,
        )
        for capture in points.captures():
            module = modules[capture.module]
            if capture.side == "input":
                module.register_forward_pre_hook(self._input_hook(capture), with_kwargs=True)
            else:
                module.register_forward_hook(self._output_hook(capture))

    @contextmanager
    def recording(self) -> Iterator[dict[str, np.ndarray]]:
        """The probes of the forwards run inside, filled as they run."""
        self._seen = {}
        try:
            yield self._seen
        finally:
            self._seen = None

    def _input_hook(self, capture: Capture) -> Any:
        def hook(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            value = args[0] if args else kwargs.get("hidden_states")
            self._keep(capture.probe, value)

        return hook

    def _output_hook(self, capture: Capture) -> Any:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            self._keep(capture.probe, output)

        return hook

    def _keep(self, probe: str, value: Any) -> None:
        tensor = _first_tensor(value)
        if self._seen is not None and probe not in self._seen and tensor is not None:
            self._seen[probe] = tensor.detach().float().cpu().numpy().copy()


def _first_tensor(value: Any) -> Any:
    """The hidden states of a module's result: a tensor, or the first of a tuple or output."""
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, tuple | list) and value:
        return _first_tensor(value[0])
    if hasattr(value, "to_tuple"):
        return _first_tensor(value.to_tuple())
    return None


def _num_layers(config: Any) -> int:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(getattr(text, "num_hidden_layers", 0) or 0)
