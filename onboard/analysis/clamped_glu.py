"""The clamped sigmoid GLU of GPT-OSS's and MiniMax-M3's experts, read by running them.

Their experts compute ``(up.clamp(-L, L) + 1) * g * sigmoid(alpha * g)``, ``g =
gate.clamp(max=L)``, in their own code (``_apply_gate``, a dense MLP's forward), which no
activation name says. The limit and alpha are the module's own attributes; a config key is
credited only when the tiny config's value (shrunk, so the clamp bites) is the module's. The
layout (halves or alternate rows) and the offset on up are tried against the module on inputs
scaled past the limit, so a GLU without the clamp cannot match.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from onboard.spec import ClampedGluSpec

# The module attributes that hold them (MiniMax-M3: swiglu_limit; GPT-OSS: limit, alpha)
_LIMIT_NAMES = ("swiglu_limit", "limit")
_ALPHA_NAMES = ("swiglu_alpha", "alpha")
LIMIT_KEYS = ("swiglu_limit",)
_ALPHA_KEYS = ("swiglu_alpha",)
TOLERANCE = 1e-5
# Probe inputs are scaled until the largest gate or up value is this many limits
PAST_LIMIT = 3.0


def apply_glu(fused: Any, glu: ClampedGluSpec, limit: float, alpha: float) -> Any:
    """The GLU of a fused gate_up projection's output (last axis), as ``glu`` says."""
    import torch

    if glu.layout == "interleaved":
        gate, up = fused[..., ::2], fused[..., 1::2]
    else:
        gate, up = fused.chunk(2, dim=-1)
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + glu.up_offset) * gate * torch.sigmoid(gate * alpha)


def values(glu: ClampedGluSpec, config: Any) -> tuple[float, float]:
    """The limit and alpha ``config`` gives (the tiny model's), else the fixed ones."""
    limit = getattr(config, glu.limit_key) if glu.limit_key else glu.limit
    alpha = getattr(config, glu.alpha_key) if glu.alpha_key else glu.alpha
    return float(limit), float(alpha)


def candidate_limits(module: Any, tiny: Any, real: Any) -> list[ClampedGluSpec]:
    """Every layout and up offset the module might compute, with its own limit and alpha; []
    when it holds no limit."""
    limit = _attribute(module, _LIMIT_NAMES)
    alpha = _attribute(module, _ALPHA_NAMES)
    if limit is None or alpha is None:
        return []
    limit_key = _key(limit, tiny, LIMIT_KEYS)
    alpha_key = _key(alpha, tiny, _ALPHA_KEYS)
    real_limit = float(getattr(real, limit_key)) if limit_key else limit
    real_alpha = float(getattr(real, alpha_key)) if alpha_key else alpha
    return [
        ClampedGluSpec(real_limit, real_alpha, offset, layout, limit_key, alpha_key)
        for layout, offset in itertools.product(("halves", "interleaved"), (1.0, 0.0))
    ]


def find_glu(
    candidates: list[ClampedGluSpec],
    tiny: Any,
    run: Callable[[ClampedGluSpec, float, float, float], float],
    gate_up_max: Callable[[float], float],
) -> ClampedGluSpec | None:
    """The first candidate whose GLU reproduces the module (``run(glu, limit, alpha, scale)``:
    max abs difference) both on plain inputs and on inputs scaled so some gate or up value lies
    ``PAST_LIMIT`` limits out (``gate_up_max(scale)``: the largest absolute gate or up value)."""
    for glu in candidates:
        limit, alpha = values(glu, tiny)
        scale = PAST_LIMIT * limit / max(gate_up_max(1.0), 1e-6)
        if all(_close(run(glu, limit, alpha, s)) for s in (1.0, max(scale, 1.0))):
            return glu
    return None


def describe(glu: ClampedGluSpec) -> str:
    """The GLU in one line, naming the config keys it reads."""
    limit = f"config.{glu.limit_key}" if glu.limit_key else f"{glu.limit:g}"
    alpha = f"config.{glu.alpha_key}" if glu.alpha_key else f"{glu.alpha:g}"
    up = f"up.clamp(+-{limit})" + (f" + {glu.up_offset:g}" if glu.up_offset else "")
    layout = "alternate rows, gate first" if glu.layout == "interleaved" else "halves, gate first"
    return (
        f"({up}) * g * sigmoid({alpha} * g), g = gate.clamp(max={limit}); gate and up: the "
        f"fused projection's {layout}; matched on inputs driven {PAST_LIMIT:g} limits past it"
    )


def _attribute(module: Any, names: tuple[str, ...]) -> float | None:
    for name in names:
        value = getattr(module, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _key(value: float, tiny: Any, keys: tuple[str, ...]) -> str | None:
    """The config key the module's value comes from: the tiny config holds the same value."""
    for key in keys:
        held = getattr(tiny, key, None)
        if isinstance(held, (int, float)) and math.isclose(float(held), value):
            return key
    return None


def _close(diff: float) -> bool:
    return math.isfinite(diff) and diff <= TOLERANCE
