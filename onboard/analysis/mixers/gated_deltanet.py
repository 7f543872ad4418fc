"""Gated DeltaNet mixers (Qwen3-Next, Qwen3.5), read from a tiny layer and computed for the check.

Recognised by structure: per-value-head ``A_log`` and ``dt_bias`` without Mamba's ``D``, a
depthwise ``Conv1d`` over q, k and v, the projections to q, k, v, z, b and a (fused per key
head, or one linear each), a gated norm over each head and ``out_proj``. The sizes are the
module's own attributes (``num_k_heads``, ``head_v_dim`` ...), each with the config key its
``__init__`` reads. The L2 norm's epsilon is HF's fixed one; the spec check runs the layer on
a prompt longer than the convolution, which HF computes with its chunked rule.
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
from onboard.analysis.source_lines import find_line
from onboard.source import SourceFile
from onboard.spec import Evidence
from onboard.token_mixers import GatedDeltaNetSpec

# spec field -> the mixer attribute HF keeps it in
_ATTRIBUTES = {
    "key_heads": "num_k_heads",
    "value_heads": "num_v_heads",
    "key_head_dim": "head_k_dim",
    "value_head_dim": "head_v_dim",
    "conv_kernel": "conv_kernel_size",
    "activation": "activation",
    "norm_eps": "layer_norm_epsilon",
}
_PARAMETERS = ("A_log", "dt_bias")
# the projections of each layout, first to last
PROJECTIONS = {
    "grouped": ("in_proj_qkvz", "in_proj_ba"),
    "separate": ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"),
}
# HF's l2norm(x, dim=-1, eps=1e-6), the epsilon its gated delta rules pass
_L2_EPS = 1e-6


def read(attribute: str, module: Any, config: Any, files: Sequence[SourceFile]) -> Any:
    import torch

    children = dict(module.named_children())
    own = dict(module.named_parameters(recurse=False))
    convs = [n for n, c in children.items() if isinstance(c, torch.nn.Conv1d)]
    if not set(_PARAMETERS) <= set(own) or "D" in own or len(convs) != 1:
        return None
    layout = next((k for k, names in PROJECTIONS.items() if set(names) <= set(children)), None)
    if layout is None:
        return None
    cls = type(module).__name__
    values = {field: getattr(module, name, None) for field, name in _ATTRIBUTES.items()}
    missing = [field for field, value in values.items() if value is None]
    if missing:
        return refused(f"a gated DeltaNet mixer without {', '.join(missing)}", files, cls)
    keys, evidence = config_keys(files, cls, _ATTRIBUTES)
    spec = GatedDeltaNetSpec(
        key_heads=int(values["key_heads"]),
        value_heads=int(values["value_heads"]),
        key_head_dim=int(values["key_head_dim"]),
        value_head_dim=int(values["value_head_dim"]),
        conv_kernel=int(values["conv_kernel"]),
        conv_bias=module.conv1d.bias is not None,
        activation=str(values["activation"]),
        norm_eps=float(values["norm_eps"]),
        l2_eps=_L2_EPS,
        projections=layout,
        keys=keys,
        attribute=attribute,
    )
    if not _fits(module, spec):
        return refused("a gated DeltaNet mixer under other names or sizes", files, cls)
    if not computes(module, spec, compute, spec.conv_kernel, seed=2):
        return refused("a gated DeltaNet mixer computing something else", files, cls)
    l2 = find_line(files, r"^def l2norm\(")
    if l2 is not None:
        evidence.append(Evidence("source", l2.where, f"q and k L2-normalised, eps {_L2_EPS}"))
    evidence.insert(
        0,
        Evidence(
            "probe",
            f"{attribute} ({cls})",
            f"{spec.key_heads} key heads of {spec.key_head_dim}, {spec.value_heads} value heads "
            f"of {spec.value_head_dim}, conv {spec.conv_kernel} taps, {layout} projections",
        ),
    )
    return found(spec, evidence, module)


def compute(spec: GatedDeltaNetSpec, weight: Callable[[str], Any], prefix: str, x: Any) -> Any:
    """The mixer over the whole sequence from zero states, one step at a time."""
    import torch
    import torch.nn.functional as F
    from transformers.activations import ACT2FN

    batch, steps, _ = x.shape
    q, k, v, z, b, a = projected(spec, weight, prefix, x)
    kernel = weight(f"{prefix}conv1d.weight")
    bias = weight(f"{prefix}conv1d.bias") if spec.conv_bias else None
    qkv = torch.cat([q, k, v], dim=-1).transpose(1, 2)
    qkv = ACT2FN[spec.activation](causal_conv(qkv, kernel, bias, spec.conv_kernel))
    q, k, v = qkv.transpose(1, 2).split([spec.key_dim, spec.key_dim, spec.value_dim], -1)
    repeat = spec.value_heads // spec.key_heads

    def heads(value: Any, count: int) -> Any:
        return value.reshape(batch, steps, count, -1)

    q = l2_normalised(heads(q, spec.key_heads), spec.l2_eps).repeat_interleave(repeat, dim=2)
    k = l2_normalised(heads(k, spec.key_heads), spec.l2_eps).repeat_interleave(repeat, dim=2)
    q = q * spec.key_head_dim**-0.5
    v = heads(v, spec.value_heads)
    beta = torch.sigmoid(b)
    g = -torch.exp(weight(f"{prefix}A_log").float()) * F.softplus(a + weight(f"{prefix}dt_bias"))
    state = torch.zeros(batch, spec.value_heads, spec.key_head_dim, spec.value_head_dim)
    outputs = []
    for t in range(steps):
        state = state * torch.exp(g[:, t])[..., None, None]
        remembered = (state * k[:, t, :, :, None]).sum(-2)
        update = (v[:, t] - remembered) * beta[:, t, :, None]
        state = state + k[:, t, :, :, None] * update[:, :, None, :]
        outputs.append((state * q[:, t, :, :, None]).sum(-2))
    y = torch.stack(outputs, dim=1)
    y = gated_head_norm(y, heads(z, spec.value_heads), weight(f"{prefix}norm.weight"), spec)
    return linear(weight, f"{prefix}out_proj", y.reshape(batch, steps, -1), bias=False)


def projected(spec: GatedDeltaNetSpec, weight: Callable[[str], Any], prefix: str, x: Any) -> Any:
    """q, k, v, z ``[B, S, width]`` and b, a ``[B, S, value_heads]`` from the projections."""
    if spec.projections == "separate":
        qkv, z, b, a = (linear(weight, prefix + n, x, bias=False) for n in PROJECTIONS["separate"])
        q, k, v = qkv.split([spec.key_dim, spec.key_dim, spec.value_dim], dim=-1)
        return q, k, v, z, b, a
    batch, steps, _ = x.shape
    qkvz, ba = (linear(weight, prefix + n, x, bias=False) for n in PROJECTIONS["grouped"])
    repeat = spec.value_heads // spec.key_heads
    widths = [spec.key_head_dim, spec.key_head_dim] + [repeat * spec.value_head_dim] * 2
    q, k, v, z = qkvz.view(batch, steps, spec.key_heads, -1).split(widths, dim=-1)
    b, a = ba.view(batch, steps, spec.key_heads, -1).split([repeat, repeat], dim=-1)
    return (
        *(t.reshape(batch, steps, -1) for t in (q, k, v, z)),
        b.reshape(batch, steps, -1),
        a.reshape(batch, steps, -1),
    )


def l2_normalised(value: Any, eps: float) -> Any:
    import torch

    return value * torch.rsqrt((value * value).sum(-1, keepdim=True) + eps)


def gated_head_norm(y: Any, z: Any, scale: Any, spec: GatedDeltaNetSpec) -> Any:
    """RMS norm of each head's ``y``, scaled, then gated by ``silu(z)``."""
    import torch
    import torch.nn.functional as F

    normed = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + spec.norm_eps)
    return normed * scale * F.silu(z)


KIND = MixerKind("gated_deltanet", read, compute)


def _fits(module: Any, spec: GatedDeltaNetSpec) -> bool:
    """HF's names at the sizes the spec says."""
    import torch

    children = dict(module.named_children())
    widths = {
        "in_proj_qkvz": 2 * spec.key_dim + 2 * spec.value_dim,
        "in_proj_ba": 2 * spec.value_heads,
        "in_proj_qkv": spec.conv_dim,
        "in_proj_z": spec.value_dim,
        "in_proj_b": spec.value_heads,
        "in_proj_a": spec.value_heads,
    }
    conv, out_proj = children.get("conv1d"), children.get("out_proj")
    return (
        all(
            isinstance(children[name], torch.nn.Linear)
            and children[name].out_features == widths[name]
            and children[name].bias is None
            for name in PROJECTIONS[spec.projections]
        )
        and isinstance(conv, torch.nn.Conv1d)
        and conv.in_channels == spec.conv_dim
        and isinstance(out_proj, torch.nn.Linear)
        and out_proj.in_features == spec.value_dim
        and out_proj.bias is None
        and spec.value_heads % spec.key_heads == 0
    )
