"""Find the config key that sets a projector width of its own (neither the tower's nor the
text's): Cohere 2 Vision's and Aya Vision's ``alignment_intermediate_size``, or a text width
other than its hidden size (Idefics 2's ``text_config.intermediate_size``).

The candidates are the keys the projector class reads from its config; each is proved by a
probe: the projector is built again with the key at another value, and the key is the one whose
new value shows up as a linear's width.
"""

from __future__ import annotations

import copy
import inspect
import re
from typing import Any

from onboard.analysis.probe import source_location
from onboard.spec import Evidence
from onboard.vision import ProjectorWidth

_READ = re.compile(r"\bconfig\.(\w+)\b(?!\.)")
# A width of the text's other than its hidden size (Idefics 2's modality projection is
# text_config.intermediate_size wide)
_READ_TEXT = re.compile(r"\bconfig\.(text_config\.(?!hidden_size\b)\w+)\b(?!\.)")
_READ_OR_TEXT = re.compile(
    r"getattr\(\s*config\s*,\s*[\"'](\w+)[\"']\s*,\s*config\.text_config\.hidden_size\s*\)"
)


def read_projector_width(
    projector: Any, config: Any
) -> tuple[ProjectorWidth | None, tuple[Evidence, ...]]:
    """The key whose value is one of the projector's linear widths, at the tiny config's value
    (``sizes.at_real_sizes`` reads it back from the real config)."""
    try:
        source = inspect.getsource(type(projector))
    except (OSError, TypeError):
        return None, ()
    with_fallback = set(_READ_OR_TEXT.findall(source))
    keys = dict.fromkeys(
        [*_READ.findall(source), *sorted(with_fallback), *_READ_TEXT.findall(source)]
    )
    for key in keys:
        fallback = key in with_fallback
        value = config_value(config, key, config.text_config.hidden_size if fallback else None)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            continue
        linears = _linears_set_by(projector, config, key, value)
        if linears:
            where = source_location(type(projector).__init__) or type(projector).__name__
            found = f"{key} = {value} is the width {', '.join(linears)} write" + (
                " (the text's hidden size when the config has none)" if fallback else ""
            )
            width = ProjectorWidth(key, value, linears, fallback)
            return width, (Evidence("probe", where, found),)
    return None, ()


def config_value(config: Any, key: str, default: Any = None) -> Any:
    """A dotted key's value (``text_config.intermediate_size``), ``default`` where the config
    has none."""
    for part in key.split("."):
        config = getattr(config, part, None)
    return default if config is None else config


def _linears_set_by(projector: Any, config: Any, key: str, value: int) -> tuple[str, ...]:
    """The linears whose output width follows ``key``: rebuilt with the key at another even
    value (a gated unit after one halves it), they write that value."""
    import torch.nn as nn

    probe = copy.deepcopy(config)
    other = value + 2 * max(1, value // 4)
    holder, _, leaf = key.rpartition(".")
    setattr(config_value(probe, holder) if holder else probe, leaf, other)
    try:
        rebuilt = type(projector)(probe)
    except Exception:  # a key the projector cannot be built with another value of
        return ()
    return tuple(
        name
        for name, module in rebuilt.named_modules()
        if isinstance(module, nn.Linear) and module.out_features == other
    )
