"""The attention's values where they differ from its keys: value heads of their own width
(``config.v_head_dim``) and a constant factor on the values right after ``v_proj``
(MiMo-V2-Flash's ``attention_value_scale``), both read from the HF source and the tiny model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.source_lines import class_line, init_assignment
from onboard.source import SourceFile
from onboard.spec import Evidence
from onboard.tiny import is_number

_CONFIG_KEY = re.compile(r"config\.(\w+)")


@dataclass(frozen=True)
class ValueParts:
    v_head_dim: int | None = None
    v_head_dim_key: str | None = None
    scale: float | None = None
    scale_key: str | None = None
    width_evidence: tuple[Evidence, ...] = ()
    scale_evidence: tuple[Evidence, ...] = ()


def value_parts(
    attention: Any, tiny: Any, head_dim: int, kv_heads: int, files: Sequence[SourceFile]
) -> ValueParts:
    """``attention``: the first layer's HF attention (``kv_heads`` key/value heads of
    ``head_dim``) of the tiny model built from ``tiny``."""
    cls = type(attention).__name__
    width, width_key, width_evidence = _value_width(attention, tiny, head_dim, kv_heads, files)
    scale, scale_key, scale_evidence = _value_scale(attention, cls, files)
    return ValueParts(width, width_key, scale, scale_key, width_evidence, scale_evidence)


def _value_width(
    attention: Any, tiny: Any, head_dim: int, kv_heads: int, files: Sequence[SourceFile]
) -> tuple[int | None, str | None, tuple[Evidence, ...]]:
    """v_proj sized by a config key of its own (``config.v_head_dim``) where the tiny model
    makes the value heads another width than head_dim."""
    v_proj = getattr(attention, "v_proj", None)
    if v_proj is None or not hasattr(v_proj, "out_features") or not kv_heads:
        return None, None, ()
    width = v_proj.out_features // kv_heads
    if width == head_dim:
        return None, None, ()
    line = init_assignment(files, type(attention).__name__, "v_proj")
    keys = _CONFIG_KEY.findall(line.evidence.detail) if line else []
    key = next((k for k in keys if getattr(tiny, k, None) == width), None)
    if key is None:
        return None, None, ()
    probe = Evidence("probe", "model.layers.0.self_attn.v_proj", f"{kv_heads} heads of {width}")
    return width, key, (probe, line.evidence)


def _value_scale(
    attention: Any, cls: str, files: Sequence[SourceFile]
) -> tuple[float | None, str | None, tuple[Evidence, ...]]:
    """``self.v_proj(...)... * self.<attr>``, with ``self.<attr>`` set from ``config.<key>``:
    the attention's value of it is the factor HF applies."""
    use = class_line(files, cls, r"v_proj\(.*\*\s*self\.\w+")
    match = re.search(r"\*\s*self\.(\w+)", use.detail) if use else None
    if match is None:
        return None, None, ()
    attr = match.group(1)
    assigned = init_assignment(files, cls, attr)
    keys = _CONFIG_KEY.findall(assigned.evidence.detail) if assigned else []
    value = getattr(attention, attr, None)
    if not keys or not is_number(value):
        return None, None, ()
    return float(value), keys[0], (use, assigned.evidence)
