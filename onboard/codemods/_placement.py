"""Where a new entry goes in a library's registry table: the place its maintainers would pick.

The tables onboard edits are kept by hand, and each follows its own convention, read here from
the file itself:

- **Sections.** mobius' ``_REGISTRATIONS``, ``_TEST_MODEL_IDS`` and test-config lists group
  entries under header comments (``# --- Mixture of Experts ---``, ``# === ... ===``, or a
  lone label such as ``# helpers``). A new entry joins the section of its closest model (the
  ``anchors``: the first one the table holds). With no anchor in the table the whole table is
  one range: a sorted one gets the entry in its sorted place, any other at its end.
- **Order within the section.** The sections, mobius' ``__all__`` and AutoModel's
  ``MODEL_ARCH_MAPPING`` are sorted by name with some entries out of place (aliases kept
  beside their model, drafters with their comment, case mixed, late additions). The entries
  in their place are the longest sorted run under the known order (``_ordering``) that keeps
  the most; the new entry goes right after the last of them that sorts before it (in a
  sorted section: its sorted position), so it never lands inside an out-of-place block.
- **No order.** A section where no order keeps half the entries (appended as they came) gets
  the new entry right after the anchor, or at its end.

Comments between entries belong to the entry below them, except a section header, which stays
at the top of its section: the returned :class:`Slot` says how many lines stay above the new
entry.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onboard.codemods._ordering import ORDER_KEYS
from onboard.codemods._sequence import Container, Item, insert_item, leading_comments

# A comment that opens a section: a run of -, =, #, * or ~ and then a title, or a lone label
# of a few words (``# helpers``); longer comments say something about the entry below them.
_HEADER = re.compile(r"^#\s*(?:-{2,}|={2,}|#{2,}|\*{2,}|~{2,})\s*\S")
_LABEL = re.compile(r"^#\s*\w[\w ()/-]{0,30}$")
_LABEL_WORDS = 4
Lines = tuple[str | None, ...]  # the comment lines in front of an entry, None for a blank one


@dataclass(frozen=True)
class Slot:
    """Insert before entry ``index`` (the length: at the end), below its first ``keep_above``
    comment lines (a section header) and above the rest (comments on that entry)."""

    index: int
    keep_above: int = 0


def place(
    keys: Sequence[str | None],
    leading: Sequence[Lines],
    new: str,
    anchors: Sequence[str] = (),
) -> Slot:
    """The slot for ``new`` among entries named ``keys`` (None: an entry without a name).

    ``leading[i]`` holds the lines in front of entry ``i``.
    """
    starts = _section_starts(leading)
    anchor = _first_present(keys, anchors)
    if anchor is None:
        start, end = 0, len(keys)
    else:
        start = max(s for s in starts if s <= anchor)
        end = min((s for s in starts if s > start), default=len(keys))
    index = _index_in(keys, start, end, new, anchor)
    # at a section's first entry the new one joins that section, below its header
    opens = index < end and (index == start or index in starts)
    return Slot(index, _header_lines(leading[index]) if opens else 0)


def _section_starts(leading: Sequence[Lines]) -> list[int]:
    return [0] + [i for i, lines in enumerate(leading) if i and _header_lines(lines)]


def _header_lines(lines: Lines) -> int:
    """How many of ``lines`` (from the top) run down to the last section header, 0 if none."""
    headers = [i for i, line in enumerate(lines) if line is not None and _HEADER.match(line)]
    comments = [i for i, line in enumerate(lines) if line is not None]
    if not headers and len(comments) == 1 and _is_label(lines[comments[0]] or ""):
        headers = comments
    return headers[-1] + 1 if headers else 0


def _is_label(line: str) -> bool:
    return bool(_LABEL.match(line)) and len(line.split()) <= _LABEL_WORDS + 1


def _first_present(keys: Sequence[str | None], anchors: Sequence[str]) -> int | None:
    """The first entry named by the first anchor the table holds."""
    for anchor in anchors:
        if anchor in keys:
            return keys.index(anchor)
    return None


def _index_in(
    keys: Sequence[str | None], start: int, end: int, new: str, anchor: int | None
) -> int:
    named = [(i, key) for i, key in enumerate(keys[start:end], start) if key is not None]
    sorted_run = _longest_sorted([key for _, key in named])
    if sorted_run is None:
        return anchor + 1 if anchor is not None and start <= anchor < end else end
    order, members = sorted_run
    run = [named[m] for m in members]
    new_key = order(new)
    before = [i for i, key in run if order(key) <= new_key]
    if before:
        return before[-1] + 1
    return run[0][0] if run else start


def _longest_sorted(
    keys: list[str],
) -> tuple[Callable[[str], tuple[object, ...]], list[int]] | None:
    """The known order most of ``keys`` follow, with the positions of its longest sorted run
    (the entries in their place; the others are aliases or late additions out of place), or
    None when no order holds half of them."""
    runs = [_run(order, keys) for order in ORDER_KEYS]
    best = max(range(len(runs)), key=lambda rank: (len(runs[rank]), -rank))
    if 2 * len(runs[best]) < len(keys):
        return None
    return ORDER_KEYS[best], runs[best]


def _run(order: Callable[[str], tuple[object, ...]], keys: list[str]) -> list[int]:
    """Positions of a longest non-decreasing subsequence of ``keys`` under ``order``."""
    ranked = [order(key) for key in keys]
    tails: list[int] = []  # tails[k]: the last position of the best run of length k + 1
    previous: list[int | None] = []
    for position, key in enumerate(ranked):
        k = bisect_right(tails, key, key=ranked.__getitem__)
        previous.append(tails[k - 1] if k else None)
        if k == len(tails):
            tails.append(position)
        else:
            tails[k] = position
    run: list[int] = []
    at = tails[-1] if tails else None
    while at is not None:
        run.append(at)
        at = previous[at]
    return run[::-1]


def insert_placed(
    container: Container, keys: Sequence[str | None], item: Item, new: str, anchors: Sequence[str]
) -> Container:
    """``container`` with ``item`` (named ``new``; ``keys`` name the existing entries) where
    :func:`place` puts it."""
    slot = place(keys, leading_comments(container), new, anchors)
    return insert_item(container, slot.index, item, slot.keep_above)


def neighbours(keys: Sequence[str | None], leading: Sequence[Lines], key: str) -> tuple[str, ...]:
    """The other entries of ``key``'s section, nearest first: anchors for the same model in a
    table that does not hold ``key`` itself."""
    if key not in keys:
        return ()
    index = keys.index(key)
    starts = _section_starts(leading)
    start = max(s for s in starts if s <= index)
    end = min((s for s in starts if s > index), default=len(keys))
    others = [(abs(i - index), i) for i in range(start, end) if i != index]
    return tuple(name for _, i in sorted(others) if (name := keys[i]) is not None)
