"""Insert one item into a bracketed, comma-separated sequence, keeping its layout.

Lists, dicts, parenthesized tuples and ``from x import (...)`` all store the text between
items in the commas and brackets. Editing those whitespace nodes (never the text) lets an
added item copy its neighbours' indentation while every comment stays on its own line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar, cast

import libcst as cst

Item = cst.BaseElement | cst.BaseDictElement | cst.ImportAlias
Container = TypeVar("Container", cst.List, cst.Dict, cst.Tuple, cst.ImportFrom)

_NEW_CONTAINER_INDENT = "    "


@dataclass(frozen=True)
class _Parts:
    """The items plus the whitespace after the opening and before the closing bracket."""

    items: tuple[Item, ...]
    opening: cst.BaseParenthesizableWhitespace
    closing: cst.BaseParenthesizableWhitespace


def insert_item(
    container: Container, index: int, item: Item, keep_above: int | None = None
) -> Container:
    """Return ``container`` with ``item`` at ``index`` laid out like the existing items.

    Multi-line containers get the item on its own line with the neighbours' indentation
    and a trailing comma; one-liners get ``, item``; an empty container becomes
    multi-line with a 4-space indent. ``keep_above``: how many of the comment and blank
    lines in front of ``container[index]`` stay above the new item (the rest stay with the
    item they describe); None keeps them all above.
    """
    parts = _parts_of(container)
    if not parts.items:
        new_parts = _insert_into_empty(parts, item)
    elif _is_vertical(parts):
        new_parts = _insert_vertical(parts, index, item, keep_above)
    else:
        new_parts = _insert_inline(parts, index, item)
    return _rebuild(container, new_parts)


def _parts_of(container: cst.CSTNode) -> _Parts:
    if isinstance(container, cst.List):
        return _Parts(
            tuple(container.elements),
            container.lbracket.whitespace_after,
            container.rbracket.whitespace_before,
        )
    if isinstance(container, cst.Dict):
        return _Parts(
            tuple(container.elements),
            container.lbrace.whitespace_after,
            container.rbrace.whitespace_before,
        )
    if isinstance(container, cst.Tuple):
        if not container.lpar:
            raise ValueError("cannot insert into a tuple without parentheses")
        return _Parts(
            tuple(container.elements),
            container.lpar[-1].whitespace_after,
            container.rpar[0].whitespace_before,
        )
    if isinstance(container, cst.ImportFrom) and not isinstance(container.names, cst.ImportStar):
        if container.lpar is None or container.rpar is None:
            return _Parts(
                tuple(container.names), container.whitespace_after_import, cst.SimpleWhitespace("")
            )
        return _Parts(
            tuple(container.names),
            container.lpar.whitespace_after,
            container.rpar.whitespace_before,
        )
    raise TypeError(f"not an editable sequence: {type(container).__name__}")


def _rebuild(container: Container, parts: _Parts) -> Container:
    items = list(parts.items)
    if isinstance(container, cst.List):
        return container.with_changes(
            elements=items,
            lbracket=container.lbracket.with_changes(whitespace_after=parts.opening),
            rbracket=container.rbracket.with_changes(whitespace_before=parts.closing),
        )
    if isinstance(container, cst.Dict):
        return container.with_changes(
            elements=items,
            lbrace=container.lbrace.with_changes(whitespace_after=parts.opening),
            rbrace=container.rbrace.with_changes(whitespace_before=parts.closing),
        )
    if isinstance(container, cst.Tuple):
        lpar = [
            *container.lpar[:-1],
            container.lpar[-1].with_changes(whitespace_after=parts.opening),
        ]
        rpar = [
            container.rpar[0].with_changes(whitespace_before=parts.closing),
            *container.rpar[1:],
        ]
        return container.with_changes(elements=items, lpar=lpar, rpar=rpar)
    if container.lpar is None or container.rpar is None:
        return container.with_changes(names=items)
    return container.with_changes(
        names=items,
        lpar=container.lpar.with_changes(whitespace_after=parts.opening),
        rpar=container.rpar.with_changes(whitespace_before=parts.closing),
    )


def leading_comments(container: cst.CSTNode) -> tuple[tuple[str | None, ...], ...]:
    """For each item, the lines on their own in front of it: a comment's text, None if blank."""
    parts = _parts_of(container)
    lines = []
    for index in range(len(parts.items)):
        before = _whitespace_before(parts, index)
        empty = before.empty_lines if isinstance(before, cst.ParenthesizedWhitespace) else ()
        lines.append(tuple(line.comment.value if line.comment else None for line in empty))
    return tuple(lines)


def _whitespace_before(parts: _Parts, index: int) -> cst.BaseParenthesizableWhitespace:
    """The whitespace (and comments) in front of item ``index``."""
    if index == 0:
        return parts.opening
    comma = parts.items[index - 1].comma
    return comma.whitespace_after if isinstance(comma, cst.Comma) else cst.SimpleWhitespace("")


def _is_vertical(parts: _Parts) -> bool:
    return any(
        isinstance(_whitespace_before(parts, i), cst.ParenthesizedWhitespace)
        for i in range(len(parts.items))
    )


