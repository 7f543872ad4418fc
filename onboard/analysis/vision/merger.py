"""A patch merger's steps, read from the leaves its forward calls (Qwen-VL's merger inside the
tower, Qwen3-VL's DeepStack mergers, GLM-4V's gated merger).

Order alone reads a sequential merger: norms, rows grouped where a linear reads a multiple of
the width, linears and activations. A gated MLP (two linears that read the same input, one
through an activation, multiplied) is read from the inputs the leaves received, so the same
call order with another dataflow is not mistaken for it.
"""

from __future__ import annotations

from typing import Any

from onboard.analysis.vision.projector import norm_eps, rms_offset
from onboard.analysis.vision.qwen_vl import NotQwenVL
from onboard.vision import ProjectorSpec, ProjectorStep

_TORCH_GELU = {"none": "gelu", "tanh": "gelu_pytorch_tanh"}


def read_merger(merger: Any, hidden: int, called: list[tuple[str, Any]]) -> ProjectorSpec:
    """The merger's steps from the leaves its forward called, in order: an RMS norm over the
    tower's width, rows grouped where the first linear reads a multiple of it, then linears and
    activations."""
    import torch.nn as nn
    from transformers.activations import ACT2CLS

    steps: list[ProjectorStep] = []
    width = hidden
    for name, leaf in called:
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


def called_leaves(module: Any, run: Any) -> list[tuple[str, Any]]:
    """The leaf modules of ``module`` in the order ``run()`` first calls them."""
    order: list[tuple[str, Any]] = []
    handles = []
    for name, leaf in module.named_modules():
        if any(True for _ in leaf.children()):
            continue

        def hook(_m: Any, _a: Any, name: str = name, leaf: Any = leaf) -> None:
            if all(n != name for n, _ in order):
                order.append((name, leaf))

        handles.append(leaf.register_forward_pre_hook(hook))
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return order
