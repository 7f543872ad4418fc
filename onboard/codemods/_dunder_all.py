"""Ensure a name is listed in the module-level ``__all__``."""

from __future__ import annotations

import libcst as cst

from onboard.codemods._errors import CodemodError
from onboard.codemods._placement import insert_placed
from onboard.codemods._source import (
    describe,
    find_assigned_value,
    parse_module,
    replace_node,
    string_literal,
    string_value,
)


def add_to_all(source: str, name: str) -> str:
    """Add ``name`` to ``__all__`` where the list's order puts it (``_placement``); no-op if
    present."""
    module = parse_module(source)
    exported = _all_literal(module)
    values = [
        string_value(element.value) if isinstance(element, cst.Element) else None
        for element in exported.elements
    ]
    if name in values:
        return source
    item = cst.Element(string_literal(name, (element.value for element in exported.elements)))
    updated = insert_placed(exported, values, item, name, ())
    return replace_node(module, exported, updated)


def _all_literal(module: cst.Module) -> cst.List | cst.Tuple:
    try:
        value = find_assigned_value(module, "__all__")
    except CodemodError:
        raise CodemodError("no module-level `__all__ = [...]` list found") from None
    if isinstance(value, cst.List) or (isinstance(value, cst.Tuple) and value.lpar):
        return value
    raise CodemodError(f"module-level `__all__` is {describe(value)}, not a list literal")
