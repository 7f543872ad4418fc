"""Decoders that run more than one stack of layers, or run a stack more than once.

HRM keeps two stacks of the same decoder layer (``L_module.layers``, ``H_module.layers``) and
runs them in a recurrence: for each of ``H_cycles``, the L stack ``L_cycles`` times on
``z_L + z_H``, then the H stack on ``z_H + z_L``, each call with KV-cache slots of its own.
That shape is read here from the decoder's forward (the calls, their loops and summed inputs),
the stack's ``__init__`` (its layer count's key) and the module tree (the initial state, each
stack's norm) into ``StackRecurrenceSpec``; any other use of several stacks is refused by the
stacks and the lines that call them, before a reader sees only one of them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from onboard.analysis.layout import ATTENTION_NAMES
from onboard.analysis.source_lines import _modeling_first, _parse
from onboard.errors import UnsupportedFeatureError
from onboard.source import SourceFile
from onboard.spec import Evidence, StackRecurrenceSpec

_CONFIG_RANGE = re.compile(r"range\((?:self\.)?config\.(\w+)\)")
# The tiny recurrence: one layer a stack, two cycles of three low calls (8 KV-cache slots):
# unequal counts, so a count read from the other key, or a cycle miscounted, changes the output
TINY_CYCLES = (2, 3)


@dataclass(frozen=True)
class StackCall:
    """A call of one stack in the decoder's forward: where, and the loops around it."""

    stack: str  # the decoder's child holding the layers (L_module)
    where: str  # modeling_x.py:N
    loops: tuple[str, ...]  # the iterables of the enclosing for loops, outermost first
    summed: bool = False  # its first argument is a sum of two states (z_L + z_H)


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


@dataclass(frozen=True)
class Recurrence:
    """The recurrence read, and where each part of it was seen."""

    spec: StackRecurrenceSpec
    evidence: tuple[Evidence, ...]


def read_recurrence(model: Any, files: Iterable[SourceFile]) -> Recurrence | None:
    """HRM's recurrence of two stacks of one layer class; None for one stack. Several stacks
    in any other shape are refused, naming the stacks and each call of them in the forward."""
    files = tuple(files)
    stacks = layer_stacks(model)
    classes = {type(model.get_submodule(s)[0]).__name__ for s in stacks}
    if len(stacks) < 2 or len(classes) != 1:
        return None
    holders = [s.rpartition(".")[0] for s in stacks]  # model.L_module
    decoder = model.get_submodule(holders[0].rpartition(".")[0])
    children = tuple(h.rpartition(".")[2] for h in holders)
    calls = stack_calls(files, type(decoder).__name__, children)
    found = _hrm_shape(model, decoder, holders, calls, files)
    if found is not None:
        return found
    where = "; ".join(_cite(c) for c in calls)
    raise UnsupportedFeatureError(
        f"{type(decoder).__name__} runs {len(stacks)} stacks of {classes.pop()} "
        f"({', '.join(stacks)}) in a recurrence ({where or 'its forward'}): onboard reads "
        "two stacks in cycles only as HRM runs them (a low stack in an inner loop on the sum "
        "of both states, then a high stack on their sum, each ending in a norm)"
    )


def _hrm_shape(
    model: Any, decoder: Any, holders: list[str], calls: tuple[StackCall, ...], files: tuple
) -> Recurrence | None:
    """The spec when the calls are HRM's: the low stack in two loops over config counts, the
    high stack in the outer one, both on a sum; one initial state; one norm a stack."""
    if len(calls) != 2 or not all(c.summed for c in calls):
        return None
    low, high = calls
    decoder_path = holders[0].rpartition(".")[0]  # model
    keys = [_CONFIG_RANGE.fullmatch(loop) for loop in low.loops]
    if len(keys) != 2 or not all(keys) or high.loops != low.loops[:1]:
        return None
    initial = [name for name, _ in decoder.named_parameters(recurse=False)]
    stack = model.get_submodule(holders[0])
    norms = [n for n, _ in stack.named_children() if n != "layers" and "norm" in n.lower()]
    layers_key = _layers_key(files, type(stack).__name__)
    if len(initial) != 1 or len(norms) != 1 or layers_key is None:
        return None
    spec = StackRecurrenceSpec(
        stacks=(low.stack, high.stack),
        outer_key=keys[0].group(1),
        inner_key=keys[1].group(1),
        layers_key=layers_key[0],
        initial=initial[0],
        stack_norm=norms[0],
    )
    evidence = (
        Evidence("source", low.where, f"self.{low.stack}(a + b) in for over {low.loops}"),
        Evidence("source", high.where, f"self.{high.stack}(a + b) in for over {high.loops}"),
        Evidence("source", layers_key[1], f"range(config.{layers_key[0]}) layers a stack"),
        Evidence("probe", f"{decoder_path}.{spec.initial}", "the decoder's one own parameter"),
        Evidence("probe", f"{holders[0]}.{spec.stack_norm}", "each stack's norm"),
    )
    return Recurrence(spec, evidence)


def _layers_key(files: tuple, class_name: str) -> tuple[str, str] | None:
    """The config key of ``range(config.<key>)`` in the stack's ``__init__``, and its line."""
    for source in _modeling_first(files):
        tree = _parse(source.text)
        init = _method(tree, class_name, "__init__") if tree else None
        for node in ast.walk(init) if init is not None else ():
            found = (
                _CONFIG_RANGE.fullmatch(ast.unparse(node)) if isinstance(node, ast.Call) else None
            )
            if found:
                return found.group(1), f"{source.name}:{node.lineno}"
    return None


def tiny_recurrence(config: dict[str, Any], recurrence: StackRecurrenceSpec) -> dict[str, Any]:
    """The tiny config's keys for the recurrence: one layer a stack, ``TINY_CYCLES``, and the
    layer count as the KV-cache slots (HF derives it only when the per-stack count is unset)."""
    outer, inner = TINY_CYCLES
    return {
        **config,
        recurrence.layers_key: 1,
        recurrence.outer_key: outer,
        recurrence.inner_key: inner,
        "num_hidden_layers": outer * (inner + 1),
    }


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
    return _method(tree, class_name, "forward")


def _method(tree: ast.Module, class_name: str, name: str) -> ast.FunctionDef | None:
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == class_name:
            return next(
                (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name),
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
            summed = bool(child.args) and _is_sum(child.args[0])
            yield StackCall(func.attr, f"{file}:{child.lineno}", loops, summed)
        yield from _calls(child, stacks, file, inner)


def _is_sum(node: ast.expr) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
