"""Read a perceiver resampler inside a projector (Idefics 2's ``perceiver_resampler``).

A module of the projector that holds a learned ``[latents, hidden]`` matrix of its own and a
list of layers, and returns that many rows per image whatever the patch count, is read as one
projector step (``PerceiverSpec``). Its parts are found by what each receives on one call:
in the first layer, the RMS norm that receives the layer's latents and the one that receives
the image's features (the context); the attention, whose one linear reads the latents' rows
(the queries), two the rows of the context and the latents together (keys, then values) and
one the heads' width (the output); the norm after it; the gated MLP (gate through the
activation, then up, then down). The sizes are the sub-config's keys, each compared with the
module it sizes; the MLP's width is the factor over the hidden size HF's layer writes. That
the parts compute in this order (the latents among the keys, the final norm) is proved by the
check, stage by stage (``perceiver_run.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.source_lines import init_assignment
from onboard.source import SourceFile
from onboard.spec import Delta, Evidence
from onboard.vision import PerceiverSpec

# PerceiverSpec field -> the sub-config key HF's resampler reads it from
_KEYS = {
    "hidden_size": "hidden_size",
    "latents": "resampler_n_latents",
    "depth": "resampler_depth",
    "num_heads": "resampler_n_heads",
    "num_kv_heads": "num_key_value_heads",
    "head_dim": "resampler_head_dim",
    "activation": "hidden_act",
    "eps": "rms_norm_eps",
}


class NotPerceiver(Exception):
    pass


@dataclass(frozen=True)
class PerceiverReading:
    spec: PerceiverSpec | None
    evidence: tuple[Evidence, ...] = ()
    delta: Delta | None = None


def find_perceiver(projector: Any) -> str | None:
    """The projector's module that holds one learned 2-D matrix of its own beside a list of
    layers (the latents and the resampler's layers); None where it has none."""
    import torch.nn as nn

    for name, module in projector.named_modules():
        own = [p for _, p in module.named_parameters(recurse=False)]
        lists = [c for c in module.children() if isinstance(c, nn.ModuleList)]
        if name and len(own) == 1 and own[0].dim() == 2 and len(lists) == 1:
            return name
    return None


def read_perceiver(
    name: str, module: Any, config: Any, files: Sequence[SourceFile], context: Any
) -> PerceiverReading:
    """``context``: what the projector handed the resampler (``[images, patches, hidden]``), and
    HF's all-ones mask for it."""
    try:
        spec, evidence = _read(module, config, files, context)
    except NotPerceiver as exc:
        where = source_location(type(module).forward) or type(module).__name__
        return PerceiverReading(
            None,
            delta=Delta(
                f"projector module {name} ({type(module).__name__}) holds latents and layers "
                f"but is not a perceiver resampler onboard reads ({exc})",
                where,
                "onboard reads perceiver resamplers of RMS-normed cross-attention layers over "
                "the context and the latents, with a gated MLP and a final RMS norm (Idefics 2's)",
            ),
        )
    return PerceiverReading(spec, evidence)


def _read(
    module: Any, config: Any, files: Sequence[SourceFile], context: Any
) -> tuple[PerceiverSpec, tuple[Evidence, ...]]:
    import torch.nn as nn

    from onboard.analysis.vision.projector import norm_eps, rms_offset

    sub_key, sub = _sub_config(module, config)
    values = {field: getattr(sub, key, None) for field, key in _KEYS.items()}
    if any(v is None for v in values.values()):
        missing = [k for f, k in _KEYS.items() if values[f] is None]
        raise NotPerceiver(f"{sub_key} has no {', '.join(missing)}")
    ((latents_name, latents),) = list(module.named_parameters(recurse=False))
    (layers_name,) = [n for n, c in module.named_children() if isinstance(c, nn.ModuleList)]
    layers = getattr(module, layers_name)
    rows, hidden = (int(d) for d in latents.shape)
    _require(rows == values["latents"], f"latents {tuple(latents.shape)} against {values}")
    _require(hidden == values["hidden_size"], f"latents {hidden} wide, not {values}")
    _require(len(layers) == values["depth"], f"{len(layers)} layers, not {values['depth']}")
    calls, out = _layer_calls(module, layers_name, context)
    _require(tuple(out.shape[1:]) == (rows, hidden), f"output {tuple(out.shape)}")
    layer = layers[0]
    latents_in, context_in = calls["__layer__"]
    norms = [(n, r) for n, leaf, r in calls["leaves"] if rms_offset(leaf) == 0.0]
    _require(len(norms) == 3, f"{len(norms)} RMS norms in a layer, not 3")
    latents_norm = _receiving(norms[:2], latents_in, "the latents")
    context_norm = _receiving(norms[:2], context_in, "the context")
    post_norm = norms[2][0]
    attention_name, attention = _child_with(layer, 4, "attention")
    mlp_name, mlp = _child_with(layer, 3, "MLP")
    received = {n: r for n, _, r in calls["leaves"]}
    order = [n for n, _, _ in calls["leaves"]]
    roles = _attention_roles(attention_name, attention, received, order, rows)
    gate, up, down, activation_leaf = _mlp_roles(mlp_name, mlp, order, hidden)
    head_dim = int(values["head_dim"])
    q, k, o = (getattr(attention, roles[r]) for r in ("q_proj", "k_proj", "o_proj"))
    _require(q.out_features == values["num_heads"] * head_dim, f"q_proj {q.out_features} wide")
    _require(k.out_features == values["num_kv_heads"] * head_dim, f"k_proj {k.out_features} wide")
    _require(o.in_features == q.out_features and o.out_features == hidden, "o_proj widths")
    biased = [
        n for n, m in layer.named_modules() if isinstance(m, nn.Linear) and m.bias is not None
    ]
    _require(not biased, f"biased linears {biased}")
    scale = getattr(attention, "scaling", head_dim**-0.5)
    _require(abs(float(scale) - head_dim**-0.5) < 1e-12, f"attention scale {scale}")
    _require(_is_activation(activation_leaf, values["activation"]), "an activation not hidden_act")
    final = _final_norm(module, layers_name)
    eps = {norm_eps(layer.get_submodule(n)) for n, _ in norms} | {norm_eps(getattr(module, final))}
    _require(eps == {float(values["eps"])}, f"norm epsilons {sorted(eps)}")
    width = getattr(mlp, gate).out_features
    factor, factor_evidence = _intermediate_factor(files, type(layer).__name__, mlp_name)
    _require(width == factor * hidden, f"MLP {width} wide, not {factor} x {hidden}")
    names = {
        "latents": latents_name,
        "layers": layers_name,
        "latents_norm": latents_norm,
        "context_norm": context_norm,
        "attention": attention_name,
        **roles,
        "post_norm": post_norm,
        "mlp": mlp_name,
        "gate": gate,
        "up": up,
        "down": down,
        "norm": final,
    }
    spec = PerceiverSpec(
        hidden_size=hidden,
        latents=rows,
        depth=len(layers),
        num_heads=int(values["num_heads"]),
        num_kv_heads=int(values["num_kv_heads"]),
        head_dim=head_dim,
        intermediate_size=width,
        intermediate_factor=factor,
        activation=str(values["activation"]),
        eps=float(values["eps"]),
        names=tuple(sorted(names.items())),
        keys=tuple(_KEYS.items()),
        config=sub_key,
    )
    where = source_location(type(module).forward) or type(module).__name__
    listed = ", ".join(f"{role}={n}" for role, n in spec.names)
    evidence = (
        Evidence("probe", where, f"perceiver resampler: {listed}"),
        *(
            Evidence("config", f"config.json:{sub_key}.{key}", repr(getattr(sub, key)))
            for key in _KEYS.values()
        ),
        factor_evidence,
    )
    return spec, evidence


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise NotPerceiver(what)


def _sub_config(module: Any, config: Any) -> tuple[str, Any]:
    """The composite config's attribute holding the config HF built the resampler from."""
    own = getattr(module, "config", None)
    for key, value in vars(config).items():
        if own is not None and value is own:
            return key, value
    raise NotPerceiver("no sub-config of the composite config builds it")


def _layer_calls(module: Any, layers_name: str, context: Any) -> tuple[dict[str, Any], Any]:
    """The first layer's leaves in the order one call first calls them, each with what it
    received, and what the layer itself received (the latents, the context); and the
    resampler's output."""
    import torch

    first = module.get_submodule(f"{layers_name}.0")
    leaves: list[tuple[str, Any, Any]] = []
    layer_inputs: list[Any] = []

    def keep_layer(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not layer_inputs:
            inputs = list(args) + [kwargs[k] for k in ("latents", "context") if k in kwargs]
            layer_inputs.extend(t.detach() for t in inputs[:2])

    handles = [first.register_forward_pre_hook(keep_layer, with_kwargs=True)]
    for name, leaf in first.named_modules():
        if not name or any(True for _ in leaf.children()):
            continue

        def hook(m: Any, args: tuple[Any, ...], name: str = name) -> None:
            if args and all(n != name for n, _, _ in leaves):
                leaves.append((name, m, args[0].detach()))

        handles.append(leaf.register_forward_pre_hook(hook))
    mask = torch.ones(context.shape[:2], dtype=torch.long)
    try:
        with torch.no_grad():
            out = module(context=context, attention_mask=mask)
    except (TypeError, RuntimeError, ValueError) as exc:
        raise NotPerceiver(f"it does not run on (context, attention_mask): {exc}") from exc
    finally:
        for handle in handles:
            handle.remove()
    if len(layer_inputs) != 2:
        raise NotPerceiver("its layers do not take the latents and the context")
    return {"leaves": leaves, "__layer__": tuple(layer_inputs)}, out


def _receiving(norms: list[tuple[str, Any]], value: Any, what: str) -> str:
    found = [n for n, received in norms if received.shape == value.shape and received.equal(value)]
    if len(found) != 1:
        raise NotPerceiver(f"no single norm over {what}")
    return found[0]


def _child_with(layer: Any, count: int, what: str) -> tuple[str, Any]:
    import torch.nn as nn

    found = [
        (n, m)
        for n, m in layer.named_children()
        if sum(isinstance(c, nn.Linear) for c in m.children()) == count
    ]
    if len(found) != 1:
        raise NotPerceiver(f"no single {what} of {count} linears in a layer")
    return found[0]


def _attention_roles(
    prefix: str, attention: Any, received: dict[str, Any], order: list[str], rows: int
) -> dict[str, str]:
    """q_proj reads the latents' rows; k_proj, then v_proj, the context's and the latents'
    rows together; o_proj the heads' output."""
    import torch.nn as nn

    linears = [n for n, m in attention.named_children() if isinstance(m, nn.Linear)]
    seen = {n: received.get(f"{prefix}.{n}") for n in linears}
    if any(v is None for v in seen.values()):
        raise NotPerceiver("an attention linear it does not call")
    hidden = attention.get_submodule(linears[0]).in_features
    reading = [n for n in linears if attention.get_submodule(n).in_features == hidden]
    output = [n for n in linears if n not in reading]
    queries = [n for n in reading if seen[n].shape[-2] == rows]
    keys = sorted(
        (n for n in reading if seen[n].shape[-2] > rows), key=lambda n: order.index(f"{prefix}.{n}")
    )
    if len(output) != 1 or len(queries) != 1 or len(keys) != 2:
        raise NotPerceiver(f"attention linears {linears} by the rows they read")
    return {"q_proj": queries[0], "k_proj": keys[0], "v_proj": keys[1], "o_proj": output[0]}


def _mlp_roles(prefix: str, mlp: Any, order: list[str], hidden: int) -> tuple[str, str, str, Any]:
    """gate (called first, through the activation), up, down (reading the MLP's width)."""
    import torch.nn as nn

    linears = [n for n, m in mlp.named_children() if isinstance(m, nn.Linear)]
    activations = [m for _, m in mlp.named_children() if not any(True for _ in m.parameters())]
    called = sorted(linears, key=lambda n: order.index(f"{prefix}.{n}"))
    if len(activations) != 1 or mlp.get_submodule(called[-1]).out_features != hidden:
        raise NotPerceiver(f"MLP parts {[n for n, _ in mlp.named_children()]}")
    gate, up, down = called
    return gate, up, down, activations[0]


def _is_activation(module: Any, name: str) -> bool:
    from transformers.activations import ACT2CLS

    entry = ACT2CLS.get(name)
    cls = entry[0] if isinstance(entry, tuple) else entry
    return cls is not None and type(module) is cls


def _final_norm(module: Any, layers_name: str) -> str:
    """The resampler's own RMS norm, after its layers."""
    from onboard.analysis.vision.projector import rms_offset

    found = [n for n, c in module.named_children() if n != layers_name and rms_offset(c) == 0.0]
    if len(found) != 1:
        raise NotPerceiver(f"{len(found)} RMS norms of its own, not one after the layers")
    return found[0]


def _intermediate_factor(
    files: Sequence[SourceFile], layer_class: str, mlp: str
) -> tuple[int, Evidence]:
    """The MLP's width as HF's layer writes it: ``intermediate_size=config.hidden_size * k``."""
    found = init_assignment(files, layer_class, mlp)
    text = found.keyword("intermediate_size") if found else None
    try:
        node = ast.parse(text or "", mode="eval").body
    except SyntaxError:
        node = None
    if (
        found is None
        or not isinstance(node, ast.BinOp)
        or not isinstance(node.op, ast.Mult)
        or ast.unparse(node.left) != "config.hidden_size"
        or not isinstance(node.right, ast.Constant)
        or not isinstance(node.right.value, int)
    ):
        raise NotPerceiver(f"an MLP width {text!r} that is not config.hidden_size * k")
    return node.right.value, found.evidence
