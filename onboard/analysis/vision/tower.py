"""Read a ViT tower (CLIP, SigLIP and their copies) from the tiny HF tower module.

The structure is read from what the module holds and the order it calls its parts in: one patch
convolution, a class token and a position table beside it, norms called before the first layer
(pre) or after the last (post), and in each layer two norms, an attention with q/k/v/output
linears and a two-linear MLP. Sizes come from ``vision_config`` with their keys. A tower that
is not a ViT of this kind is read as Pixtral's (``pixtral.py``: no position table, 2-D RoPE);
one that is neither is refused at the tower's class line, so no generator emits a tower it
would get wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.source_lines import init_assignment
from onboard.analysis.vision.encoder import (
    child_with_linears,
    encoder_layers,
    forward_call_order,
)
from onboard.analysis.vision.pixtral import NotPixtral, read_pixtral
from onboard.block_specs import AttentionSpec, MLPSpec, NormSpec
from onboard.source import SourceFile
from onboard.spec import Delta, Evidence
from onboard.tiny_vision import square_side
from onboard.vision import TowerSpec, VitTowerSpec

_SIZE_KEYS = {
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "image_size": "image_size",
    "patch_size": "patch_size",
    "num_channels": "num_channels",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "activation": "hidden_act",
    "norm_eps": "layer_norm_eps",
}
_QKV = ("q_proj", "k_proj", "v_proj")


@dataclass(frozen=True)
class TowerReading:
    spec: TowerSpec | None
    evidence: tuple[tuple[str, tuple[Evidence, ...]], ...]
    deltas: tuple[Delta, ...] = ()


def read_tower(tower: Any, config: Any, files: Sequence[SourceFile]) -> TowerReading:
    """The tower as a ViT, else as Pixtral's; neither: one delta at the tower's forward that
    says why it is neither."""
    try:
        return _read(tower, config, files)
    except _NotVit as not_vit:
        try:
            spec, evidence = read_pixtral(tower, config, files)
            return TowerReading(spec, evidence)
        except NotPixtral as not_pixtral:
            where = source_location(type(tower).forward) or type(tower).__name__
            what = (
                f"vision tower {type(tower).__name__} is not a ViT onboard reads ({not_vit}) "
                f"nor a Pixtral tower ({not_pixtral})"
            )
            return TowerReading(None, (), (Delta(what, where, _SUPPORTED),))


_SUPPORTED = (
    "onboard reads ViT towers with a patch convolution and learned positions (CLIP, SigLIP) "
    "and Pixtral's (2-D RoPE, RMS norms, gated MLP) so far"
)


class _NotVit(Exception):
    pass


def _read(tower: Any, config: Any, files: Sequence[SourceFile]) -> TowerReading:
    import torch.nn as nn

    patch_name, patch = _only(tower, nn.Conv2d, "patch convolution")
    embeddings_name = _embeddings_of(tower, patch_name, config.hidden_size)
    embeddings = tower.get_submodule(embeddings_name) if embeddings_name else tower
    class_name, positions_name, table_parameters = _embedding_parts(embeddings, config.hidden_size)
    layers_name = encoder_layers(tower, config.num_hidden_layers, _NotVit)
    order = _call_order(tower, config)
    # The tower's own norms; a pooling head's (SigLIP's head.layernorm) are the head's
    norms = [n for n in order if n and "." not in n]
    first = order.index(f"{layers_name}.0")
    last = order.index(f"{layers_name}.{config.num_hidden_layers - 1}")
    pre = [n for n in norms if order.index(n) < first]
    post = [n for n in norms if order.index(n) > last]
    if len(pre) > 1 or len(post) > 1:
        raise _NotVit(f"norms {pre} before and {post} after the layers")
    head = _pooling_head(tower, order, embeddings_name, layers_name, norms)
    layer = tower.get_submodule(f"{layers_name}.0")
    attention_name, attention = child_with_linears(layer, 4, "attention", _NotVit)
    mlp_name, mlp = child_with_linears(layer, 2, "MLP", _NotVit)
    layer_norms = [n for n, m in layer.named_children() if isinstance(m, nn.LayerNorm)]
    if len(layer_norms) != 2:
        raise _NotVit(f"{len(layer_norms)} norms in an encoder layer")
    linears = [n for n, m in attention.named_children() if isinstance(m, nn.Linear)]
    if not set(_QKV) <= set(linears):
        raise _NotVit(f"attention projections {linears}")
    others = [n for n, m in attention.named_children() if n not in linears and _has_weights(m)]
    if others:  # InternViT's q_norm / k_norm (use_qk_norm)
        raise _NotVit(f"attention modules {others} besides its linears")
    scales = _layer_scales(layer, config.hidden_size)
    (o_name,) = [n for n in linears if n not in _QKV]
    fc = [n for n, m in mlp.named_children() if isinstance(m, nn.Linear)]
    heads = config.num_attention_heads
    head_dim = config.hidden_size // heads
    norm_module = layer.get_submodule(layer_norms[0])
    attention_spec = AttentionSpec(
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=head_dim,
        q_bias=attention.q_proj.bias is not None,
        k_bias=attention.k_proj.bias is not None,
        v_bias=attention.v_proj.bias is not None,
        o_bias=getattr(attention, o_name).bias is not None,
        qk_norm="none",
        scale=float(getattr(attention, "scale", head_dim**-0.5)),
    )
    up = getattr(mlp, fc[0])
    mlp_spec = MLPSpec(
        kind="plain",
        activation=config.hidden_act,
        bias=up.bias is not None,
        intermediate_size=up.out_features,
        projections=tuple(fc),
        width_expr="config.intermediate_size",
    )
    norm_spec = NormSpec(
        kind="layer",
        eps=float(norm_module.eps),
        weight_offset=0.0,
        placement="pre",
        names=(("attn_in", layer_norms[0]), ("mlp_in", layer_norms[1])),
        eps_key="layer_norm_eps",
        bias=norm_module.bias is not None,
    )
    names = {
        "patch": patch_name,
        "positions": f"{_dotted(embeddings_name)}{positions_name}",
        "layers": layers_name,
        "attention": attention_name,
        "mlp": mlp_name,
        "o_proj": o_name,
    }
    if class_name:
        names["class_embedding"] = f"{_dotted(embeddings_name)}{class_name}"
    if pre:
        names["pre_norm"] = pre[0]
    if post:
        names["post_norm"] = post[0]
    if head:
        names["head"] = head
    if scales:
        names.update(attn_scale=scales[0], mlp_scale=scales[1])
    spec = VitTowerSpec(
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        image_size=square_side(config.image_size, "image_size"),
        patch_size=square_side(config.patch_size, "patch_size"),
        num_channels=config.num_channels,
        patch_bias=patch.bias is not None,
        class_token=class_name is not None,
        pre_norm=bool(pre),
        post_norm=bool(post),
        attention=attention_spec,
        mlp=mlp_spec,
        norm=norm_spec,
        names=tuple(sorted(names.items())),
        keys=_size_keys(config, mlp_spec.intermediate_size),
        table_parameters=table_parameters,
        layer_scale=bool(scales),
        qkv_bias_key=_bias_key(files, type(attention).__name__),
        sizes_as_pairs=isinstance(config.image_size, list | tuple),
    )
    return TowerReading(spec, _evidence(tower, spec, config, files))


def _size_keys(config: Any, mlp_width: int) -> tuple[tuple[str, str], ...]:
    """Field -> the config key that sizes it; an MLP width the config gives as a ratio of the
    hidden size (Janus' ``mlp_ratio``, which mobius' config resolver reads too) is keyed so."""
    keys = {f: k for f, k in _SIZE_KEYS.items() if hasattr(config, k)}
    ratio = getattr(config, "mlp_ratio", None)
    if "intermediate_size" not in keys and ratio and int(config.hidden_size * ratio) == mlp_width:
        keys["intermediate_size"] = "mlp_ratio"
    return tuple(keys.items())


def _pooling_head(
    tower: Any, order: list[str], embeddings: str, layers: str, norms: list[str]
) -> str | None:
    """A child with weights besides the embeddings, the encoder and the norms: SigLIP's
    attention-pooling head, whose output (pooler_output) no VLM reads. Anything else is not a
    ViT of this kind."""
    parts = {embeddings.split(".")[0], layers.split(".")[0], *norms}
    others = [
        n for n, m in tower.named_children() if n not in parts and any(True for _ in m.parameters())
    ]
    if len(others) > 1:
        raise _NotVit(f"modules {others} besides the encoder")
    return others[0] if others else None


def _only(module: Any, kind: type, what: str) -> tuple[str, Any]:
    found = [(n, m) for n, m in module.named_modules() if isinstance(m, kind)]
    if len(found) != 1:
        raise _NotVit(f"{len(found)} modules that could be its {what}")
    return found[0]


def _embeddings_of(tower: Any, patch: str, hidden: int) -> str:
    """The module that holds the position table beside the patch convolution: the
    convolution's parent (CLIP's, SigLIP's embeddings) or one further up (InternViT's
    embeddings hold the table, their patch_embeddings the convolution)."""
    import torch.nn as nn

    name = patch.rpartition(".")[0]
    while True:
        module = tower.get_submodule(name) if name else tower
        own = [p for _, p in module.named_parameters(recurse=False) if p.dim() == 3]
        tables = any(isinstance(m, nn.Embedding) for m in module.children())
        if tables or any(p.shape[0] == 1 and p.shape[-1] == hidden for p in own) or not name:
            return name
        name = name.rpartition(".")[0]


def _embedding_parts(embeddings: Any, hidden: int) -> tuple[str | None, str, bool]:
    """The class token (a ``[hidden]`` parameter, if any), the position table, and whether
    both are bare ``[1, ..., hidden]`` parameters (InternViT's) rather than a vector and an
    Embedding."""
    import torch.nn as nn

    own = [(n, tuple(p.shape)) for n, p in embeddings.named_parameters(recurse=False)]
    modules = [n for n, m in embeddings.named_children() if isinstance(m, nn.Embedding)]
    bare = [n for n, shape in own if len(shape) == 3 and shape[0] == 1 and shape[2] == hidden]
    tables = [n for n in bare if dict(own)[n][1] > 1]
    vector = (1, 1, hidden) if tables else (hidden,)
    class_token = [n for n, shape in own if shape == vector]
    if len(own) != len(class_token) + len(tables) or len(class_token) > 1:
        raise _NotVit(f"embedding parameters {[n for n, _ in own]}")
    if len(modules) + len(tables) != 1:
        raise _NotVit(f"{len(modules) + len(tables)} position tables")
    return (class_token[0] if class_token else None), (modules + tables)[0], bool(tables)


def _layer_scales(layer: Any, hidden: int) -> tuple[str, str] | None:
    """A layer's own ``[hidden]`` parameters: the attention's output scale, then the MLP's, in
    the order the layer declares them (InternViT's lambda_1, lambda_2; the check proves it)."""
    own = [(n, tuple(p.shape)) for n, p in layer.named_parameters(recurse=False)]
    if not own:
        return None
    if len(own) != 2 or any(shape != (hidden,) for _, shape in own):
        raise _NotVit(f"encoder-layer parameters {[n for n, _ in own]}")
    return own[0][0], own[1][0]


def _bias_key(files: Sequence[SourceFile], attention: str) -> str | None:
    """The vision_config key q_proj's bias follows (InternViT's ``bias=config.attention_bias``);
    None where it is a literal (CLIP's, SigLIP's)."""
    found = init_assignment(files, attention, "q_proj")
    return found.config_key("bias") if found else None


def _has_weights(module: Any) -> bool:
    return any(True for _ in module.parameters())


def _call_order(tower: Any, config: Any) -> list[str]:
    """The tower's own norms and layers (and the tower itself), in the order its forward first
    calls them."""
    import torch

    size = square_side(config.image_size, "image_size")
    order = forward_call_order(tower, config.num_channels, size, _NotVit)
    norms = {n for n, m in tower.named_modules() if isinstance(m, torch.nn.LayerNorm)}
    layers = {n for n in order if n.count(".") and n.rsplit(".", 1)[-1].isdigit()}
    return [n for n in order if n in norms or n in layers or n == ""]


def _dotted(name: str) -> str:
    return f"{name}." if name else ""


def _evidence(
    tower: Any, spec: VitTowerSpec, config: Any, files: Sequence[SourceFile]
) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    where = source_location(type(tower).forward) or type(tower).__name__
    found = [
        (
            f"vision.tower.{field}",
            (Evidence("config", f"config.json:vision_config.{key}", repr(getattr(config, key))),),
        )
        for field, key in spec.keys
    ]
    names = ", ".join(f"{role}={name}" for role, name in spec.names)
    found.append(("vision.tower.names", (Evidence("probe", where, names),)))
    return tuple(found)
