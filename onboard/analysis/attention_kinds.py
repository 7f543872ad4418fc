"""Which attention each layer uses, however the config says it.

Most configs list ``layer_types`` (``full_attention`` / ``sliding_attention``) and keep the
window in ``sliding_window``; GPT-Neo lists ``attention_layers`` (``global`` / ``local``) and
keeps the window in ``window_size`` (config.json says ``attention_types``, run-length encoded).
The analysis, the tiny config, the spec interpreter and the known-bug triggers read them through
here, so they agree; each function takes an HF config object or a config.json dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onboard.tiny import expand_attention_types

# GPT-Neo's names for the two kinds.
GLOBAL_LOCAL = {"global": "full_attention", "local": "sliding_attention"}


def _read(config: Any, key: str) -> Any:
    return config.get(key) if isinstance(config, Mapping) else getattr(config, key, None)


def _listed(config: Any, key: str) -> list[Any] | None:
    """The per-layer list under ``key``; config.json's attention_types expanded."""
    value = _read(config, key)
    return expand_attention_types(value) if key == "attention_types" else value


def kinds_key(config: Any) -> str | None:
    """The config key listing each layer's attention kind, if there is one."""
    if _read(config, "layer_types"):
        return "layer_types"
    for key in ("attention_layers", "attention_types"):
        listed = _listed(config, key)
        if listed and set(listed) <= set(GLOBAL_LOCAL):
            return key
    return None


def declared_kinds(config: Any) -> tuple[str, ...] | None:
    """Each layer's kind in the Llama family's words, when the config lists them."""
    key = kinds_key(config)
    if key is None:
        return None
    return tuple(GLOBAL_LOCAL.get(str(k), str(k)) for k in _listed(config, key))


def window_key(config: Any) -> str:
    """The config key holding the sliding window."""
    gpt_neo = kinds_key(config) in ("attention_layers", "attention_types")
    return "window_size" if gpt_neo else "sliding_window"


def window_of(config: Any) -> int | None:
    return _read(config, window_key(config))
