"""MLP: gated or plain, the order of its projections, its activation and bias."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from onboard.analysis.static.source_model import (
    call_of,
    called_class,
    config_key,
    is_self_attr,
    keyword_value,
)
from onboard.analysis.static.structure import unknown_children
from onboard.block_specs import MLPSpec

if TYPE_CHECKING:
    from onboard.analysis.static.reader import StaticReader


# transformers ACT2FN entries without parameters whose formula the targets know.
PLAIN_ACTIVATIONS = frozenset(
    {
        "silu",
        "swish",
        "gelu",
        "gelu_new",
        "gelu_fast",
        "gelu_pytorch_tanh",
        "quick_gelu",
        "relu",
        "relu2",
        "sigmoid",
        "tanh",
    }
)


def read_mlp(reader: StaticReader, mlp_class: str) -> MLPSpec:
    parts = reader.src.assignments(mlp_class)
    linears = [a for a, n in parts.items() if called_class(n.value) == "Linear"]
    if {"gate_proj", "up_proj", "down_proj"} <= set(linears):
        kind, projections = "gated", ("gate_proj", "up_proj", "down_proj")
    elif "gate_up_proj" in linears:
        kind, projections = "fused_gate_up", ("gate_up_proj", "down_proj")
    elif len(linears) == 2:
        kind, projections = "plain", _plain_order(reader, mlp_class, linears)
    elif len(linears) == 3 and (order := _gated_order(reader, mlp_class, linears)) is not None:
        kind, projections = "gated", order  # InternLM2: w1 (gate), w3 (up), w2 (down)
    else:
        reader.delta(
            f"MLP {mlp_class}: projections not understood (found linears "
            f"{', '.join(linears) or 'none'}; expected gate/up/down, as the forward shows "
            "down(act(gate(x)) * up(x)), or up and down)",
            reader.src.classes[mlp_class],
            ", ".join(linears),
        )
        kind, projections = "gated", ("gate_proj", "up_proj", "down_proj")
    unknown_children(
        reader,
        mlp_class,
        parts,
        {*linears, *(a for a in parts if "act" in a)},
    )
    reader.log.add("text.mlp.kind", reader.src.cite(reader.src.classes[mlp_class]))
    act_key, activation = "hidden_act", reader.cfg.get("hidden_act", "silu")
    for node in ast.walk(reader.src.classes[mlp_class]):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "ACT2FN"
        ):
            key = config_key(node.slice)
            if key:
                act_key, activation = key, reader.cfg.get(key)
                reader.cite("text.mlp.activation", node)
    if activation not in PLAIN_ACTIVATIONS:
        reader.delta(
            f"activation {activation!r}: onboard cannot tell from the source whether it has "
            "learnable parameters or a non-standard formula",
            reader.src.classes[mlp_class],
            f"config.{act_key}",
        )
    width = int(reader.cfg.get("intermediate_size", 0))
    last = parts.get(projections[-1])
    if last is None:  # not understood, reported above: nothing to read the bias from
        return MLPSpec(kind, str(activation), False, width, projections, None, act_key)
    bias, bias_key = reader.bool_keyword(last, "bias", default=True)
    reader.cite("text.mlp.bias", keyword_value(call_of(last.value), "bias") or last)
    return MLPSpec(kind, str(activation), bias, width, projections, bias_key, act_key)


def _gated_order(
    reader: StaticReader, mlp_class: str, linears: list[str]
) -> tuple[str, str, str] | None:
    """(gate, up, down) from ``down(act(gate(x)) * up(x))`` in the forward: down is the
    outer call, gate the one inside the activation, up the other."""
    forward = reader.src.method(mlp_class, "forward")
    names = set(linears)
    for node in ast.walk(forward) if forward is not None else ():
        if not (isinstance(node, ast.Call) and is_self_attr(node.func)):
            continue
        down = node.func.attr
        if down not in names or not node.args:
            continue
        product = node.args[0]
        if not (isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)):
            continue
        gate = up = None
        for side in (product.left, product.right):
            inner = _inner_linear(side, names)
            if inner is None:
                continue
            if isinstance(side, ast.Call) and is_self_attr(side.func) and side.func.attr == inner:
                up = inner
            else:
                gate = inner  # wrapped: the activation's argument
        if gate and up and len({gate, up, down}) == 3:
            reader.cite("text.mlp.kind", node)
            return gate, up, down
    return None


def _plain_order(reader: StaticReader, mlp_class: str, linears: list[str]) -> tuple[str, ...]:
    """The projection the forward calls first is the input one."""
    forward = reader.src.method(mlp_class, "forward")
    order = (
        [
            n.func.attr
            for n in ast.walk(forward)
            if isinstance(n, ast.Call) and is_self_attr(n.func) and n.func.attr in linears
        ]
        if forward
        else []
    )
    first = order[-1] if order else linears[0]  # ast.walk visits outer calls first
    return (first, next(name for name in linears if name != first))


def _inner_linear(node: ast.AST, names: set[str]) -> str | None:
    """The one ``self.<linear>(...)`` call inside ``node``, if exactly one."""
    found = {
        n.func.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and is_self_attr(n.func) and n.func.attr in names
    }
    return found.pop() if len(found) == 1 else None
