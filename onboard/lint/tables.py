"""Registry tables as written in the source: every key with its line, duplicates included.

Python keeps the last of two equal keys in a dict literal (and in ``OrderedDict([...])``), so a
duplicate silently replaces the earlier entry; reading the literal keeps both for the linter.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    key: str
    line: int
    value: ast.expr
    end_line: int  # the last line of the value: the item spans ``line`` to ``end_line``


@dataclass(frozen=True)
class Table:
    """A module-level mapping literal: ``name = {...}`` or ``name = OrderedDict([(k, v)])``."""

    name: str
    line: int
    items: tuple[Item, ...]

    def keys(self) -> frozenset[str]:
        return frozenset(item.key for item in self.items)

    def get(self, key: str) -> Item | None:
        """The item Python keeps for ``key`` (the last one)."""
        return next((item for item in reversed(self.items) if item.key == key), None)


def module_tables(tree: ast.Module) -> dict[str, Table]:
    """Every module-level mapping literal, by variable name (the last assignment wins)."""
    tables = {}
    for node in tree.body:
        target, value = _assignment(node)
        if target is None or value is None:
            continue
        items = _items(value)
        if items is not None:
            tables[target] = Table(target, node.lineno, tuple(items))
    return tables


def _assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return (target.id if isinstance(target, ast.Name) else None), node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


def _items(value: ast.expr) -> list[Item] | None:
    if isinstance(value, ast.Dict):
        return list(_dict_items(value))
    if (
        isinstance(value, ast.Call)
        and _callee(value.func) in ("OrderedDict", "dict")
        and len(value.args) == 1
        and isinstance(value.args[0], ast.List | ast.Tuple)
    ):
        return list(_pair_items(value.args[0]))
    return None


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _dict_items(value: ast.Dict) -> Iterator[Item]:
    for key, item in zip(value.keys, value.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            yield Item(key.value, key.lineno, item, item.end_lineno or key.lineno)


def _pair_items(value: ast.List | ast.Tuple) -> Iterator[Item]:
    for element in value.elts:
        if isinstance(element, ast.Tuple) and len(element.elts) == 2:
            key, item = element.elts
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield Item(key.value, key.lineno, item, element.end_lineno or key.lineno)


def string_tuple(node: ast.expr) -> tuple[str, ...] | None:
    """``("a", "b", {...})`` -> the leading string elements; None if not a tuple of strings."""
    if not isinstance(node, ast.Tuple):
        return None
    strings = []
    for element in node.elts:
        if not (isinstance(element, ast.Constant) and isinstance(element.value, str)):
            break
        strings.append(element.value)
    return tuple(strings)


def string_set(node: ast.expr) -> tuple[str, ...]:
    """String constants of a set/list/tuple literal (registry tags)."""
    if isinstance(node, ast.Set | ast.List | ast.Tuple):
        return tuple(
            e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
        )
    return ()
