"""What every recurrent mixer kind provides to the analysis."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onboard.source import SourceFile
from onboard.spec import Delta, Evidence


@dataclass(frozen=True)
class MixerReading:
    """A mixer's spec as read from one tiny HF layer, with what backs it."""

    spec: Any  # the kind's frozen dataclass (onboard.token_mixers); None: refused, see deltas
    evidence: tuple[Evidence, ...]
    parameters: tuple[str, ...]  # the mixer's parameter names (relative to it) the spec explains
    deltas: tuple[Delta, ...] = ()


@dataclass(frozen=True)
class MixerKind:
    """``read(attribute, module, config, files)`` gives the reading, or None when the module is
    not of this kind; ``compute(spec, weights, prefix, x)`` runs the spec on ``[B, S, H]``
    inputs with the checkpoint tensors under ``prefix`` (the mixer's dotted name and a dot)."""

    name: str  # the TokenMixers field
    read: Callable[[str, Any, Any, Sequence[SourceFile]], MixerReading | None]
    compute: Callable[[Any, Callable[[str], Any], str, Any], Any]
