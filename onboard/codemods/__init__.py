"""Idempotent source-to-source edits of registry files, built on libcst.

Each codemod is a pure ``(source, ...) -> str`` function: it returns the input unchanged
(byte for byte) when the wanted state already holds, otherwise the minimal edit, keeping
every comment, blank line and untouched line as it was. Files whose shape is not the
expected one raise :class:`CodemodError` instead of being guessed at.
"""

from __future__ import annotations

from onboard.codemods._classes import defined_classes, upsert_classes
from onboard.codemods._dicts import dict_neighbours, upsert_dict_entry
from onboard.codemods._dunder_all import add_to_all
from onboard.codemods._errors import CodemodError
from onboard.codemods._imports import add_from_import, drop_orphaned_imports
from onboard.codemods._lists import upsert_tuple_in_list
from onboard.codemods._ordered_dicts import upsert_ordereddict_entry

__all__ = [
    "CodemodError",
    "add_from_import",
    "add_to_all",
    "defined_classes",
    "dict_neighbours",
    "drop_orphaned_imports",
    "upsert_classes",
    "upsert_dict_entry",
    "upsert_ordereddict_entry",
    "upsert_tuple_in_list",
]
