"""What both vision spec checks run in torch: the projector steps that act on each feature row
alone, and the stages, each compared with what HF's module received or returned."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def stage_deltas(
    stages: Iterable[Any],
    difference: Callable[[Any, Any], str | None],
    delta: Callable[[Any, str], Any],
) -> tuple[Any, ...]:
    """``delta(stage, detail)`` for each stage (``compute()`` against ``expected``) whose value
    ``difference`` tells apart from HF's, or that does not even run on these weights."""
    import torch

    deltas = []
    with torch.no_grad():
        for stage in stages:
            try:
                got = stage.compute()
            except Exception as exc:  # the spec does not even run on these weights here
                deltas.append(delta(stage, f"{type(exc).__name__}: {exc}"))
                continue
            if detail := difference(got, stage.expected):
                deltas.append(delta(stage, detail))
    return tuple(deltas)


ROW_OPS = frozenset({"linear", "layer_norm", "rms_norm", "activation", "gate_up"})


def run_row_step(step: Any, weight: Callable[[str], Any], x: Any) -> Any:
    """One linear, norm or activation step over the last axis of ``x``; the spec's numbers
    (epsilon, weight offset) are the ones the generated code will use."""
    import torch
    import torch.nn.functional as F
    from transformers.activations import ACT2FN

    if step.op == "linear":
        bias = weight(f"{step.name}.bias") if step.bias else None
        return F.linear(x, weight(f"{step.name}.weight"), bias)
    if step.op == "layer_norm":
        shape = x.shape[-1:]
        return F.layer_norm(
            x, shape, weight(f"{step.name}.weight"), weight(f"{step.name}.bias"), step.eps
        )
    if step.op == "rms_norm":
        scale = step.weight_offset + weight(f"{step.name}.weight")
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + step.eps) * scale
    if step.op == "activation":
        return ACT2FN[step.activation](x)
    if step.op == "gate_up":
        bias = (
            (weight(f"{step.name}.bias"), weight(f"{step.up}.bias")) if step.bias else (None,) * 2
        )
        gate = F.linear(x, weight(f"{step.name}.weight"), bias[0])
        return ACT2FN[step.activation](gate) * F.linear(x, weight(f"{step.up}.weight"), bias[1])
    raise ValueError(f"{step.op} is not a row step")
