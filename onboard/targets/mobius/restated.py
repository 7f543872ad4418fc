"""The generated config's settings that change nothing: mobius' base config derives the same.

A generated ``from_transformers`` that restates ``hidden_act=config.hidden_act`` and nine more
fields its base config already reads is noise a reviewer has to check line by line. A setting
is dropped only when it is measured to restate the base: for every tiny config the generated
code is proved on (the analysed one, and each with its flags flipped), the base config class
gives the same value under the config's own model type and under one that no mobius list names
(mobius derives some fields from model_type lists, trap T4 in the target notes, and a setting
that only a list makes redundant stays, so a change to the lists cannot change the model).
Anything that cannot be measured (mobius missing, an expression that needs more than the
config, a config transformers rejects) is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from onboard.targets.mobius.settings import Setting

__all__ = ["flag_configs", "restated"]

NEUTRAL_TYPE = "onboard_neutral"  # a model type no mobius list names
# What a setting's expression may use besides the config (they are onboard's own expressions)
_NAMES = {
    "bool": bool,
    "int": int,
    "float": float,
    "list": list,
    "tuple": tuple,
    "dict": dict,
    "getattr": getattr,
}


def flag_configs(analysis: Any) -> list[dict[str, Any]]:
    """The tiny configs the generated code is proved on: the analysed one, its flag variants,
    and for a variant, the configs its flags were flipped from (each flipped back)."""
    tiny = dict(analysis.tiny.config)
    found = [tiny] + [dict(v.tiny.config) for v in analysis.variants]
    flipped = [key for key, _ in analysis.flagged_from.single] if analysis.flagged_from else []
    if flipped:
        found.append({**tiny, **{k: not tiny.get(k) for k in flipped}})
        for kept in flipped:
            found.append({**tiny, **{k: not tiny.get(k) for k in flipped if k != kept}})
    return found


def restated(
    settings: tuple[Setting, ...], config_class: str, configs: Iterable[Mapping[str, Any]]
) -> frozenset[Setting]:
    """The settings that restate what ``config_class.from_transformers`` derives: measured
    once, for every design that holds them."""
    base_class = _mobius_config_class(config_class)
    hf_configs = [c for c in map(_hf_config, configs) if c is not None]
    if base_class is None or not hf_configs:
        return frozenset()
    pairs = [
        (config, _base(base_class, config, model_type))
        for config in hf_configs
        for model_type in (config.model_type, NEUTRAL_TYPE)
    ]
    if any(base is None for _, base in pairs):
        return frozenset()
    return frozenset(s for s in settings if _restates(s, pairs))


def _restates(setting: Setting, pairs: list[tuple[Any, Any]]) -> bool:
    for config, base in pairs:
        try:
            scope = {**_NAMES, "config": config, "base": base}  # as in from_transformers
            ours = eval(setting.expr, {"__builtins__": {}}, scope)
        except Exception:  # an expression that needs more than the config: keep it
            return False
        if not hasattr(base, setting.field) or ours != getattr(base, setting.field):
            return False
    return True


def _base(base_class: Any, config: Any, model_type: str) -> Any | None:
    """``base_class.from_transformers`` of ``config`` read as ``model_type``."""
    try:
        return base_class.from_transformers(_as_type(config, model_type))
    except Exception:  # the base cannot read this config at all: nothing to compare
        return None


def _as_type(config: Any, model_type: str) -> Any:
    copy = type(config).from_dict(config.to_dict())
    copy.model_type = model_type  # an instance attribute over the class's own
    return copy


def _hf_config(config: Mapping[str, Any]) -> Any | None:
    from onboard.errors import OnboardError
    from onboard.hf_config import make_hf_config

    try:
        return make_hf_config(config)
    except OnboardError:  # a flipped combination transformers rejects is not a real config
        return None


def _mobius_config_class(name: str) -> Any | None:
    try:
        import mobius._configs as configs
    except ImportError:
        return None
    found = getattr(configs, name, None)
    return found if isinstance(found, type) and dataclasses.is_dataclass(found) else None
