"""Find the config key of a projector activation HF reads from a sub-config (Janus' aligner
takes ``ACT2FN[config.hidden_act]`` of the vision config it is built with).

A name equal to the activation's is not proof: the projector is built again from the config
it takes, with the key set to another activation, and the key is the one whose new activation
shows up. Without a key the generated code would fix the tiny model's activation.
"""

from __future__ import annotations

import copy
import inspect
import re
from typing import Any

_READ = re.compile(r"\bconfig\.(\w+)\b(?!\.)")
_OTHER = "relu"


def sub_config_activation_key(projector: Any, config: Any, activation: str) -> str | None:
    """``vision_config.<key>`` when rebuilding the projector from the vision config with
    ``<key>`` changed changes its activation; None otherwise."""
    from transformers.activations import ACT2CLS

    try:
        source = inspect.getsource(type(projector))
    except (OSError, TypeError):
        return None
    vision = getattr(config, "vision_config", None)
    other = ACT2CLS[_OTHER]
    for key in dict.fromkeys(_READ.findall(source)):
        if getattr(vision, key, None) != activation:
            continue
        probe = copy.deepcopy(vision)
        setattr(probe, key, _OTHER)
        try:
            rebuilt = type(projector)(probe)
        except Exception:  # not built from the vision config
            return None
        if any(type(module) is other for module in rebuilt.modules()):
            return f"vision_config.{key}"
    return None
