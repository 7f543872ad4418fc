"""A width HF computes in statements before building a module's linears (LFM2's MLP adjusts
``intermediate_size`` to two thirds, a multiplier and a multiple of 256).

The statements are read from the source, kept only when they use nothing but the config,
arithmetic and ``int``/``round``/``min``/``max``, and then run on a config to give the width.
They are proved by giving the tiny model's width from the tiny config and the real model's
width from the real config.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from onboard.analysis.source_lines import class_init, source_of
from onboard.source import SourceFile
from onboard.spec import Evidence

WIDTH = "width"  # the variable the kept statements assign
_FUNCTIONS = {"int": int, "round": round, "min": min, "max": max}
_ALLOWED = (
    ast.Module,
    ast.Assign,
    ast.AugAssign,
    ast.If,
    ast.Expr,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Constant,
    ast.Call,
    ast.Name,
    ast.Attribute,
    ast.Load,
    ast.Store,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
)


@dataclass(frozen=True)
class WidthRule:
    code: str  # statements over ``config`` that assign ``width``
    evidence: Evidence


def read_width_rule(
    files: Iterable[SourceFile], class_name: str, output_linear: str
) -> WidthRule | None:
    """The statements of ``class_name.__init__`` computing the input width of its linear
    ``self.<output_linear>``, renamed to assign ``width``; None when there are none or they do
    more than arithmetic over the config."""
    found = class_init(files, class_name)
    if found is None:
        return None
    source, init = found
    variable = _input_width_name(init, output_linear)
    if variable is None:
        return None
    body = _statements_before_linears(init, variable)
    if not body:
        return None
    module = ast.Module(body=[_renamed(s, variable) for s in body], type_ignores=[])
    if not vetted(module):
        return None
    line = body[0].lineno
    where = f"{source.name}:{line}-{body[-1].end_lineno}"
    return WidthRule(ast.unparse(module), Evidence("source", where, source_of(source, line)))


def evaluate_width(code: str, config: Any) -> int:
    """Run vetted width statements on ``config`` (anything but vetted code is refused)."""
    module = ast.parse(code)
    if not vetted(module):
        raise ValueError(f"not arithmetic over the config: {code!r}")
    scope: dict[str, Any] = {"config": config}
    exec(compile(module, "<width>", "exec"), {"__builtins__": dict(_FUNCTIONS)}, scope)
    return int(scope[WIDTH])


def vetted(module: ast.Module) -> bool:
    """Only assignments, ifs and arithmetic over ``config`` attributes and ``width``."""
    for node in ast.walk(module):
        if not isinstance(node, _ALLOWED):
            return False
        if isinstance(node, ast.Name) and node.id not in (WIDTH, "config", *_FUNCTIONS):
            return False
        if isinstance(node, ast.Attribute) and not (
            isinstance(node.value, ast.Name) and node.value.id == "config"
        ):
            return False
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and not node.keywords
        ):
            return False
        if isinstance(node, ast.Assign | ast.AugAssign) and not all(
            isinstance(t, ast.Name) and t.id == WIDTH
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        ):
            return False
    return True


def _input_width_name(init: ast.FunctionDef, linear: str) -> str | None:
    """``x`` in ``self.<linear> = nn.Linear(x, ...)``."""
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(target := node.targets[0], ast.Attribute)
            and target.attr == linear
            and isinstance(node.value, ast.Call)
            and node.value.args
            and isinstance(node.value.args[0], ast.Name)
        ):
            return node.value.args[0].id
    return None


def _statements_before_linears(init: ast.FunctionDef, variable: str) -> list[ast.stmt]:
    """The top-level statements from the first one assigning ``variable`` up to the first
    ``self.<x> = ...``; empty when ``variable`` is a parameter of ``__init__``."""
    if variable in {a.arg for a in init.args.args}:
        return []
    kept: list[ast.stmt] = []
    for statement in init.body:
        if _assigns_self(statement):
            if kept:
                break
            continue
        if kept or _assigns(statement, variable):
            kept.append(statement)
    return kept


def _assigns_self(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Assign) and any(
        isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
        for t in statement.targets
    )


def _assigns(statement: ast.stmt, variable: str) -> bool:
    return isinstance(statement, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == variable for t in statement.targets
    )


def _renamed(statement: ast.stmt, variable: str) -> ast.stmt:
    """A renamed copy: the parsed source is cached and shared, so it is never edited."""

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name(WIDTH, node.ctx) if node.id == variable else node

    return Rename().visit(copy.deepcopy(statement))
