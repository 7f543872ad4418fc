"""Upsert one tuple in a module-level list of tuples keyed by their first string.

This is the shape of mobius ``tests/_test_configs.py`` (``CAUSAL_LM_CONFIGS``) and, inside
``OrderedDict([...])``, of NeMo AutoModel's ``MODEL_ARCH_MAPPING``.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from onboard.codemods._errors import CodemodError
from onboard.codemods._placement import insert_placed
from onboard.codemods._source import (
    describe,
    find_assigned_value,
    parse_expression_arg,
    parse_module,
    replace_node,
    same_expression,
    string_value,
)


def upsert_tuple_in_list(
    source: str, variable: str, first_element: str, element: str, anchors: Sequence[str] = ()
) -> str:
    """Make the tuple starting with ``first_element`` in list ``variable`` be ``element``.

    ``element`` is the tuple's source text. Returns ``source`` unchanged when an equivalent
    tuple is there, replaces a differing one in place, else adds it in the list's layout, in
    the section of the first of ``anchors`` the list holds, in its order (``_placement``).
    Earlier tuples with the same key go, with the comment lines above them: every one of them
    builds the one class registered for the key, which is the new one now.
    """
    module = parse_module(source)
    new_tuple = parse_expression_arg(element, "element")
    if tuple_key(new_tuple) != first_element:
        raise ValueError(f"element must be a tuple starting with {first_element!r}: {element}")
    items = list_literal(module, variable)
    keyed = [i for i, item in enumerate(items.elements) if _keyed(item, first_element)]
    if len(keyed) > 1:
        module = cst.parse_module(replace_node(module, items, _without(items, keyed[:-1])))
        items = list_literal(module, variable)
    existing = keyed_element(items, first_element)
    if existing is None:
        keys = [
            tuple_key(item.value) if isinstance(item, cst.Element) else None
            for item in items.elements
        ]
        placed = insert_placed(items, keys, cst.Element(new_tuple), first_element, anchors)
        return replace_node(module, items, placed)
    if same_expression(existing.value, new_tuple):
        return source
    return replace_node(module, existing, existing.with_changes(value=new_tuple))


def _keyed(item: cst.BaseElement, key: str) -> bool:
    return isinstance(item, cst.Element) and tuple_key(item.value) == key


def _without(items: cst.List, indices: list[int]) -> cst.List:
    """``items`` without the elements at ``indices``, each with the lines above it: what
    follows an element's comma (the next element's comments) moves to the element before."""
    elements = list(items.elements)
    lbracket = items.lbracket
    for index in reversed(indices):
        after = elements[index].comma
        if index > 0:
            elements[index - 1] = elements[index - 1].with_changes(comma=after)
        elif isinstance(after, cst.Comma):
            lbracket = lbracket.with_changes(whitespace_after=after.whitespace_after)
        del elements[index]
    return items.with_changes(elements=elements, lbracket=lbracket)


def list_literal(module: cst.Module, variable: str) -> cst.List:
    """The list literal assigned to module-level ``variable``."""
    value = find_assigned_value(module, variable)
    if not isinstance(value, cst.List):
        raise CodemodError(f"module-level `{variable}` is {describe(value)}, not a list literal")
    return value


def tuple_key(node: cst.BaseExpression) -> str | None:
    """The string a tuple starts with, or None for anything else."""
    if isinstance(node, cst.Tuple) and node.elements:
        first = node.elements[0]
        if isinstance(first, cst.Element):
            return string_value(first.value)
    return None


def keyed_element(items: cst.List, key: str) -> cst.Element | None:
    """The last list element that is a tuple starting with ``key`` (Python's winner)."""
    matches = [
        item
        for item in items.elements
        if isinstance(item, cst.Element) and tuple_key(item.value) == key
    ]
    return matches[-1] if matches else None
