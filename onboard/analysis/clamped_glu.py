"""The clamped sigmoid GLU of GPT-OSS's and MiniMax-M3's experts, read by running them.

Their experts compute ``(up.clamp(-L, L) + 1) * g * sigmoid(alpha * g)``, ``g =
gate.clamp(max=L)``, in their own code (``_apply_gate``, a dense MLP's forward), which no
activation name says. The limit and alpha are the module's own attributes; a config key is
credited only when the tiny config's value (shrunk, so the clamp bites) is the module's. The
layout (halves or alternate rows) and the offset on up are tried against the module on inputs
scaled past the limit, so a GLU without the clamp cannot match.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from onboard.spec import ClampedGluSpec
from onboard.tiny import is_number

if TYPE_CHECKING:
    from onboard.analysis.moe import ExpertLayout

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


def expert_glu(
    experts: Any, layout: ExpertLayout, tiny: Any, real: Any, top_k: int
) -> ClampedGluSpec | None:
    """The clamped GLU the experts compute in place of act(gate) * up, if they hold a limit
    and one candidate reproduces them, past the limit too."""
    import torch

    from onboard.analysis.moe import expert_matrices, probe_routing, routed_output

    candidates = candidate_limits(experts, tiny, real)
    if not candidates:
        return None
    hidden, indices, weights = probe_routing(experts, layout, top_k)
    every = range(layout.num_experts)

    def run(glu: ClampedGluSpec, limit: float, alpha: float, scale: float) -> float:
        gated = functools.partial(apply_glu, glu=glu, limit=limit, alpha=alpha)
        with torch.no_grad():
            theirs = experts(hidden * scale, indices, weights)
            ours = routed_output(experts, hidden * scale, indices, weights, None, False, gated)
        return (ours.float() - theirs.float()).abs().max().item()

    def gate_up_max(scale: float) -> float:
        with torch.no_grad():
            fused = [(hidden * scale) @ expert_matrices(experts, e)[0].T for e in every]
        return max(f.abs().max().item() for f in fused)

    try:
        return find_glu(candidates, tiny, run, gate_up_max)
    except Exception:  # another forward signature: _check_experts names it
        return None


def glu_function(glu: ClampedGluSpec, config: Any) -> Callable[[Any], Any]:
    """``apply_glu`` with the limit and alpha ``config`` gives."""
    limit, alpha = values(glu, config)
    return functools.partial(apply_glu, glu=glu, limit=limit, alpha=alpha)


def shared_glu(module: Any, tiny: Any, real: Any) -> tuple[ClampedGluSpec | None, int | None]:
    """A shared expert of one fused gate_up_proj and a down_proj linear, nothing else learned,
    computing a clamped GLU (MiniMax-M3's dense MLP): the GLU and its width, else (None, None)."""
    import torch

    fused = getattr(getattr(module, "gate_up_proj", None), "weight", None)
    down = getattr(module, "down_proj", None)
    learned = {name for name, _ in module.named_parameters()}
    if not isinstance(fused, torch.Tensor) or not isinstance(down, torch.nn.Linear):
        return None, None
    if learned != {"gate_up_proj.weight", "down_proj.weight"} or fused.dim() != 2:
        return None, None
    candidates = candidate_limits(module, tiny, real)
    hidden = torch.randn(8, fused.shape[1], generator=torch.Generator().manual_seed(4))

    def run(glu: ClampedGluSpec, limit: float, alpha: float, scale: float) -> float:
        with torch.no_grad():
            ours = down(apply_glu(module.gate_up_proj(hidden * scale), glu, limit, alpha))
            return (ours - module(hidden * scale)).abs().max().item()

    def gate_up_max(scale: float) -> float:
        with torch.no_grad():
            return module.gate_up_proj(hidden * scale).abs().max().item()

    try:
        glu = find_glu(candidates, tiny, run, gate_up_max)
    except Exception:  # another forward signature: the caller says what it is not
        return None, None
    return (glu, int(down.in_features)) if glu is not None else (None, None)


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
        if is_number(value):
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
