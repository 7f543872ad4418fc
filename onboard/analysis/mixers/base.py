"""What every recurrent mixer kind provides to the analysis."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.source_lines import find_line, init_assignment
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


def found(spec: Any, evidence: Sequence[Evidence], module: Any) -> MixerReading:
    """A reading that explains every parameter of ``module``."""
    return MixerReading(spec, tuple(evidence), tuple(n for n, _ in module.named_parameters()))


def linear(weight: Callable[[str], Any], name: str, value: Any, *, bias: bool) -> Any:
    """``value`` through the linear whose checkpoint tensors are ``<name>.weight`` / ``.bias``."""
    import torch.nn.functional as F

    return F.linear(value, weight(f"{name}.weight"), weight(f"{name}.bias") if bias else None)


def causal_conv(value: Any, kernel: Any, bias: Any, taps: int) -> Any:
    """A depthwise causal convolution of ``value`` ``[B, channels, S]`` from zero history, over
    the ``taps`` inputs the spec says (a kernel of another size then fails the check)."""
    import torch.nn.functional as F

    padded = F.pad(value, (taps - 1, 0))
    return F.conv1d(padded, kernel, bias, groups=kernel.shape[0])


def config_keys(
    files: Sequence[SourceFile],
    cls: str,
    attributes: Mapping[str, str],
    measured: Mapping[str, tuple[str, str]] = {},
) -> tuple[tuple[tuple[str, str], ...], list[Evidence]]:
    """(spec field, config key) for each field ``cls.__init__`` reads from the config, with the
    evidence: ``self.<attribute> = config.<key>`` for ``attributes`` (field -> attribute), or a
    sub-module's keyword (``bias=config.use_bias``, through one ``self.<name> = config.<key>``)
    for ``measured`` (field -> (sub-module, keyword))."""
    keys, evidence = [], []
    for field, name in attributes.items():
        found_at = init_assignment(files, cls, name)
        key = _key_in(found_at.evidence.detail) if found_at else None
        if key:
            keys.append((field, key))
            evidence.append(found_at.evidence)
    for field, (child, keyword) in measured.items():
        found_at = init_assignment(files, cls, child)
        value = (found_at.keyword(keyword) or "") if found_at else ""
        alias = re.fullmatch(r"self\.(\w+)", value)
        inner = init_assignment(files, cls, alias.group(1)) if alias else None
        key = _key_in(inner.evidence.detail) if inner else _key_in(f"= {value}")
        if key:
            keys.append((field, key))
            evidence.append((inner or found_at).evidence)
    return tuple(keys), evidence


def _key_in(assignment: str) -> str | None:
    """``key`` in ``... = config.key`` (or ``int(config.key)``, a tuple's first item); None when
    the value is computed from it (Jamba's ``config.mamba_expand * config.hidden_size``)."""
    match = re.search(r"=\s*\(?(?:int\()?(?:self\.)?config\.(\w+)", assignment)
    if match is None or re.search(r"[*/+]|\s-\s", assignment[match.end() :]):
        return None
    return match.group(1)


def refused(what: str, files: Sequence[SourceFile], cls: str) -> MixerReading:
    """A module with a kind's parameters that the spec does not describe: a delta at its class."""
    where = find_line(files, rf"^class {cls}\b")
    return MixerReading(None, (), (), (Delta(what, where.where if where else cls, cls),))


def computes(module: Any, spec: Any, compute: Callable[..., Any], taps: int, seed: int) -> bool:
    """The spec's computation gives the module's output on a prompt longer than its kernel
    (``taps``); a module that cannot run alone (it needs a cache) is not read."""
    import torch

    weights = dict(module.named_parameters())
    width = getattr(module, "hidden_size", None) or module.in_proj.in_features
    x = torch.randn(2, 2 * taps + 3, width, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        try:
            want = module(x)
        except Exception:
            return False
        got = compute(spec, lambda name: weights[name], "", x)
    return bool(torch.allclose(got, want, atol=1e-4))
