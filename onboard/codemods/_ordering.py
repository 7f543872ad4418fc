"""Where a new name goes in an existing list of names.

Registry files are kept sorted by formatters (ruff/isort) that do not use plain string
order, so "is it sorted?" is checked against each ordering those tools produce.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import groupby, pairwise

_Chunk = tuple[int, int | str]


def natural_key(text: str) -> tuple[_Chunk, ...]:
    """Case-insensitive order with digit runs compared as numbers (``qwen3`` < ``qwen35``)."""
    chunks: list[_Chunk] = []
    for is_digit, run in groupby(text.lower(), key=str.isdigit):
        part = "".join(run)
        chunks.append((0, int(part)) if is_digit else (1, part))
    return tuple(chunks)


def _member_kind(name: str) -> int:
    """isort's order-by-type buckets: CONSTANTS, then Classes, then everything else."""
    if len(name) > 1 and name.isupper():
        return 0
    return 1 if name[:1].isupper() else 2


def _typed_key(name: str) -> tuple[int, tuple[_Chunk, ...]]:
    return (_member_kind(name), natural_key(name))


def _plain_key(name: str) -> tuple[str]:
    return (name,)


# Most specific first: ruff/isort's default order, then looser conventions.
ORDER_KEYS: tuple[Callable[[str], tuple[object, ...]], ...] = (_typed_key, natural_key, _plain_key)


def insertion_index(existing: Sequence[str | None], new: str) -> int:
    """The sorted position of ``new`` if ``existing`` is sorted by a known order, else the end.

    ``None`` marks an entry that is not a plain name (a starred item, an expression): its
    presence makes the order unknowable, so the new name is appended.
    """
    if any(name is None for name in existing):
        return len(existing)
    names = [name for name in existing if name is not None]
    for key in ORDER_KEYS:
        keys = [key(name) for name in names]
        if all(a <= b for a, b in pairwise(keys)):
            new_key = key(new)
            return next((i for i, k in enumerate(keys) if k > new_key), len(names))
    return len(existing)
