"""Norms: which class, its epsilon and ``1 + weight``, and where the layer's forward places it."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from onboard.analysis.norm_reader import placement_of
from onboard.analysis.static.source_model import (
    call_of,
    called_class,
    config_key,
    is_one,
    is_self_attr,
    keyword_value,
)
from onboard.block_specs import NormSpec
from onboard.spec import Evidence

if TYPE_CHECKING:
    from onboard.analysis.static.reader import StaticReader


NORM_BASES = ("LayerNorm", "RMSNorm")


def is_norm(reader: StaticReader, class_name: str | None) -> bool:
    if class_name is None:
        return False
    if class_name in NORM_BASES:
        return True
    cls = reader.src.classes.get(class_name)
    return cls is not None and "norm" in class_name.lower()


def read_norm(
    reader: StaticReader,
    layer_class: str,
    norms: Mapping[str, ast.Assign],
    final: ast.Assign | None,
) -> NormSpec:
    roles = _norm_roles(reader, layer_class, set(norms))
    for attr in norms:
        if attr not in roles.values():
            reader.delta(f"norm {attr} with no place in the layer", norms[attr])
        reader.cite("text.norm.names", norms[attr])
    placement = placement_of(roles)
    if reader.parallel:
        placement = "parallel" if placement == "pre" else None
    if placement is None:
        reader.delta(
            "unrecognised norm placement", reader.src.method(layer_class, "forward"), repr(roles)
        )
        placement = "pre"
    reference = final or next(iter(norms.values()), None)
    class_name = called_class(reference.value) if reference else None
    if class_name in reader.src.classes:
        reader.roles["norm"] = class_name
    kind, offset = _norm_class(reader, class_name)
    eps_key = config_key(keyword_value(call_of(reference.value), "eps")) if reference else None
    eps = float(reader.cfg.get(eps_key, 1e-6)) if eps_key else 1e-6
    if reference is not None:
        reader.cite("text.norm.kind", reference)
        reader.cite("text.norm.eps", reference)
    layer_node = reader.src.classes[layer_class]
    reader.log.add(
        "text.norm.placement",
        Evidence("source", f"{reader.src.file.name}:{layer_node.lineno}", f"{placement}: {roles}"),
    )
    weight = _norm_has(reader, class_name, reference, "weight", "elementwise_affine")
    bias = kind == "layer" and weight and _norm_has(reader, class_name, reference, "bias", "bias")
    return NormSpec(kind, eps, offset, placement, tuple(roles.items()), eps_key, bias, weight)


def _norm_has(
    reader: StaticReader,
    class_name: str | None,
    reference: ast.Assign | None,
    attr: str,
    switch: str,
) -> bool:
    """torch's norms have ``weight`` / ``bias`` unless built with ``<switch>=False``; the
    file's own norm class has one when its ``__init__`` sets ``self.<attr>``."""
    cls = reader.src.classes.get(class_name) if class_name else None
    torch_norm = cls is None or any(
        (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")) in NORM_BASES
        for b in cls.bases
    )
    if not torch_norm:
        return attr in reader.src.assignments(class_name)
    # the subclass's own default (Nemotron: bias=True), else torch's (True)
    default = _default(reader.src.method(class_name, "__init__"), switch) if cls else None
    fallback = not (isinstance(default, ast.Constant) and default.value is False)
    if reference is None:
        return fallback
    return reader.bool_keyword(reference, switch, default=fallback)[0]


def _norm_class(reader: StaticReader, class_name: str | None) -> tuple[str, float]:
    if class_name == "LayerNorm":
        reader.log.add(
            "text.norm.weight_offset",
            Evidence("source", reader.src.file.name, "torch.nn.LayerNorm: weight, bias"),
        )
        return "layer", 0.0
    if class_name == "RMSNorm" or class_name is None:
        return "rms", 0.0
    cls = reader.src.classes.get(class_name)
    if cls is None:
        return "rms", 0.0
    text = ast.get_source_segment(reader.src.file.text, cls) or ""
    offset = 1.0 if _matches(cls, _one_plus_weight) else 0.0
    if offset:
        reader.cite(
            "text.norm.weight_offset", next(n for n in ast.walk(cls) if _one_plus_weight(n))
        )
    else:
        reader.absent("text.norm.weight_offset", class_name, "scaled by weight, not 1 + weight")
    centred = (".mean(" in text and ("- " in text or "x - " in text)) or "layer_norm(" in text
    base_layer = any(isinstance(b, ast.Attribute) and b.attr == "LayerNorm" for b in cls.bases)
    return ("layer" if centred or base_layer else "rms"), offset


def _norm_roles(reader: StaticReader, layer_class: str, norms: set[str]) -> dict[str, str]:
    """Follow the forward's assignments: which norm feeds or follows attention and the MLP."""
    forward = reader.src.method(layer_class, "forward")
    if forward is None:
        return {}
    origin: dict[str, str] = {}  # variable -> what produced it ("norm:x", "attn", "mlp", ...)
    roles: dict[str, str] = {}
    for stmt in forward.body:
        targets, value = _assignment(stmt)
        if value is None:
            continue
        produced = _producer(reader, value, norms, origin, roles)
        for target in targets:
            origin[target] = produced
        if produced.startswith("norm:"):
            reader.cite("text.norm.placement", stmt)
    return dict(
        sorted(
            roles.items(),
            key=lambda item: ("attn_in", "attn_out", "mlp_in", "mlp_out").index(item[0]),
        )
    )


def _producer(
    reader: StaticReader,
    value: ast.AST,
    norms: set[str],
    origin: dict[str, str],
    roles: dict[str, str],
) -> str:
    call = value if isinstance(value, ast.Call) else None
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call):
        call = value.value
    if isinstance(value, ast.Tuple) or call is None:
        return "other"
    func = call.func
    if not (is_self_attr(func)):
        return "other"
    name = func.attr
    arg = call.args[0] if call.args else keyword_value(call, "hidden_states")
    source = origin.get(arg.id, "") if isinstance(arg, ast.Name) else ""
    if name in norms:
        if source == "attn":
            roles.setdefault("attn_out", name)
        elif source == "mlp":
            roles.setdefault("mlp_out", name)
        return f"norm:{name}"
    if name == reader.attn_attr:
        if source.startswith("norm:"):
            roles.setdefault("attn_in", source[5:])
        return "attn"
    if name == reader.mlp_attr:
        if source.startswith("norm:"):
            if roles.get("attn_in") == source[5:] and "attn_out" not in roles:
                reader.parallel = True  # the MLP reads the attention's own input (Cohere)
                reader.cite("text.norm.placement", call)
            roles.setdefault("mlp_in", source[5:])
        return "mlp"
    return "other"


