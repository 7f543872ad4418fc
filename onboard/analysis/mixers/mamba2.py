"""Mamba-2 (SSD) mixers, read from a tiny layer and computed for the spec check.

Recognised by structure: per-head ``A_log``, ``D`` and ``dt_bias``, a depthwise ``Conv1d`` over
``xBC``, a linear from the hidden states to ``z, xBC, dt`` and one back, and a gated norm. The
sizes are the module's own attributes (HF's Mamba-2 mixers share their names: ``num_heads``,
``head_dim``, ``ssm_state_size``, ``n_groups`` ...), each with the config key its ``__init__``
reads; whether the norm spans every channel or each group, the module's values decide.
"""

from __future__ import annotations

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
from onboard.token_mixers import Mamba2Spec

# spec field -> the mixer attribute HF keeps it in (the ones HF's Mamba-2 mixers all have)
_ATTRIBUTES = {
    "num_heads": "num_heads",
    "head_dim": "head_dim",
    "state_size": "ssm_state_size",
    "groups": "n_groups",
    "conv_kernel": "conv_kernel_size",
    "activation": "activation",
    "time_step_limit": "time_step_limit",
}
# spec field -> (sub-module, keyword of its constructor) for what is measured on a sub-module
_MEASURED = {
    "conv_bias": ("conv1d", "bias"),
    "proj_bias": ("in_proj", "bias"),
    "norm_eps": ("norm", "eps"),
}
_PARAMETERS = ("A_log", "D", "dt_bias")


def read(attribute: str, module: Any, config: Any, files: Sequence[SourceFile]) -> Any:
    import torch

    children = dict(module.named_children())
    own = dict(module.named_parameters(recurse=False))
    convs = [n for n, c in children.items() if isinstance(c, torch.nn.Conv1d)]
    if not set(_PARAMETERS) <= set(own) or len(convs) != 1:
        return None
    cls = type(module).__name__
    values = {field: getattr(module, name, None) for field, name in _ATTRIBUTES.items()}
    values |= _measured(module)
    missing = [field for field, value in values.items() if value is None]
    if missing:
        return refused(f"a Mamba-2 mixer without {', '.join(missing)}", files, cls)
    keys, evidence = config_keys(files, cls, _ATTRIBUTES, _MEASURED)
    if any(k == "time_step_limit" for k, _ in keys) and _from_min(files, cls):
        keys = tuple(("time_step_min" if k == "time_step_limit" else k, v) for k, v in keys)
    norm_groups = _norm_groups(module, values)
    if norm_groups is None:
        return None
    limit = tuple(float(v) for v in values["time_step_limit"])
    spec = Mamba2Spec(
        num_heads=int(values["num_heads"]),
        head_dim=int(values["head_dim"]),
        state_size=int(values["state_size"]),
        groups=int(values["groups"]),
        conv_kernel=int(values["conv_kernel"]),
        conv_bias=bool(values["conv_bias"]),
        proj_bias=bool(values["proj_bias"]),
        activation=str(values["activation"]),
        norm_eps=float(values["norm_eps"]),
        norm_groups=norm_groups,
        time_step_limit=(limit[0], None if limit[1] == float("inf") else limit[1]),
        keys=keys,
        attribute=attribute,
    )
    if not _fits(module, spec):
        return refused("a Mamba-2 mixer under other names or sizes", files, cls)
    if not computes(module, spec, compute, spec.conv_kernel, seed=1):
        return refused("a Mamba-2 mixer computing something else", files, cls)
    evidence.insert(
        0,
        Evidence(
            "probe",
            f"{attribute} ({cls})",
            f"{spec.num_heads} heads of {spec.head_dim}, state {spec.state_size}, "
            f"{spec.groups} group(s), conv {spec.conv_kernel} taps, norm over "
            f"{'every channel' if norm_groups == 1 else f'{norm_groups} groups'}",
        ),
    )
    return found(spec, evidence, module)


