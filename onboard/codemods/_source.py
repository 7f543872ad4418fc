"""Parsing and lookup helpers shared by the codemods.

Kept apart from the edits so every codemod reports unparsable sources and missing
variables with the same one-line wording.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

import libcst as cst
import libcst.matchers as m

from onboard.codemods._errors import CodemodError

_EMPTY_MODULE = cst.Module(body=())


def parse_module(source: str) -> cst.Module:
    """Parse ``source``, turning libcst's multi-line error into a one-line CodemodError."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        reason = error.message.splitlines()[0] if error.message else "syntax error"
        raise CodemodError(
            f"cannot parse Python source at line {error.editor_line}, "
            f"column {error.editor_column}: {reason}"
        ) from None


def parse_expression_arg(text: str, what: str) -> cst.BaseExpression:
    """Parse caller-supplied expression text; a bad argument is a caller bug (ValueError)."""
    try:
        return cst.parse_expression(text)
    except cst.ParserSyntaxError as error:
        raise ValueError(f"{what} is not a Python expression: {text!r}") from error


def code_of(node: cst.CSTNode) -> str:
    """Render one node as source text."""
    return _EMPTY_MODULE.code_for_node(node)


def same_expression(left: cst.CSTNode, right: cst.CSTNode) -> bool:
    """Compare two expressions ignoring layout, comments, quote style and trailing commas.

    The libcst-rendered code of each node is re-read with :mod:`ast`, whose dump keeps only
    what the expression means, so a reformatted entry still counts as already present.
    """
    return _normalized(left) == _normalized(right)


def _normalized(node: cst.CSTNode) -> str:
    code = code_of(node)
    try:
        return ast.dump(ast.parse(f"(\n{code}\n)", mode="eval"))
    except SyntaxError:  # syntax libcst knows but this Python's ast does not
        return code


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain (non-f, non-bytes) string literal, else None."""
    if isinstance(node, cst.SimpleString | cst.ConcatenatedString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def string_literal(text: str, like: Iterable[cst.CSTNode] = ()) -> cst.SimpleString:
    """A string literal for ``text`` quoted like the first simple string in ``like``.

    Matching the file's quote style keeps the added line consistent with its neighbours.
    """
    quote = next(
        (node.quote for node in like if isinstance(node, cst.SimpleString)),
        '"',
    )
    literal = repr(text)
    if quote == '"' and literal.startswith("'"):
        inner = literal[1:-1].replace("\\'", "'").replace('"', '\\"')
        literal = f'"{inner}"'
    return cst.SimpleString(literal)


def find_assigned_value(module: cst.Module, variable: str) -> cst.BaseExpression:
    """The value of the single module-level ``variable = ...`` or ``variable: T = ...``."""
    values = list(_module_assignments(module, variable))
    if not values:
        raise CodemodError(f"no module-level assignment `{variable} = ...` found")
    if len(values) > 1:
        raise CodemodError(f"module-level `{variable}` is assigned more than once")
    return values[0]


def _module_assignments(module: cst.Module, variable: str) -> Iterable[cst.BaseExpression]:
    """Values assigned to ``variable`` by top-level statements (not inside if/try/def)."""
    target = m.Name(variable)
    wanted = m.Assign(
        targets=[m.ZeroOrMore(), m.AssignTarget(target=target), m.ZeroOrMore()]
    ) | m.AnnAssign(target=target)
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, cst.Assign | cst.AnnAssign)
                and small.value is not None
                and m.matches(small, wanted)
            ):
                yield small.value


def describe(node: cst.CSTNode) -> str:
    """A short name for a node kind, for error messages."""
    if isinstance(node, cst.Call):
        return f"a call to `{code_of(node.func)}`"
    return f"a {type(node).__name__} expression"


def replace_node(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode) -> str:
    """Swap one node (by identity) and render the whole module."""
    updated = module.deep_replace(old, new)
    assert isinstance(updated, cst.Module)
    return updated.code