def _assignment(stmt: ast.stmt) -> tuple[list[str], ast.AST | None]:
    if isinstance(stmt, ast.Assign):
        names = []
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                names.append(target.id)
            elif isinstance(target, ast.Tuple):
                names += [e.id for e in target.elts if isinstance(e, ast.Name)]
        return names, stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id], stmt.value
    return [], None


def _one_plus_weight(node: ast.AST) -> bool:
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return False
    sides = (node.left, node.right)
    one = any(is_one(side) for side in sides)
    return one and any("weight" in ast.unparse(side) for side in sides)


def _default(function: ast.FunctionDef | None, name: str) -> ast.AST | None:
    """The default value of parameter ``name`` of ``function``, if it has one."""
    if function is None:
        return None
    args = function.args
    positional = args.posonlyargs + args.args
    with_defaults = positional[len(positional) - len(args.defaults) :]
    defaults = dict(zip([a.arg for a in with_defaults], args.defaults, strict=True))
    keyword_only = zip(args.kwonlyargs, args.kw_defaults, strict=True)
    defaults |= {a.arg: d for a, d in keyword_only if d is not None}
    return defaults.get(name)


def _matches(cls: ast.ClassDef, predicate: Any) -> bool:
    return any(predicate(n) for n in ast.walk(cls))
