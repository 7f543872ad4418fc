"""Read a Pixtral tower from the tiny HF tower module: a bias-free patch convolution, one RMS norm
called before the first layer, a rotary module (buffers, no weights) beside them, and in each
layer two RMS norms, an attention with q/k/v/output linears and a gated three-linear MLP.

What the structure cannot say (that the rotary module is Pixtral's axial 2-D RoPE, which axis
takes which frequencies, that attention is blocked per image) the spec says, and the vision
check proves it on images of two sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onboard.analysis.vision.encoder import (
    child_with_linears,
    encoder_layers,
    forward_call_order,
    rope_tower_evidence,
)
from onboard.analysis.vision.projector import norm_eps, rms_offset
from onboard.block_specs import AttentionSpec, MLPSpec, NormSpec
from onboard.source import SourceFile
from onboard.spec import Evidence
from onboard.vision import PixtralTowerSpec

_SIZE_KEYS = {
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "image_size": "image_size",
    "patch_size": "patch_size",
    "num_channels": "num_channels",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "activation": "hidden_act",
    "head_dim": "head_dim",
}
_QKV = ("q_proj", "k_proj", "v_proj")


class NotPixtral(Exception):
    pass


def read_pixtral(
    tower: Any, config: Any, files: Sequence[SourceFile]
) -> tuple[PixtralTowerSpec, tuple[tuple[str, tuple[Evidence, ...]], ...]]:
    """The spec and its evidence; ``NotPixtral`` says what does not fit."""
    import torch.nn as nn

    convolutions = [(n, m) for n, m in tower.named_modules() if isinstance(m, nn.Conv2d)]
    if len(convolutions) != 1:
        raise NotPixtral(f"{len(convolutions)} patch convolutions")
    patch_name, patch = convolutions[0]
    rope = _rope(tower)
    layers_name = encoder_layers(tower, config.num_hidden_layers, NotPixtral)
    order = forward_call_order(tower, config.num_channels, config.patch_size * 2, NotPixtral)
    first = order.index(f"{layers_name}.0")
    norms = [n for n in order if _is_rms(tower.get_submodule(n))]
    # The tower's own norms: outside the layers, before the first one or after them all
    own = [n for n in norms if not n.startswith(f"{layers_name}.")]
    pre = [n for n in own if order.index(n) < first]
    after = [n for n in own if order.index(n) > first]
    if len(pre) != 1 or after:
        raise NotPixtral(f"RMS norms {pre} before and {after} after the layers")
    layer = tower.get_submodule(f"{layers_name}.0")
    layer_norms = [
        n.removeprefix(f"{layers_name}.0.") for n in norms if n.startswith(f"{layers_name}.0.")
    ]
    if len(layer_norms) != 2:
        raise NotPixtral(f"{len(layer_norms)} RMS norms in an encoder layer")
    attention_name, attention = child_with_linears(layer, 4, "attention", NotPixtral)
    mlp_name, mlp = child_with_linears(layer, 3, "gated MLP", NotPixtral)
    linears = [n for n, m in attention.named_children() if isinstance(m, nn.Linear)]
    if not set(_QKV) <= set(linears):
        raise NotPixtral(f"attention projections {linears}")
    (o_name,) = [n for n in linears if n not in _QKV]
    heads = config.num_attention_heads
    head_dim = config.hidden_size // heads
    rope_dim = getattr(config, "head_dim", None) or head_dim
    if rope_dim != head_dim or head_dim % 4:
        raise NotPixtral(f"RoPE over head_dim {rope_dim} for heads of {head_dim}")
    spec = PixtralTowerSpec(
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        image_size=config.image_size,
        patch_size=config.patch_size,
        num_channels=config.num_channels,
        head_dim=head_dim,
        rope_theta=float(config.rope_parameters["rope_theta"]),
        attention=AttentionSpec(
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=head_dim,
            q_bias=attention.q_proj.bias is not None,
            k_bias=attention.k_proj.bias is not None,
            v_bias=attention.v_proj.bias is not None,
            o_bias=getattr(attention, o_name).bias is not None,
            qk_norm="none",
            scale=float(getattr(attention, "scaling", head_dim**-0.5)),
        ),
        mlp=_gated_mlp(mlp, config),
        norm=NormSpec(
            kind="rms",
            eps=float(norm_eps(layer.get_submodule(layer_norms[0])) or 0.0),
            weight_offset=0.0,
            placement="pre",
            names=(("attn_in", layer_norms[0]), ("mlp_in", layer_norms[1])),
            eps_key=None,  # HF fixes it (1e-5), no config key
        ),
        names=tuple(
            sorted(
                {
                    "patch": patch_name,
                    "pre_norm": pre[0],
                    "rope": rope,
                    "layers": layers_name,
                    "attention": attention_name,
                    "mlp": mlp_name,
                    "o_proj": o_name,
                }.items()
            )
        ),
        keys=tuple((f, k) for f, k in _SIZE_KEYS.items() if getattr(config, k, None) is not None),
        patch_bias=patch.bias is not None,
    )
    return spec, _evidence(tower, spec, config, files)


def _is_rms(module: Any) -> bool:
    return rms_offset(module) == 0.0


def _rope(tower: Any) -> str:
    """The child that holds RoPE frequencies (``inv_freq``) and no weights."""
    found = [
        n
        for n, m in tower.named_children()
        if "inv_freq" in dict(m.named_buffers()) and not any(True for _ in m.parameters())
    ]
    if len(found) != 1:
        raise NotPixtral(f"{len(found)} rotary modules")
    return found[0]


def _gated_mlp(mlp: Any, config: Any) -> MLPSpec:
    """gate, up, down: down reads the intermediate width; the gate is the one named so."""
    import torch.nn as nn

    linears = {n: m for n, m in mlp.named_children() if isinstance(m, nn.Linear)}
    down = [n for n, m in linears.items() if m.in_features == config.intermediate_size]
    gate = [n for n in linears if "gate" in n and n not in down]
    if len(down) != 1 or len(gate) != 1:
        raise NotPixtral(f"a three-linear MLP {sorted(linears)} without one gate and one down")
    (up,) = [n for n in linears if n not in down + gate]
    return MLPSpec(
        kind="gated",
        activation=config.hidden_act,
        bias=linears[up].bias is not None,
        intermediate_size=config.intermediate_size,
        projections=(gate[0], up, down[0]),
    )


def _evidence(
    tower: Any, spec: PixtralTowerSpec, config: Any, files: Sequence[SourceFile]
) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    found = rope_tower_evidence(tower, spec.keys, spec.rope_theta, spec.names, config)
    return tuple(found)
