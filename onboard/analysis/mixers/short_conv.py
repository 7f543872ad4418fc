"""LFM2's gated short convolution, read from a tiny layer and computed for the spec check.

Recognised by structure, whatever the names: a depthwise ``Conv1d`` (one group a channel), a
linear from the hidden states to three times their width and one back. Which third gates before
the convolution, which after and which is convolved, the module's own output decides.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

from onboard.analysis.mixers.base import MixerKind, causal_conv, found, linear
from onboard.analysis.source_lines import init_assignment
from onboard.source import SourceFile
from onboard.spec import Evidence
from onboard.token_mixers import ShortConvSpec

_ORDERS = tuple(itertools.permutations(("b", "c", "x")))


def read(attribute: str, module: Any, config: Any, files: Sequence[SourceFile]) -> Any:
    parts = _parts(module, config.hidden_size)
    if parts is None:
        return None
    in_proj, conv, out_proj = parts
    layer_conv = getattr(module, conv)
    kernel = int(layer_conv.kernel_size[0])
    cls = type(module).__name__
    evidence = [Evidence("probe", f"{attribute} ({cls})", f"{conv}: depthwise, {kernel} taps")]
    kernel_key = _config_key(files, cls, conv, "kernel_size", evidence)
    bias = layer_conv.bias is not None
    bias_key = _config_key(files, cls, conv, "bias", evidence)
    order = _order(module, in_proj, conv, out_proj, kernel)
    if order is None:
        return None
    evidence.append(
        Evidence("probe", f"{attribute}.{in_proj}", f"thirds {', '.join(order)}: c * conv(b * x)")
    )
    spec = ShortConvSpec(
        kernel, kernel_key, bias, bias_key, order, attribute, in_proj, conv, out_proj
    )
    return found(spec, evidence, module)


def compute(spec: ShortConvSpec, weight: Callable[[str], Any], prefix: str, x: Any) -> Any:
    """``out_proj(c * conv(b * x))`` over the whole sequence, from zero state."""

    def project(value: Any, name: str) -> Any:
        return linear(weight, prefix + name, value, bias=spec.bias)

    parts = dict(zip(spec.order, project(x, spec.in_proj).chunk(3, dim=-1), strict=True))
    gated = (parts["b"] * parts["x"]).transpose(1, 2)  # [B, H, S]
    kernel = weight(f"{prefix}{spec.conv}.weight")
    bias = weight(f"{prefix}{spec.conv}.bias") if spec.bias else None
    convolved = causal_conv(gated, kernel, bias, spec.conv_kernel).transpose(1, 2)
    return project(parts["c"] * convolved, spec.out_proj)


KIND = MixerKind("short_conv", read, compute)


def _parts(module: Any, hidden: int) -> tuple[str, str, str] | None:
    """(in_proj, conv, out_proj) by structure; None when the module is not a short conv."""
    import torch

    children = dict(module.named_children())
    convs = [
        n
        for n, c in children.items()
        if isinstance(c, torch.nn.Conv1d) and c.groups == c.in_channels == c.out_channels == hidden
    ]
    linears = {n: c for n, c in children.items() if isinstance(c, torch.nn.Linear)}
    into = [
        n for n, c in linears.items() if (c.in_features, c.out_features) == (hidden, 3 * hidden)
    ]
    out = [n for n, c in linears.items() if (c.in_features, c.out_features) == (hidden, hidden)]
    if len(convs) != 1 or len(into) != 1 or len(out) != 1 or len(children) != 3:
        return None
    return into[0], convs[0], out[0]


def _order(module: Any, in_proj: str, conv: str, out_proj: str, kernel: int) -> Any:
    """The thirds' order with which the spec gives the module's output, or None."""
    import torch

    weights = dict(module.named_parameters())
    hidden = getattr(module, in_proj).in_features
    x = torch.randn(2, 2 * kernel + 3, hidden, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = module(x)
        for order in _ORDERS:
            spec = ShortConvSpec(
                kernel, None, module.get_submodule(conv).bias is not None, None, order,
                in_proj=in_proj, conv=conv, out_proj=out_proj,
            )  # fmt: skip
            got = compute(spec, lambda name: weights[name], "", x)
            if torch.allclose(got, want, atol=1e-5):
                return order
    return None


def _config_key(
    files: Sequence[SourceFile], cls: str, attr: str, keyword: str, evidence: list[Evidence]
) -> str | None:
    """The config key behind ``self.<attr> = X(..., <keyword>=...)``, through one
    ``self.<name> = config.<key>`` if the keyword reads an attribute."""
    found = init_assignment(files, cls, attr)
    value = found.keyword(keyword) if found else None
    if value is None:
        return None
    match = re.fullmatch(r"(?:self\.)?config\.(\w+)", value)
    if match is None and (alias := re.fullmatch(r"self\.(\w+)", value)):
        inner = init_assignment(files, cls, alias.group(1))
        source = inner.evidence.detail if inner else ""
        match = re.search(r"=\s*(?:self\.)?config\.(\w+)\s*$", source)
        if match and inner:
            evidence.append(inner.evidence)
    return match.group(1) if match else None
