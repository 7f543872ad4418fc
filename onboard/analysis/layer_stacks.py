"""Decoders that run more than one stack of layers, or run a stack more than once.

HRM keeps two stacks of the same decoder layer (``L_module.layers``, ``H_module.layers``) and
runs them in a recurrence: for each of ``H_cycles``, the L stack ``L_cycles`` times on
``z_L + z_H``, then the H stack on ``z_H + z_L``, each call with KV-cache slots of its own. The
spec describes one stack of layers run once, so such a model is refused here, by the stacks and
the lines of the decoder's forward that call them, before a reader sees only one of them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from onboard.analysis.layout import ATTENTION_NAMES
from onboard.analysis.source_lines import _modeling_first, _parse
from onboard.errors import UnsupportedFeatureError
from onboard.source import SourceFile


@dataclass(frozen=True)
class StackCall:
    """A call of one stack in the decoder's forward: where, and the loops around it."""

    stack: str  # the decoder's child holding the layers (L_module)
    where: str  # modeling_x.py:N
    loops: tuple[str, ...]  # the iterables of the enclosing for loops, outermost first


def layer_stacks(model: Any) -> tuple[str, ...]:
    """Dotted names of the ModuleLists of decoder layers (children holding an attention),
    one per stack; a decoder of one stack has one."""
    import torch

    return tuple(
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList)
        and len(module) > 0
        and any(hasattr(module[0], a) for a in ATTENTION_NAMES)
    )


def refuse_repeated_stacks(model: Any, files: Iterable[SourceFile]) -> None:
    """Refuse a decoder with several stacks of one layer class, naming the stacks and each
    call of them in its forward (in a loop: the loop's range)."""
    stacks = layer_stacks(model)
    classes = {type(model.get_submodule(s)[0]).__name__ for s in stacks}
    if len(stacks) < 2 or len(classes) != 1:
        return
    holders = [s.rpartition(".")[0] for s in stacks]  # model.L_module
    decoder = model.get_submodule(holders[0].rpartition(".")[0])
    children = tuple(h.rpartition(".")[2] for h in holders)
    calls = stack_calls(files, type(decoder).__name__, children)
    where = "; ".join(_cite(c) for c in calls)
    raise UnsupportedFeatureError(
        f"{type(decoder).__name__} runs {len(stacks)} stacks of {classes.pop()} "
        f"({', '.join(stacks)}) in a recurrence ({where or 'its forward'}): onboard's spec "
        "describes one stack of layers run once (stacks called in cycles, how their inputs "
        "combine and the KV-cache slots of each call are not in the spec yet)"
    )


def _cite(call: StackCall) -> str:
    loops = f" in for over {', '.join(call.loops)}" if call.loops else ""
    return f"{call.where}: self.{call.stack}(...){loops}"


def stack_calls(
    files: Iterable[SourceFile], class_name: str, stacks: tuple[str, ...]
) -> tuple[StackCall, ...]:
    """Each ``self.<stack>(...)`` call in ``class_name.forward``, in source order."""
    for source in _modeling_first(files):
        tree = _parse(source.text)
        forward = _forward(tree, class_name) if tree else None
        if forward is not None:
            return tuple(_calls(forward, stacks, source.name, ()))
    return ()


def _forward(tree: ast.Module, class_name: str) -> ast.FunctionDef | None:
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == class_name:
            return next(
                (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"),
                None,
            )
    return None


def _calls(node: ast.AST, stacks: tuple[str, ...], file: str, loops: tuple[str, ...]):
    """The stack calls under ``node``, with the loops they sit in."""
    for child in ast.iter_child_nodes(node):
        inner = (*loops, ast.unparse(child.iter)) if isinstance(child, ast.For) else loops
        func = child.func if isinstance(child, ast.Call) else None
        if (
            isinstance(func, ast.Attribute)
            and func.attr in stacks
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            yield StackCall(func.attr, f"{file}:{child.lineno}", loops)
        yield from _calls(child, stacks, file, inner)