def _line_break(indent: bool, last_line: cst.SimpleWhitespace) -> cst.ParenthesizedWhitespace:
    """A bare newline followed by an indentation."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(),
        empty_lines=(),
        indent=indent,
        last_line=last_line,
    )


def _entry_indent(parts: _Parts) -> cst.ParenthesizedWhitespace:
    """The line break in front of the last item that starts its own line."""
    for index in reversed(range(len(parts.items))):
        whitespace = _whitespace_before(parts, index)
        if isinstance(whitespace, cst.ParenthesizedWhitespace):
            return whitespace
    raise AssertionError("_entry_indent needs a vertical sequence")


def _with_comma(item: Item, comma: cst.Comma | cst.MaybeSentinel) -> Item:
    return cast(Item, item.with_changes(comma=comma))


def _insert_vertical(parts: _Parts, index: int, item: Item, keep_above: int | None) -> _Parts:
    if index == len(parts.items):
        return _append_vertical(parts, item)
    before = _whitespace_before(parts, index)
    if not isinstance(before, cst.ParenthesizedWhitespace):
        return _insert_inline(parts, index, item)
    # The first ``keep_above`` lines above items[index] stay above the new item, which takes
    # its place; the others stay above items[index].
    lines = tuple(before.empty_lines)
    split = len(lines) if keep_above is None else min(keep_above, len(lines))
    if split < len(lines):
        parts = _with_whitespace_before(
            parts, index, before.with_changes(empty_lines=lines[:split])
        )
    separator = _line_break(before.indent, before.last_line).with_changes(empty_lines=lines[split:])
    items = list(parts.items)
    items.insert(index, _with_comma(item, cst.Comma(whitespace_after=separator)))
    return replace(parts, items=tuple(items))


def _with_whitespace_before(
    parts: _Parts, index: int, whitespace: cst.ParenthesizedWhitespace
) -> _Parts:
    """``parts`` with the whitespace in front of item ``index`` replaced."""
    if index == 0:
        return replace(parts, opening=whitespace)
    items = list(parts.items)
    comma = items[index - 1].comma
    assert isinstance(comma, cst.Comma)
    items[index - 1] = _with_comma(
        items[index - 1], comma.with_changes(whitespace_after=whitespace)
    )
    return replace(parts, items=tuple(items))


def _append_vertical(parts: _Parts, item: Item) -> _Parts:
    items = list(parts.items)
    last = items[-1]
    last_comma = last.comma if isinstance(last.comma, cst.Comma) else None
    entry = _entry_indent(parts)
    if isinstance(parts.closing, cst.ParenthesizedWhitespace):
        # Bracket on its own line; libcst keeps the newline (with the last item's
        # end-of-line comment and any comment lines before the bracket) here.
        return _append_before_bracket(parts, item, parts.closing, entry)
    if last_comma and isinstance(last_comma.whitespace_after, cst.ParenthesizedWhitespace):
        end = last_comma.whitespace_after
        appended = _append_before_bracket(parts, item, end, entry)
        *head, new_last = appended.items
        tail = _with_comma(new_last, cst.Comma(whitespace_after=appended.closing))
        return _Parts((*head, tail), parts.opening, parts.closing)
    # The bracket hugs the last item (hanging indent): keep it hugging.
    separator = _line_break(entry.indent, entry.last_line)
    items[-1] = _with_comma(
        last, (last_comma or cst.Comma()).with_changes(whitespace_after=separator)
    )
    items.append(_with_comma(item, last_comma or cst.MaybeSentinel.DEFAULT))
    return replace(parts, items=tuple(items))


def _append_before_bracket(
    parts: _Parts,
    item: Item,
    end: cst.ParenthesizedWhitespace,
    entry: cst.ParenthesizedWhitespace,
) -> _Parts:
    """Append when ``end`` is the line break in front of the closing bracket.

    The comments in ``end`` stay before the new item, which gets a trailing comma.
    """
    items = list(parts.items)
    last = items[-1]
    separator = cst.ParenthesizedWhitespace(
        first_line=end.first_line,
        empty_lines=end.empty_lines,
        indent=entry.indent,
        last_line=entry.last_line,
    )
    last_comma = last.comma if isinstance(last.comma, cst.Comma) else cst.Comma()
    items[-1] = _with_comma(last, last_comma.with_changes(whitespace_after=separator))
    items.append(_with_comma(item, cst.Comma()))
    return _Parts(tuple(items), parts.opening, _line_break(end.indent, end.last_line))


def _insert_inline(parts: _Parts, index: int, item: Item) -> _Parts:
    items = list(parts.items)
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if index < len(items):
        items.insert(index, _with_comma(item, space))
        return replace(parts, items=tuple(items))
    last = items[-1]
    # A trailing comma (``[a, b,]``) moves to the new last item.
    items[-1] = _with_comma(last, space)
    items.append(_with_comma(item, last.comma))
    return replace(parts, items=tuple(items))


def _insert_into_empty(parts: _Parts, item: Item) -> _Parts:
    first_line = cst.TrailingWhitespace()
    empty_lines: tuple[cst.EmptyLine, ...] = ()
    if isinstance(parts.opening, cst.ParenthesizedWhitespace):
        first_line = parts.opening.first_line
        empty_lines = tuple(parts.opening.empty_lines)
    opening = cst.ParenthesizedWhitespace(
        first_line=first_line,
        empty_lines=empty_lines,
        indent=True,
        last_line=cst.SimpleWhitespace(_NEW_CONTAINER_INDENT),
    )
    tail = cst.Comma(whitespace_after=_line_break(True, cst.SimpleWhitespace("")))
    return _Parts((_with_comma(item, tail),), opening, cst.SimpleWhitespace(""))
