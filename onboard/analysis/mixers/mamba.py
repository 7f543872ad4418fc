"""Mamba (the first) mixers, read from a tiny layer and computed for the spec check.

Recognised by structure: a two-dimensional ``A_log`` (channels x state), ``D`` per channel, a
depthwise ``Conv1d`` and the ``in_proj``, ``x_proj``, ``dt_proj`` and ``out_proj`` linears, with
Jamba's RMS norms of dt, B and C when the module has them. Sizes come from the shapes, each with
the config key ``__init__`` reads.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from onboard.analysis.mixers.base import (
    MixerKind,
    causal_conv,
    computes,
    config_keys,
    found,
    linear,
    refused,
)
from onboard.analysis.source_lines import init_assignment
from onboard.source import SourceFile
from onboard.spec import Evidence
from onboard.token_mixers import MambaSpec

# spec field -> the mixer attribute HF keeps it in
_ATTRIBUTES = {
    "inner": "intermediate_size",
    "state_size": "ssm_state_size",
    "conv_kernel": "conv_kernel_size",
    "dt_rank": "time_step_rank",
    "activation": "activation",
}
_MEASURED = {
    "conv_bias": ("conv1d", "bias"),
    "proj_bias": ("in_proj", "bias"),
    "norm_eps": ("dt_layernorm", "eps"),
}
_LINEARS = ("in_proj", "x_proj", "dt_proj", "out_proj")
_NORMS = ("dt_layernorm", "b_layernorm", "c_layernorm")


def read(attribute: str, module: Any, config: Any, files: Sequence[SourceFile]) -> Any:
    import torch

    children = dict(module.named_children())
    a_log = getattr(module, "A_log", None)
    if not (
        isinstance(a_log, torch.nn.Parameter)
        and a_log.dim() == 2
        and isinstance(children.get("conv1d"), torch.nn.Conv1d)
        and all(isinstance(children.get(n), torch.nn.Linear) for n in _LINEARS)
    ):
        return None
    inner, state = a_log.shape
    cls = type(module).__name__
    norms = [n for n in _NORMS if n in children]
    if norms and len(norms) != len(_NORMS):
        return refused(f"a Mamba mixer normalising only {', '.join(norms)}", files, cls)
    first = children[norms[0]] if norms else None
    eps = getattr(first, "variance_epsilon", getattr(first, "eps", None))
    learned = isinstance(getattr(first, "weight", None), torch.nn.Parameter)
    spec = MambaSpec(
        inner=int(inner),
        state_size=int(state),
        conv_kernel=int(module.conv1d.kernel_size[0]),
        dt_rank=int(module.dt_proj.in_features),
        conv_bias=module.conv1d.bias is not None,
        proj_bias=module.in_proj.bias is not None,
        activation=str(getattr(module, "activation", "silu")),
        norms=bool(norms),
        norm_eps=float(eps) if eps is not None else None,
        norm_weights=learned or not norms,
        attribute=attribute,
    )
    keys, evidence = config_keys(files, cls, _ATTRIBUTES, _MEASURED)
    spec = dataclasses.replace(spec, keys=keys + _expand_key(files, cls, dict(keys)))
    if not computes(module, spec, compute, spec.conv_kernel, seed=2):
        return refused("a Mamba mixer computing something else", files, cls)
    detail = f"{inner} channels, state {state}, conv {spec.conv_kernel} taps, dt rank "
    detail += f"{spec.dt_rank}" + (", dt/B/C normalised" if norms else "")
    detail += "" if spec.norm_weights else " (weightless)"
    evidence.insert(0, Evidence("probe", f"{attribute} ({cls})", detail))
    return found(spec, evidence, module)


def _expand_key(
    files: Sequence[SourceFile], cls: str, keys: dict[str, str]
) -> tuple[tuple[str, str], ...]:
    """Jamba's width is a product, ``config.mamba_expand * config.hidden_size``: the factor's
    key, recorded as ``expand`` (nothing when one key holds the width)."""
    if "inner" in keys:
        return ()
    found_at = init_assignment(files, cls, _ATTRIBUTES["inner"])
    detail = found_at.evidence.detail if found_at else ""
    match = re.search(r"config\.(\w+)\s*\*\s*config\.hidden_size", detail)
    return (("expand", match.group(1)),) if match else ()


def compute(spec: MambaSpec, weight: Callable[[str], Any], prefix: str, x: Any) -> Any:
    """The mixer over the whole sequence from zero states, one step at a time."""
    import torch
    import torch.nn.functional as F
    from transformers.activations import ACT2FN

    hidden, gate = linear(weight, f"{prefix}in_proj", x, bias=spec.proj_bias).chunk(2, dim=-1)
    kernel = weight(f"{prefix}conv1d.weight")
    bias = weight(f"{prefix}conv1d.bias") if spec.conv_bias else None
    convolved = causal_conv(hidden.transpose(1, 2), kernel, bias, spec.conv_kernel)
    hidden = ACT2FN[spec.activation](convolved).transpose(1, 2)
    projected = linear(weight, f"{prefix}x_proj", hidden, bias=False)
    dt, b, c = projected.split([spec.dt_rank, spec.state_size, spec.state_size], dim=-1)
    if spec.norms:
        dt, b, c = (
            _rms(
                value, weight(f"{prefix}{name}.weight") if spec.norm_weights else 1.0, spec.norm_eps
            )
            for value, name in zip((dt, b, c), _NORMS, strict=True)
        )
    dt = F.softplus(linear(weight, f"{prefix}dt_proj", dt, bias=True))
    a = -torch.exp(weight(f"{prefix}A_log").float())
    state = torch.zeros(x.shape[0], spec.inner, spec.state_size)
    outputs = []
    for t in range(x.shape[1]):
        decay = torch.exp(dt[:, t, :, None] * a)
        state = state * decay + (dt[:, t] * hidden[:, t])[..., None] * b[:, t, None, :]
        outputs.append((state * c[:, t, None, :]).sum(-1))
    y = torch.stack(outputs, dim=1) + hidden * weight(f"{prefix}D")
    return linear(weight, f"{prefix}out_proj", y * F.silu(gate), bias=spec.proj_bias)


KIND = MixerKind("mamba", read, compute)


def _rms(value: Any, scale: Any, eps: float | None) -> Any:
    import torch

    return value * torch.rsqrt(value.pow(2).mean(-1, keepdim=True) + (eps or 1e-6)) * scale
