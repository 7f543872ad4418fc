"""Where a tower keeps its encoder layers and their parts, found by structure, not by name.

Every tower reader (ViT, Pixtral) finds its layers the same way; each raises its own
not-this-tower error, so the caller knows which kind the layout ruled out.
"""

from __future__ import annotations

from typing import Any


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
