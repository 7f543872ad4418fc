"""A patch merger's steps, read from the leaves its forward calls (Qwen-VL's merger inside the
tower, Qwen3-VL's DeepStack mergers, GLM-4V's gated merger).

Order alone reads a sequential merger: norms, rows grouped where a linear reads a multiple of
the width, linears and activations. A gated MLP (two linears that read the same input, one
through an activation, multiplied) is read from the inputs the leaves received, so the same
call order with another dataflow is not mistaken for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onboard.analysis.vision.projector import gate_up_step, norm_eps, rms_offset
from onboard.analysis.vision.qwen_vl import NotQwenVL
from onboard.vision import ProjectorSpec, ProjectorStep

_TORCH_GELU = {"none": "gelu", "tanh": "gelu_pytorch_tanh"}


def read_merger(
    merger: Any,
    hidden: int,
    called: list[tuple[str, Any]],
    inputs: Mapping[str, int] | None = None,
) -> ProjectorSpec:
    """The merger's steps from the leaves its forward called, in order: an RMS norm over the
    tower's width, rows grouped where the first linear reads a multiple of it, then linears and
    activations. ``inputs`` (each leaf's input, by identity: ``called_inputs``) shows a gated
    unit: a linear, an activation, then a linear that reads what the first one read."""
    import torch.nn as nn
    from transformers.activations import ACT2CLS

    steps: list[ProjectorStep] = []
    width = hidden
    for name, leaf in called:
        if isinstance(leaf, nn.Linear) and (gated := _gated_unit(steps, name, leaf, inputs)):
            steps[-2:] = [gated]
            continue
        if isinstance(leaf, nn.Linear):
            if leaf.in_features != width:
                if leaf.in_features % width:
                    raise NotQwenVL(
                        f"merger linear {name} reads {leaf.in_features}, not k x {width}"
                    )
                steps.append(ProjectorStep("group_rows", "", kernel=leaf.in_features // width))
            steps.append(
                ProjectorStep(
                    "linear", name, leaf.in_features, leaf.out_features, leaf.bias is not None
                )
            )
            width = leaf.out_features
        elif isinstance(leaf, nn.LayerNorm):
            normed = int(leaf.normalized_shape[-1])
            if normed != width:  # the norm after the rows are grouped (DeepStack's mergers)
                if normed % width:
                    raise NotQwenVL(f"merger norm {name} over {normed}, not k x {width}")
                steps.append(ProjectorStep("group_rows", "", kernel=normed // width))
                width = normed
            steps.append(ProjectorStep("layer_norm", name, eps=float(leaf.eps)))
        elif (offset := rms_offset(leaf)) is not None:
            steps.append(
                ProjectorStep("rms_norm", name, eps=float(norm_eps(leaf)), weight_offset=offset)
            )
        elif isinstance(leaf, nn.GELU):
            steps.append(
                ProjectorStep("activation", name, activation=_TORCH_GELU[leaf.approximate])
            )
        elif not any(True for _ in leaf.parameters()):
            found = [k for k, c in ACT2CLS.items() if isinstance(c, type) and type(leaf) is c]
            if not found:
                raise NotQwenVL(f"merger step {type(leaf).__name__} at {name}")
            steps.append(ProjectorStep("activation", name, activation=found[0]))
        else:
            raise NotQwenVL(f"merger step {type(leaf).__name__} at {name}")
    return ProjectorSpec(name="merger", steps=tuple(steps))


def _gated_unit(
    steps: list[ProjectorStep], name: str, leaf: Any, inputs: Mapping[str, int] | None
) -> ProjectorStep | None:
    """``activation(gate(x)) * up(x)`` when this linear (up) reads the rows the linear before
    the last activation (gate) read, at the same widths."""
    if inputs is None or len(steps) < 2:
        return None
    gate, act = steps[-2], steps[-1]
    if gate.op != "linear" or act.op != "activation" or inputs.get(name) != inputs.get(gate.name):
        return None
    step = gate_up_step(gate, act, name, leaf)
    if step is None:
        raise NotQwenVL(f"merger linears {gate.name} and {name} read one input at other widths")
    return step


def called_inputs(module: Any, run: Any) -> dict[str, int]:
    """Each leaf of ``module`` -> the identity of the first tensor ``run()`` first passed it:
    two leaves with one identity read the same rows (every input is kept alive until ``run``
    returns, so no identity is reused)."""
    return {name: id(first) for name, _, first in _first_calls(module, run) if first is not None}


def called_leaves(module: Any, run: Any) -> list[tuple[str, Any]]:
    """The leaf modules of ``module`` in the order ``run()`` first calls them."""
    return [(name, leaf) for name, leaf, _ in _first_calls(module, run)]


def _first_calls(module: Any, run: Any) -> list[tuple[str, Any, Any]]:
    """The leaves of ``module`` in the order ``run()`` first calls them, each with the first
    tensor it was passed (None: no positional input), kept alive in the list."""
    calls: list[tuple[str, Any, Any]] = []
    handles = []
    for name, leaf in module.named_modules():
        if any(True for _ in leaf.children()):
            continue

        def hook(_m: Any, args: tuple[Any, ...], name: str = name, leaf: Any = leaf) -> None:
            if all(n != name for n, _, _ in calls):
                calls.append((name, leaf, args[0] if args else None))

        handles.append(leaf.register_forward_pre_hook(hook))
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return calls
