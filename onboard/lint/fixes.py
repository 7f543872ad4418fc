"""``--fix``: apply the mechanical edits findings carry, in one atomic write per file.

The only fixable problem so far is OB201: an inline ``family=`` / ``variant=`` /
``test_model_id=`` in a mobius ``ModelRegistration(...)`` that mobius drops. The fix removes the
keyword with a small libcst transform (formatting and comments elsewhere untouched) and, for a
``move-option`` edit, upserts the value into the side table with the shared codemods. Every edit
is computed in memory first; the file is then replaced through a temporary file and
``os.replace``, so a failure leaves the registry as it was.
"""

from __future__ import annotations

import ast
import secrets
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import libcst as cst

from onboard.codemods import CodemodError, upsert_dict_entry
from onboard.errors import OnboardError
from onboard.lint.findings import Edit
from onboard.lint.registry import MOBIUS_REGISTRATIONS

MOVE = "move-option"
DROP = "drop-option"


def apply_edits(path: Path, edits: Iterable[Edit]) -> tuple[Edit, ...]:
    """Apply ``edits`` to the registry at ``path``; returns the edits that changed the file."""
    edits = tuple(e for e in edits if e.kind in (MOVE, DROP))
    if not edits:
        return ()
    before = path.read_text(encoding="utf-8")
    after = edited_source(before, edits)
    if after == before:
        return ()
    _replace(path, after)
    return edits


def edited_source(source: str, edits: Iterable[Edit]) -> str:
    """``source`` with the inline options removed and the moved ones in their side tables."""
    edits = tuple(edits)
    drops: dict[str, set[str]] = defaultdict(set)
    for edit in edits:
        drops[edit.key].add(edit.option)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise OnboardError(
            f"cannot apply fixes: the registry does not parse ({exc.message})"
        ) from None
    updated = module.visit(_DropKeywords(MOBIUS_REGISTRATIONS, drops)).code
    moves: dict[str, list[Edit]] = defaultdict(list)
    for edit in edits:
        if edit.kind == MOVE:
            moves[edit.table].append(edit)
    for table, group in moves.items():
        updated = _upsert_into(updated, table, group)
    return updated


def _upsert_into(source: str, table: str, edits: list[Edit]) -> str:
    """Upsert the edits' entries into ``table``, re-parsing only that statement.

    The codemods parse the whole module per entry (1,300 lines for mobius' registry); cutting
    the assignment out and splicing it back keeps 18 moves well under a second.
    """
    start, end = _span(source, table)
    lines = source.splitlines(keepends=True)
    snippet = "".join(lines[start - 1 : end])
    try:
        for edit in edits:
            snippet = upsert_dict_entry(snippet, table, edit.key, edit.value)
    except CodemodError as exc:
        raise OnboardError(f"cannot move options into {table}: {exc.message}") from None
    return "".join(lines[: start - 1]) + snippet + "".join(lines[end:])


def _span(source: str, table: str) -> tuple[int, int]:
    """First and last line of the module-level statement assigning ``table``."""
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == table for t in targets):
            return node.lineno, node.end_lineno or node.lineno
    raise OnboardError(f"cannot move options: the registry has no {table} assignment")


class _DropKeywords(cst.CSTTransformer):
    """Remove keyword arguments from the calls that are values of ``variable``'s dict literal."""

    def __init__(self, variable: str, drops: dict[str, set[str]]) -> None:
        super().__init__()
        self.variable = variable
        self.drops = drops
        self.inside = 0

    def _targets_variable(self, node: cst.Assign | cst.AnnAssign) -> bool:
        targets = (
            [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        )
        return any(isinstance(t, cst.Name) and t.value == self.variable for t in targets)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.inside += self._targets_variable(node)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        self.inside -= self._targets_variable(original_node)
        return updated_node

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.inside += self._targets_variable(node)

    def leave_AnnAssign(
        self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign
    ) -> cst.AnnAssign:
        self.inside -= self._targets_variable(original_node)
        return updated_node

    def leave_DictElement(
        self, original_node: cst.DictElement, updated_node: cst.DictElement
    ) -> cst.DictElement:
        key = updated_node.key
        value = key.evaluated_value if isinstance(key, cst.SimpleString) else None
        options = self.drops.get(value) if isinstance(value, str) and self.inside else None
        if not options or not isinstance(updated_node.value, cst.Call):
            return updated_node
        return updated_node.with_changes(value=_without(updated_node.value, options))


def _without(call: cst.Call, options: set[str]) -> cst.Call:
    """``call`` minus the keyword arguments named in ``options``, keeping its layout."""
    args = list(call.args)

    def dropped(arg: cst.Arg) -> bool:
        return arg.keyword is not None and arg.keyword.value in options

    kept = [arg for arg in args if not dropped(arg)]
    if len(kept) == len(args) or not kept:
        return call
    if dropped(args[-1]):
        # The new last argument takes the old last one's comma and the whitespace before ")".
        kept[-1] = kept[-1].with_changes(
            comma=args[-1].comma, whitespace_after_arg=args[-1].whitespace_after_arg
        )
    return call.with_changes(args=kept)


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, keeping the file's mode."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.onboard-tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        temp.chmod(path.stat().st_mode)
        temp.replace(path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise OnboardError(
            f"could not write {path}: {exc.strerror or exc}; nothing was changed"
        ) from None
