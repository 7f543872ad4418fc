"""Upsert one entry of a module-level dict literal (e.g. mobius ``_REGISTRATIONS``)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from onboard.codemods._errors import CodemodError
from onboard.codemods._placement import insert_placed, neighbours
from onboard.codemods._sequence import leading_comments
from onboard.codemods._source import (
    describe,
    find_assigned_value,
    parse_expression_arg,
    parse_module,
    replace_node,
    same_expression,
    string_literal,
    string_value,
)


def upsert_dict_entry(
    source: str, variable: str, key: str, value: str, anchors: Sequence[str] = ()
) -> str:
    """Make ``variable[key]`` be ``value`` (expression source) in the dict literal.

    Returns ``source`` unchanged when an equivalent entry is already there, replaces only
    the value when it differs, and otherwise adds the entry in the dict's layout, in the
    section of the first of ``anchors`` (the closest models) the dict holds, in its order
    (see ``_placement``).
    """
    module = parse_module(source)
    new_value = parse_expression_arg(value, "value")
    mapping = _dict_literal(module, variable)
    existing = _entry_for(mapping, key)
    if existing is not None:
        if same_expression(existing.value, new_value):
            return source
        return replace_node(module, existing, existing.with_changes(value=new_value))
    entry = _new_entry(mapping, key, new_value)
    placed = insert_placed(mapping, _keys(mapping), entry, key, anchors)
    return replace_node(module, mapping, placed)


def dict_neighbours(source: str, variable: str, key: str) -> tuple[str, ...]:
    """The keys of ``key``'s section of the dict, nearest first (none if it is not there)."""
    mapping = _dict_literal(parse_module(source), variable)
    return neighbours(_keys(mapping), leading_comments(mapping), key)


def _keys(mapping: cst.Dict) -> list[str | None]:
    return [
        string_value(element.key) if isinstance(element, cst.DictElement) else None
        for element in mapping.elements
    ]


def _dict_literal(module: cst.Module, variable: str) -> cst.Dict:
    value = find_assigned_value(module, variable)
    if not isinstance(value, cst.Dict):
        raise CodemodError(f"module-level `{variable}` is {describe(value)}, not a dict literal")
    return value


def _entry_for(mapping: cst.Dict, key: str) -> cst.DictElement | None:
    """The entry Python would keep for ``key`` (the last one, if written twice)."""
    matches = [
        element
        for element in mapping.elements
        if isinstance(element, cst.DictElement) and string_value(element.key) == key
    ]
    return matches[-1] if matches else None


def _new_entry(mapping: cst.Dict, key: str, value: cst.BaseExpression) -> cst.DictElement:
    """An entry quoted and spaced like the dict's last ``key: value`` entry."""
    entries = [element for element in mapping.elements if isinstance(element, cst.DictElement)]
    entry = cst.DictElement(
        key=string_literal(key, (element.key for element in entries)), value=value
    )
    if entries:
        entry = entry.with_changes(
            whitespace_before_colon=entries[-1].whitespace_before_colon,
            whitespace_after_colon=entries[-1].whitespace_after_colon,
        )
    return entry
