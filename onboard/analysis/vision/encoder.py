"""Where a tower keeps its encoder layers and their parts, found by structure, not by name.

Every tower reader (ViT, Pixtral, Qwen-VL) finds its layers the same way; each raises its own
not-this-tower error, so the caller knows which kind the layout ruled out.
"""

from __future__ import annotations

import inspect
from typing import Any

from onboard.spec import Evidence


def encoder_layers(tower: Any, count: int, error: type[Exception]) -> str:
    """The name of the one module list of ``count`` layers inside ``tower``."""
    import torch.nn as nn

    matching = [
        n for n, m in tower.named_modules() if isinstance(m, nn.ModuleList) and len(m) == count
    ]
    if len(matching) != 1:
        raise error(f"no single list of {count} encoder layers")
    return matching[0]


def forward_call_order(tower: Any, channels: int, side: int, error: type[Exception]) -> list[str]:
    """Names of the tower's modules in the order a forward on one ``side`` x ``side`` image first
    calls them. A forward that needs more than the pixels (Ovis 2.5's and Qwen-VL's ``grid_thw``:
    patches packed per image) is not a tower of this kind: ``error`` names what it needs."""
    import torch

    needed = _required_arguments(type(tower).forward)[1:]  # the first is the pixels
    if needed:
        raise error(f"its forward needs {', '.join(needed)} besides the pixels")
    order: list[str] = []
    handles = []
    for name, module in tower.named_modules():

        def hook(_module: Any, _args: Any, name: str = name) -> None:
            if name not in order:
                order.append(name)

        handles.append(module.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            tower(torch.zeros(1, channels, side, side))
    finally:
        for handle in handles:
            handle.remove()
    return order


def _required_arguments(function: Any) -> list[str]:
    """The parameters a call must pass (no default, not ``self``, not ``*args``/``**kwargs``)."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    kinds += (inspect.Parameter.KEYWORD_ONLY,)
    parameters = list(inspect.signature(function).parameters.values())[1:]
    return [p.name for p in parameters if p.kind in kinds and p.default is p.empty]


def child_with_linears(
    layer: Any, count: int, what: str, error: type[Exception]
) -> tuple[str, Any]:
    """The one child of ``layer`` holding ``count`` linears directly (its attention, its MLP)."""
    import torch.nn as nn

    found = [
        (n, m)
        for n, m in layer.named_children()
        if sum(isinstance(c, nn.Linear) for c in m.children()) == count
    ]
    if len(found) != 1:
        raise error(f"no single {what} with {count} linears in an encoder layer")
    return found[0]


def rope_tower_evidence(
    tower: Any, keys: tuple[tuple[str, str], ...], rope_theta: float, names: Any, config: Any
) -> list[tuple[str, tuple[Evidence, ...]]]:
    """Evidence every tower with 2-D RoPE shares (Pixtral, Qwen-VL): its config fields as read,
    its RoPE theta, and the names of its parts as the probe found them."""
    from onboard.analysis.probe import source_location

    where = source_location(type(tower).forward) or type(tower).__name__
    found = [
        (
            f"vision.tower.{field}",
            (Evidence("config", f"config.json:vision_config.{key}", repr(getattr(config, key))),),
        )
        for field, key in keys
    ]
    theta_key = "config.json:vision_config.rope_parameters.rope_theta"
    found.append(("vision.tower.rope_theta", (Evidence("config", theta_key, repr(rope_theta)),)))
    listed = ", ".join(f"{role}={name}" for role, name in names)
    found.append(("vision.tower.names", (Evidence("probe", where, listed),)))
    return found
