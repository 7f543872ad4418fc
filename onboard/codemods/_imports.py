"""Ensure a module-level ``from <module> import <name>``.

Generated models are registered by importing their class into the library's registry and
package ``__init__``; the import must land where isort/ruff would put it so the library's
own lint stays clean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.helpers import get_full_name_for_node

from onboard.codemods._ordering import insertion_index
from onboard.codemods._sequence import insert_item
from onboard.codemods._source import parse_module, replace_node


@dataclass(frozen=True)
class _ImportSite:
    """One ``from ... import ...`` among the module's top-level statements."""

    body_index: int
    node: cst.ImportFrom
    module: str


def add_from_import(source: str, module: str, name: str) -> str:
    """Make ``name`` importable at module level from ``module``; no-op if it already is.

    Extends an existing ``from module import ...`` (sorted when its names are), else adds
    a statement next to the imports from the same top-level package.
    """
    tree = parse_module(source)
    statement = _new_statement(module, name)
    sites = _import_sites(tree)
    same_module = [site for site in sites if site.module == module]
    if any(_binds(site.node, name) for site in same_module):
        return source
    editable = [site for site in same_module if not isinstance(site.node.names, cst.ImportStar)]
    if editable:
        return _extend(tree, editable[0].node, name)
    return tree.with_changes(body=_with_statement(tree, sites, module, statement)).code


def _new_statement(module: str, name: str) -> cst.SimpleStatementLine:
    """Parse the wanted statement, rejecting arguments that are not a module and a name."""
    if not name.isidentifier():
        raise ValueError(f"not an importable name: {name!r}")
    try:
        statement = cst.parse_statement(f"from {module} import {name}\n")
    except cst.ParserSyntaxError as error:
        raise ValueError(f"not a module path: {module!r}") from error
    if not (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.ImportFrom)
        and _module_name(statement.body[0]) == module
    ):
        raise ValueError(f"not a module path: {module!r}")
    return statement


def _module_name(node: cst.ImportFrom) -> str:
    """The imported-from module as written, relative dots included."""
    dotted = get_full_name_for_node(node.module) if node.module is not None else ""
    return "." * len(node.relative) + (dotted or "")


def _top_package(module: str) -> str:
    """``mobius`` for ``mobius.models.qwen3``; relative imports group together as ``.``."""
    return "." if module.startswith(".") else module.partition(".")[0]


def _import_sites(tree: cst.Module) -> list[_ImportSite]:
    return [
        _ImportSite(index, small, _module_name(small))
        for index, statement in enumerate(tree.body)
        if isinstance(statement, cst.SimpleStatementLine)
        for small in statement.body
        if isinstance(small, cst.ImportFrom)
    ]


def _alias_name(alias: cst.ImportAlias) -> str:
    return get_full_name_for_node(alias.name) or ""


def _binds(node: cst.ImportFrom, name: str) -> bool:
    """Whether the import makes ``name`` available under that same name."""
    if isinstance(node.names, cst.ImportStar):
        return False
    return any(
        _alias_name(alias) == name
        and (alias.asname is None or get_full_name_for_node(alias.asname.name) == name)
        for alias in node.names
    )


def _extend(tree: cst.Module, node: cst.ImportFrom, name: str) -> str:
    assert not isinstance(node.names, cst.ImportStar)
    index = insertion_index([_alias_name(alias) for alias in node.names], name)
    extended = insert_item(node, index, cst.ImportAlias(name=cst.Name(name)))
    return replace_node(tree, node, extended)


def _with_statement(
    tree: cst.Module,
    sites: Sequence[_ImportSite],
    module: str,
    statement: cst.SimpleStatementLine,
) -> list[cst.BaseStatement]:
    """The module body with ``statement`` placed where isort would put it."""
    body = list(tree.body)
    siblings = [site for site in sites if _top_package(site.module) == _top_package(module)]
    if siblings:
        position = insertion_index([site.module for site in siblings], module)
        if position == len(siblings):
            body.insert(siblings[-1].body_index + 1, statement)
            return body
        # Take over the next import's leading blank lines/comments so the group stays tight.
        index = siblings[position].body_index
        anchor = body[index]
        body[index] = anchor.with_changes(leading_lines=())
        body.insert(index, statement.with_changes(leading_lines=anchor.leading_lines))
        return body
    separated = statement.with_changes(leading_lines=(cst.EmptyLine(),))
    last_import = _last_import_index(tree)
    if last_import is not None:
        body.insert(last_import + 1, separated)
    elif body and _is_docstring(body[0]):
        body.insert(1, separated)
    else:
        body.insert(0, statement)
    return body


def _last_import_index(tree: cst.Module) -> int | None:
    indices = [
        index
        for index, statement in enumerate(tree.body)
        if isinstance(statement, cst.SimpleStatementLine)
        and any(isinstance(small, cst.Import | cst.ImportFrom) for small in statement.body)
    ]
    return indices[-1] if indices else None


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def drop_orphaned_imports(before: str, after: str, package: str) -> str:
    """``after`` without the names imported from ``package`` (or a module in it) that
    ``before`` used and ``after`` no longer does (a registry entry re-pointed to a new class
    leaves the old one imported for nothing, which the library's lint reports)."""
    orphaned = _used_names(before) - _used_names(after)
    tree = parse_module(after)
    trimmed: dict[int, cst.ImportFrom | None] = {}  # id of an import -> it trimmed; None: gone
    for site in _import_sites(tree):
        inside = site.module == package or site.module.startswith(f"{package}.")
        if not inside or isinstance(site.node.names, cst.ImportStar):
            continue
        kept = [alias for alias in site.node.names if _alias_name(alias) not in orphaned]
        if len(kept) == len(site.node.names):
            continue
        if kept and site.node.rpar is None:  # no parentheses: no comma may trail the last name
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        trimmed[id(site.node)] = site.node.with_changes(names=kept) if kept else None
    if not trimmed:
        return after
    body = []
    for statement in tree.body:
        if isinstance(statement, cst.SimpleStatementLine):
            small = [trimmed.get(id(s), s) for s in statement.body]
            kept = [s for s in small if s is not None]
            if not kept:
                continue  # every import of the line is gone, and the line with them
            statement = statement.with_changes(body=kept)
        body.append(statement)
    return tree.with_changes(body=body).code


def _used_names(source: str) -> set[str]:
    """The names a module reads outside its import statements."""

    class _Names(cst.CSTVisitor):
        def __init__(self) -> None:
            self.found: set[str] = set()

        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_Name(self, node: cst.Name) -> None:
            self.found.add(node.value)

    names = _Names()
    parse_module(source).visit(names)
    return names.found
