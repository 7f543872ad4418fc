"""A perceiver resampler computed from its spec in torch, and what HF's received and returned,
for the vision check: the resampler's input (after the steps before it: Idefics 2's modality
projection), each layer's output on HF's own input, and the resampler's output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onboard.vision import PerceiverSpec


@dataclass(frozen=True)
class PerceiverCapture:
    context: Any  # [images, patches, hidden]: what the resampler received
    mask: Any  # the mask HF handed it with the context ([images, patches])
    layers: tuple[tuple[Any, Any, Any], ...]  # each layer's (latents, context) and output
    output: Any


def capture_perceiver(projector: Any, name: str, inputs: tuple[Any, ...]) -> PerceiverCapture:
    """Run HF's projector on ``inputs`` (what the VLM called it with) and keep what its
    resampler at ``name`` and each of its layers received and returned."""
    import torch

    resampler = projector.get_submodule(name)
    kept: dict[str, Any] = {}
    layers: dict[int, tuple[Any, Any, Any]] = {}

    def keep(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        given = dict(zip(("context", "attention_mask"), args, strict=False)) | kwargs
        kept.update(context=given["context"], mask=given.get("attention_mask"), output=out)

    def keep_layer(index: int) -> Callable[..., None]:
        def hook(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
            given = list(args) + [kwargs[k] for k in ("latents", "context") if k in kwargs]
            layers[index] = (given[0], given[1], out)

        return hook

    layer_list = _layers(resampler)
    handles = [resampler.register_forward_hook(keep, with_kwargs=True)]
    handles += [
        layer.register_forward_hook(keep_layer(i), with_kwargs=True)
        for i, layer in enumerate(layer_list)
    ]
    try:
        with torch.no_grad():
            projector(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return PerceiverCapture(
        kept["context"],
        kept["mask"],
        tuple(layers[i] for i in range(len(layer_list))),
        kept["output"],
    )


def _layers(resampler: Any) -> list[Any]:
    import torch.nn as nn

    return next(c for c in resampler.children() if isinstance(c, nn.ModuleList))


def run_perceiver(
    spec: PerceiverSpec, name: str, weight: Callable[[str], Any], context: Any
) -> Any:
    """``[images, patches, hidden]`` -> ``[images, latents, hidden]``; ``weight`` gives the
    projector's tensors, the resampler's under ``name``."""
    latents = weight(f"{name}.{spec.name_of('latents')}")
    latents = latents[None].expand(context.shape[0], -1, -1)
    for index in range(spec.depth):
        latents = run_perceiver_layer(spec, name, weight, index, latents, context)
    return _rms(latents, weight(f"{name}.{spec.name_of('norm')}.weight"), spec.eps)


def run_perceiver_layer(
    spec: PerceiverSpec,
    name: str,
    weight: Callable[[str], Any],
    index: int,
    latents: Any,
    context: Any,
) -> Any:
    """One layer: the normed latents attend over the normed context and latents, then the
    gated MLP, each with its residual."""
    import torch

    layer = f"{name}.{spec.name_of('layers')}.{index}"

    def w(role: str, leaf: str = "weight", inside: str = "") -> Any:
        middle = f"{spec.name_of(inside)}." if inside else ""
        return weight(f"{layer}.{middle}{spec.name_of(role)}.{leaf}")

    normed = _rms(latents, w("latents_norm"), spec.eps)
    keys_in = torch.cat([_rms(context, w("context_norm"), spec.eps), normed], dim=-2)
    attended = _attention(spec, w, normed, keys_in)
    latents = latents + attended
    x = _rms(latents, w("post_norm"), spec.eps)
    return latents + _mlp(spec, w, x)


def _attention(spec: PerceiverSpec, w: Callable[..., Any], queries: Any, keys_in: Any) -> Any:
    import torch.nn.functional as F

    batch, rows, _ = queries.shape
    length = keys_in.shape[1]
    d = spec.head_dim
    q = F.linear(queries, w("q_proj", inside="attention"))
    k = F.linear(keys_in, w("k_proj", inside="attention"))
    v = F.linear(keys_in, w("v_proj", inside="attention"))
    q = q.view(batch, rows, spec.num_heads, d).transpose(1, 2)
    groups = spec.num_heads // spec.num_kv_heads
    k = k.view(batch, length, spec.num_kv_heads, d).transpose(1, 2)
    v = v.view(batch, length, spec.num_kv_heads, d).transpose(1, 2)
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-1, -2)) * d**-0.5
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, rows, spec.num_heads * d)
    return F.linear(out, w("o_proj", inside="attention"))


def _mlp(spec: PerceiverSpec, w: Callable[..., Any], x: Any) -> Any:
    import torch.nn.functional as F
    from transformers.activations import ACT2FN

    gate = ACT2FN[spec.activation](F.linear(x, w("gate", inside="mlp")))
    return F.linear(gate * F.linear(x, w("up", inside="mlp")), w("down", inside="mlp"))


def _rms(x: Any, weight: Any, eps: float) -> Any:
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
