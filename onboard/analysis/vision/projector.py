"""Read a sequential projector: its leaf modules in the order its forward calls them (linears,
layer norms, activations). A leaf of another kind is refused; that the steps in this order
compute the projector is proved by the check."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.source_lines import init_assignment
from onboard.source import SourceFile
from onboard.spec import Delta, Evidence
from onboard.vision import ProjectorSpec, ProjectorStep

_ACTIVATION_KEYS = ("projector_hidden_act",)
_CONFIG_KEY = re.compile(r"config\.(\w+)$")


@dataclass(frozen=True)
class ProjectorReading:
    spec: ProjectorSpec | None
    evidence: tuple[Evidence, ...]
    deltas: tuple[Delta, ...] = ()


def read_projector(
    name: str, projector: Any, features: Any, config: Any, files: Sequence[SourceFile]
) -> ProjectorReading:
    import torch.nn as nn

    steps, evidence = [], []
    activation_key = None
    bias_key = None
    for leaf_name, leaf in _called_leaves(projector, features):
        if isinstance(leaf, nn.Linear):
            bias = leaf.bias is not None
            steps.append(
                ProjectorStep("linear", leaf_name, leaf.in_features, leaf.out_features, bias)
            )
            bias_key = bias_key or _keyword_key(files, type(projector).__name__, leaf_name)
        elif isinstance(leaf, nn.LayerNorm):
            steps.append(ProjectorStep("layer_norm", leaf_name, eps=float(leaf.eps)))
        elif not any(True for _ in leaf.parameters()):
            activation, activation_key = _activation(leaf, config)
            if activation is None:
                return _refused(projector, f"{type(leaf).__name__} at {leaf_name}")
            steps.append(ProjectorStep("activation", leaf_name, activation=activation))
        else:
            return _refused(projector, f"{type(leaf).__name__} at {leaf_name}")
    where = source_location(type(projector).forward) or type(projector).__name__
    evidence.append(Evidence("probe", where, " -> ".join(s.name for s in steps)))
    if activation_key:
        value = getattr(config, activation_key)
        evidence.append(Evidence("config", f"config.json:{activation_key}", repr(value)))
    spec = ProjectorSpec(name, tuple(steps), activation_key=activation_key, bias_key=bias_key)
    return ProjectorReading(spec, tuple(evidence))


def _called_leaves(projector: Any, features: Any) -> list[tuple[str, Any]]:
    import torch

    order: list[tuple[str, Any]] = []
    handles = [
        module.register_forward_pre_hook(
            lambda m, _a, name=name: order.append((name, m)) if (name, m) not in order else None
        )
        for name, module in projector.named_modules()
        if name and not any(True for _ in module.children())
    ]
    try:
        with torch.no_grad():
            projector(features)
    finally:
        for handle in handles:
            handle.remove()
    return order


def _activation(module: Any, config: Any) -> tuple[str | None, str | None]:
    """The HF activation name the module is, and the config key it came from."""
    from transformers.activations import ACT2CLS

    for key in _ACTIVATION_KEYS:
        name = getattr(config, key, None)
        if isinstance(name, str) and _is_activation(module, ACT2CLS.get(name)):
            return name, key
    names = [n for n, c in ACT2CLS.items() if _is_activation(module, c)]
    return (names[0], None) if len(names) == 1 else (None, None)


def _is_activation(module: Any, entry: Any) -> bool:
    cls = entry[0] if isinstance(entry, tuple) else entry
    return cls is not None and type(module) is cls


def _keyword_key(files: Sequence[SourceFile], cls: str, attribute: str) -> str | None:
    found = init_assignment(files, cls, attribute)
    match = _CONFIG_KEY.search((found.keyword("bias") or "") if found else "")
    return match.group(1) if match else None


def _refused(projector: Any, what: str) -> ProjectorReading:
    where = source_location(type(projector).forward) or type(projector).__name__
    return ProjectorReading(
        None,
        (),
        (
            Delta(
                f"projector {type(projector).__name__} holds {what}",
                where,
                "onboard reads projectors made of linears, layer norms and activations so far",
            ),
        ),
    )
