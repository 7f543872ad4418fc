"""Turn a config.json dict into a transformers config object, defensively.

transformers normalises many fields (``rope_parameters``, ``layer_types`` derived from
``use_sliding_window`` or ``sliding_window_pattern``), so the analysis reads the config object,
not the raw dict. A hostile or broken config must end in one clear line, not a traceback deep in
a config class, and sizes are bounded before anything allocates memory from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onboard.errors import InvalidConfigError, one_line

# Generous upper bounds: larger than any published model, small enough to reject nonsense.
_SIZE_LIMITS = {
    "hidden_size": 1 << 17,
    "intermediate_size": 1 << 20,
    "num_hidden_layers": 4096,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "head_dim": 1 << 14,
    "vocab_size": 1 << 24,
    "max_position_embeddings": 1 << 24,
}
_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def check_sizes(
    text: Any, where: str = "config.json", *, required: bool = True, attention: bool = True
) -> None:
    """Reject missing, non-integer, non-positive or absurd sizes with a one-line message.

    Run it on the raw dict first (``required=False``: aliases such as ``n_embd`` are not resolved
    yet, but a huge value must be refused before a config class builds per-layer lists from it),
    then on the transformers config object, whose attributes resolve the aliases. A model
    without ``attention`` (a pure state-space model) needs no attention heads.
    """
    needed = [k for k in _REQUIRED if attention or k != "num_attention_heads"] if required else []

    def get(key: str) -> Any:
        if isinstance(text, Mapping):
            return text.get(key)
        try:
            return getattr(text, key, None)
        except Exception:  # some configs refuse global reads of per-layer attributes
            return None

    for key, limit in _SIZE_LIMITS.items():
        value = get(key)
        if value is None:
            if key in needed:
                raise InvalidConfigError(f"{where} has no {key}")
            continue
        values = value if isinstance(value, list) and key == "intermediate_size" else [value]
        for item in values:
            if not isinstance(item, int) or isinstance(item, bool) or not 0 < item <= limit:
                raise InvalidConfigError(
                    f"{where}: {key} must be a positive integer up to {limit}, got {value!r:.40}"
                )
    heads, kv = get("num_attention_heads"), get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv, int) and kv and heads % kv:
        raise InvalidConfigError(
            f"{where}: num_attention_heads ({heads}) is not a multiple of "
            f"num_key_value_heads ({kv})"
        )


def make_hf_config(config: Mapping[str, Any]) -> Any:
    """The transformers config object for a config.json dict (model_type must be known)."""
    from transformers import CONFIG_MAPPING

    model_type = config["model_type"]
    try:
        config_class = CONFIG_MAPPING[model_type]
    except KeyError:
        raise InvalidConfigError(f"transformers has no config class for {model_type!r}") from None
    try:
        return config_class.from_dict(dict(config))
    except Exception as exc:  # config classes validate with many exception types
        raise InvalidConfigError(
            f"transformers rejects this {model_type} config "
            f"({type(exc).__name__}: {one_line(str(exc))})"
        ) from None
