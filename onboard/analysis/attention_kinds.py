"""Which attention each layer uses, however the config says it.

Most configs list ``layer_types`` (``full_attention`` / ``sliding_attention``) and keep the
window in ``sliding_window``; GPT-Neo lists ``attention_layers`` (``global`` / ``local``) and
keeps the window in ``window_size``. The analysis, the tiny config and the spec interpreter read
them through here, so the three agree.
"""

from __future__ import annotations

from typing import Any

# GPT-Neo's names for the two kinds.
GLOBAL_LOCAL = {"global": "full_attention", "local": "sliding_attention"}


def kinds_key(config: Any) -> str | None:
    """The config key listing each layer's attention kind, if there is one."""
    if getattr(config, "layer_types", None):
        return "layer_types"
    listed = getattr(config, "attention_layers", None)
    if listed and set(listed) <= set(GLOBAL_LOCAL):
        return "attention_layers"
    return None


def declared_kinds(config: Any) -> tuple[str, ...] | None:
    """Each layer's kind in the Llama family's words, when the config lists them."""
    key = kinds_key(config)
    if key is None:
        return None
    values = [str(k) for k in getattr(config, key)]
    return tuple(GLOBAL_LOCAL.get(k, k) if key == "attention_layers" else k for k in values)


def window_key(config: Any) -> str:
    """The config key holding the sliding window."""
    return "window_size" if kinds_key(config) == "attention_layers" else "sliding_window"


def window_of(config: Any) -> int | None:
    return getattr(config, window_key(config), None)
