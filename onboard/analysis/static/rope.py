"""RoPE: the rotary parameters, interleaving, partial rotary and conditional RoPE."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from onboard.analysis.static.source_model import name_of
from onboard.block_specs import AttentionSpec
from onboard.spec import Evidence, RopeSpec

if TYPE_CHECKING:
    from onboard.analysis.static.reader import StaticReader


def read_rope(
    reader: StaticReader, kinds: tuple[str, ...], attention: AttentionSpec
) -> tuple[tuple[str, RopeSpec], ...]:
    if attention.alibi:  # positions enter as ALiBi biases: nothing rotates
        where = reader.log.freeze()
        alibi = dict(where).get("text.attention.alibi", ())
        for kind in dict.fromkeys(kinds):
            for evidence in alibi[:1]:
                reader.log.add(
                    f"text.rope.{kind}",
                    Evidence("source", evidence.where, "ALiBi biases, no rotary embedding"),
                )
        return tuple((kind, RopeSpec(None, 0.0)) for kind in dict.fromkeys(kinds))
    key = "rope_parameters" if reader.cfg.get("rope_parameters") else "rope_scaling"
    params = reader.cfg.get(key) or {}
    if not isinstance(params, dict):
        reader.delta(f"config.json {key} is not an object", None, repr(params)[:80])
        params = {}
    interleaved = _rope_interleaved(reader)
    _conditional_rope(reader)
    specs = []
    for kind in dict.fromkeys(kinds):
        own = params.get(kind) if isinstance(params.get(kind), dict) else params
        specs.append((kind, _rope_of(reader, own, interleaved)))
        reader.log.add(
            f"text.rope.{kind}", Evidence("config", f"config.json:{key}", str(own)[:120])
        )
    understood = {"rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor"}
    for unread in sorted(k for k in reader.cfg.config if "rope" in k or "rotary" in k):
        if unread not in understood:
            reader.delta(f"config.json {unread} is a RoPE setting onboard does not read", None)
    if "llama_4_scaling_beta" in params:
        reader.delta(
            "position-dependent query scale (llama_4_scaling_beta)",
            None,
            f"{key}.llama_4_scaling_beta = {params['llama_4_scaling_beta']}",
        )
    return tuple(specs)


def _rope_of(reader: StaticReader, params: Mapping[str, Any], interleaved: bool) -> RopeSpec:
    theta = float(params.get("rope_theta", reader.cfg.get("rope_theta", 10000.0)))
    partial = float(
        params.get("partial_rotary_factor", reader.cfg.get("partial_rotary_factor", 1.0)) or 1.0
    )
    rope_type = str(params.get("rope_type", params.get("type", "default")))
    extra = tuple(
        sorted(
            (k, v)
            for k, v in params.items()
            if k not in ("rope_type", "type", "rope_theta", "partial_rotary_factor")
        )
    )
    if partial < 1.0 and not _reads_partial_rotary(reader):
        reader.delta(
            "config.json sets partial_rotary_factor but the modeling code never reads it",
            None,
            f"partial_rotary_factor={partial:g}",
        )
    return RopeSpec(rope_type, theta, partial, extra, interleaved)


def _conditional_rope(reader: StaticReader) -> None:
    """RoPE applied under an ``if`` in the attention forward (NoPE layers): not expressible
    from the source alone, so a delta."""
    forward = reader.src.method(reader.roles.get("attention", ""), "forward")
    for node in ast.walk(forward) if forward is not None else ():
        if isinstance(node, ast.If) and any(
            isinstance(n, ast.Call) and "rotary" in (name_of(n.func) or "") for n in ast.walk(node)
        ):
            reader.delta(
                "RoPE applied only under a condition (layers without RoPE)",
                node,
                f"if {ast.unparse(node.test)}",
            )


def _rotary_functions(reader: StaticReader) -> list[ast.FunctionDef]:
    return [
        n
        for n in reader.src.tree.body
        if isinstance(n, ast.FunctionDef) and ("rotary" in n.name or "rotate" in n.name)
    ]


def _rope_interleaved(reader: StaticReader) -> bool:
    """Rotate-half pairs dim i with i + d/2; interleaved pairs 2i, 2i+1 (``x[..., ::2]``)."""
    for function in _rotary_functions(reader):
        for node in ast.walk(function):
            if isinstance(node, ast.Slice) and _is_two(node.step):
                reader.cite("text.rope.interleaved", node)
                return True
            if isinstance(node, ast.Call) and name_of(node.func) == "repeat_interleave":
                reader.cite("text.rope.interleaved", node)
                return True
    rotate_half = next((f for f in _rotary_functions(reader) if f.name == "rotate_half"), None)
    if rotate_half is not None:
        reader.cite("text.rope.convention", rotate_half.body[-1])
    return False


def _reads_partial_rotary(reader: StaticReader) -> bool:
    rotary = reader.src.classes.get(reader.roles.get("rotary", ""))
    scopes: list[ast.AST] = [*_rotary_functions(reader), *([rotary] if rotary else [])]
    for scope in scopes:
        for node in ast.walk(scope):
            text = ast.unparse(node) if isinstance(node, ast.Name | ast.Attribute) else ""
            if "partial_rotary" in text or "rotary_dim" in text:
                reader.cite("text.rope.partial_rotary_factor", node)
                return True
    return False


def _is_two(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == 2
