"""Where a tower keeps its encoder layers and their parts, found by structure, not by name.

Every tower reader (ViT, Pixtral, Qwen-VL) finds its layers the same way; each raises its own
not-this-tower error, so the caller knows which kind the layout ruled out.
"""

from __future__ import annotations

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
