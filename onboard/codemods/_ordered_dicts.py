"""Upsert one entry of a module-level ``OrderedDict([(key, value), ...])`` call.

NeMo AutoModel keeps its architecture registry (``MODEL_ARCH_MAPPING``) in this shape.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m

from onboard.codemods._errors import CodemodError
from onboard.codemods._lists import keyed_element, tuple_key
from onboard.codemods._placement import insert_placed
from onboard.codemods._source import (
    describe,
    find_assigned_value,
    parse_expression_arg,
    parse_module,
    replace_node,
    same_expression,
    string_literal,
)

_ORDERED_DICT_CALL = m.Call(
    func=m.Name("OrderedDict") | m.Attribute(attr=m.Name("OrderedDict")),
    args=[m.Arg(value=m.List(), keyword=None)],
)


def upsert_ordereddict_entry(
    source: str, variable: str, key: str, value: str, anchors: Sequence[str] = ()
) -> str:
    """Make ``variable[key]`` be ``value`` (expression source) in the ``OrderedDict`` call.

    Same contract as :func:`upsert_dict_entry`, ``anchors`` included: a new ``(key, value)``
    pair goes where ``_placement`` puts it in the call's list argument.
    """
    module = parse_module(source)
    new_value = parse_expression_arg(value, "value")
    pairs = _pairs_list(module, variable)
    existing = keyed_element(pairs, key)
    if existing is None:
        pair = cst.Element(_new_pair(pairs, key, new_value))
        keys = [
            tuple_key(item.value) if isinstance(item, cst.Element) else None
            for item in pairs.elements
        ]
        return replace_node(module, pairs, insert_placed(pairs, keys, pair, key, anchors))
    entry = existing.value
    if not isinstance(entry, cst.Tuple) or len(entry.elements) != 2:
        raise CodemodError(f"the `{variable}` entry for {key!r} is not a (key, value) pair")
    old_value = entry.elements[1]
    if same_expression(old_value.value, new_value):
        return source
    return replace_node(module, old_value, old_value.with_changes(value=new_value))


def _pairs_list(module: cst.Module, variable: str) -> cst.List:
    """The list literal passed to ``OrderedDict(...)`` in ``variable = OrderedDict([...])``."""
    value = find_assigned_value(module, variable)
    if not m.matches(value, _ORDERED_DICT_CALL):
        raise CodemodError(
            f"module-level `{variable}` is {describe(value)}, not `OrderedDict([...])`"
        )
    assert isinstance(value, cst.Call)
    pairs = value.args[0].value
    assert isinstance(pairs, cst.List)
    return pairs


def _new_pair(pairs: cst.List, key: str, value: cst.BaseExpression) -> cst.Tuple:
    """``(key, value)`` with the key quoted like the existing keys."""
    keys = (
        item.value.elements[0].value
        for item in pairs.elements
        if isinstance(item.value, cst.Tuple) and item.value.elements
    )
    return cst.Tuple([cst.Element(string_literal(key, keys)), cst.Element(value)])
