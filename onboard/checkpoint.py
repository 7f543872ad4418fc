"""Save a tiny HF model the way a checkpoint on disk looks, quietly.

The probe reads the saved tensor names (the on-disk layout can differ from the in-memory one, as
MoE experts do in transformers v5); the parity reference loads the saved tensors so the candidate
converts exactly what a real checkpoint would give it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def saved(model: Any) -> Iterator[list[Path]]:
    """The ``*.safetensors`` files of ``model.save_pretrained`` in a temporary directory."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with tempfile.TemporaryDirectory(prefix="onboard-ckpt-") as tmp:
            model.save_pretrained(tmp, safe_serialization=True)
            yield sorted(Path(tmp).glob("*.safetensors"))
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def parameter_shapes(model: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Names and shapes of the parameters as the model holds them in memory."""
    return tuple((n, tuple(p.shape)) for n, p in model.named_parameters())


def tensor_shapes(model: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Names and shapes of the saved tensors, read from the safetensors headers."""
    from safetensors import safe_open

    found: list[tuple[str, tuple[int, ...]]] = []
    with saved(model) as files:
        for path in files:
            with safe_open(path, framework="pt") as handle:
                for key in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                    found.append((key, tuple(handle.get_slice(key).get_shape())))
    return tuple(sorted(found))


def tensors(model: Any) -> dict[str, Any]:
    """The saved tensors themselves, loaded back on the CPU."""
    from safetensors.torch import load_file

    loaded: dict[str, Any] = {}
    with saved(model) as files:
        for path in files:
            loaded.update(load_file(path))
    return loaded