def compute(spec: Mamba2Spec, weight: Callable[[str], Any], prefix: str, x: Any) -> Any:
    """The mixer over the whole sequence from zero states, one step at a time."""
    import torch
    import torch.nn.functional as F
    from transformers.activations import ACT2FN

    def project(value: Any, name: str) -> Any:
        return linear(weight, prefix + name, value, bias=spec.proj_bias)

    batch, steps, _ = x.shape
    heads, dim, state, groups = spec.num_heads, spec.head_dim, spec.state_size, spec.groups
    z, xbc, dt = project(x, "in_proj").split([spec.inner, spec.conv_dim, heads], dim=-1)
    kernel = weight(f"{prefix}conv1d.weight")
    bias = weight(f"{prefix}conv1d.bias") if spec.conv_bias else None
    xbc = ACT2FN[spec.activation](causal_conv(xbc.transpose(1, 2), kernel, bias, spec.conv_kernel))
    hidden, b, c = xbc.transpose(1, 2).split([spec.inner, groups * state, groups * state], -1)
    dt = F.softplus(dt + weight(f"{prefix}dt_bias"))
    low, high = spec.time_step_limit
    dt = dt.clamp(min=low, max=high if high is not None else float("inf"))
    a = -torch.exp(weight(f"{prefix}A_log").float())
    per_group = heads // groups
    b = b.view(batch, steps, groups, state).repeat_interleave(per_group, dim=2)
    c = c.view(batch, steps, groups, state).repeat_interleave(per_group, dim=2)
    hidden = hidden.view(batch, steps, heads, dim)
    ssm = torch.zeros(batch, heads, dim, state)
    outputs = []
    for t in range(steps):
        decay = torch.exp(dt[:, t] * a)[:, :, None, None]
        ssm = ssm * decay + (dt[:, t, :, None] * hidden[:, t])[..., None] * b[:, t, :, None, :]
        outputs.append((ssm * c[:, t, :, None, :]).sum(-1))
    y = torch.stack(outputs, dim=1) + hidden * weight(f"{prefix}D")[:, None]
    y = gated_norm(y.reshape(batch, steps, -1), z, weight(f"{prefix}norm.weight"), spec)
    return project(y, "out_proj")


def gated_norm(y: Any, z: Any, scale: Any, spec: Mamba2Spec) -> Any:
    """RMS norm of ``y * silu(z)`` within ``spec.norm_groups`` groups of channels."""
    import torch
    import torch.nn.functional as F

    gated = y * F.silu(z)
    grouped = gated.view(*gated.shape[:-1], spec.norm_groups, -1)
    normed = grouped * torch.rsqrt(grouped.pow(2).mean(-1, keepdim=True) + spec.norm_eps)
    return normed.view_as(gated) * scale


KIND = MixerKind("mamba2", read, compute)


def _measured(module: Any) -> dict[str, Any]:
    norm = getattr(module, "norm", None)
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    return {
        "conv_bias": getattr(getattr(module, "conv1d", None), "bias", None) is not None,
        "proj_bias": getattr(getattr(module, "in_proj", None), "bias", None) is not None,
        "norm_eps": eps,
    }


def _norm_groups(module: Any, values: dict[str, Any]) -> int | None:
    """1 or the group count: whichever makes the spec's gated norm give the module's norm."""
    import torch

    norm = getattr(module, "norm", None)
    if norm is None or getattr(norm, "weight", None) is None:
        return None
    width = int(values["num_heads"]) * int(values["head_dim"])
    generator = torch.Generator().manual_seed(0)
    y, z = (
        torch.randn(2, 3, width, generator=generator),
        torch.randn(2, 3, width, generator=generator),
    )
    with torch.no_grad():
        want = norm(y, z)
        for groups in dict.fromkeys((1, int(values["groups"]))):
            spec = Mamba2Spec(1, width, 1, 1, 1, False, False, "silu",
                              float(values["norm_eps"]), groups)  # fmt: skip
            if torch.allclose(gated_norm(y, z, norm.weight, spec), want, atol=1e-5):
                return groups
    return None


def _fits(module: Any, spec: Mamba2Spec) -> bool:
    """HF's Mamba-2 names (in_proj, conv1d, norm, out_proj) at the sizes the spec says."""
    import torch

    children = dict(module.named_children())
    in_proj, out_proj = children.get("in_proj"), children.get("out_proj")
    conv = children.get("conv1d")
    return (
        isinstance(in_proj, torch.nn.Linear)
        and isinstance(out_proj, torch.nn.Linear)
        and isinstance(conv, torch.nn.Conv1d)
        and in_proj.out_features == spec.inner + spec.conv_dim + spec.num_heads
        and conv.in_channels == spec.conv_dim
        and out_proj.in_features == spec.inner
    )


def _from_min(files: Sequence[SourceFile], cls: str) -> bool:
    """NemotronH's limit is ``(config.time_step_min, inf)``: its key is the lower bound's."""
    assignment = init_assignment(files, cls, "time_step_limit")
    return assignment is not None and "inf" in assignment.evidence.detail
