"""Turn a ``Plan`` into files on disk: decide, then write everything or nothing.

Rendering is copier-style. Every file gets an action computed up front from the current text, the
planned text and the answers file (``.onboard/<model_type>.json``), which records the sha256 of
every owned file onboard last wrote. An owned file whose current hash no longer matches that
record was edited by hand, so it is a conflict unless forced. Only when every decision is made
and no conflict is left does anything touch the disk, and then through ``journal.commit``, whose
journal lets even a killed run be rolled back, so a library is never left half-onboarded.

Presentation (``print_result``) is kept apart from the logic so the CLI, tests and JSON output
all read the same ``RenderResult``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text
from rich.tree import Tree

from onboard.errors import BadInputError, ConflictError, EnvironmentFailure, OnboardError
from onboard.journal import Write, commit
from onboard.plan import FileChange, Plan

ANSWERS_DIR = ".onboard"
_MODEL_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class Action(Enum):
    """What rendering does (or, in a dry run, would do) to one file."""

    CREATE = "create"
    IDENTICAL = "identical"
    UPDATE = "update"
    CONFLICT = "conflict"
    FORCED = "forced"


_WRITES = frozenset({Action.CREATE, Action.UPDATE, Action.FORCED})


@dataclass(frozen=True)
class FileResult:
    """The decision for one file; ``diff`` is a unified diff, empty when nothing differs."""

    path: str
    action: Action
    diff: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "action": self.action.value, "diff": self.diff}


@dataclass(frozen=True)
class RenderResult:
    """Every decision of one render; ``files`` follows the plan's order, ``answers`` is apart."""

    root: Path
    dry_run: bool
    files: tuple[FileResult, ...]
    answers: FileResult

    @property
    def all_files(self) -> tuple[FileResult, ...]:
        """The plan's files followed by the answers file, as a report shows them."""
        return (*self.files, self.answers)

    @property
    def changed(self) -> bool:
        """Whether the render wrote (or a dry run would write) anything."""
        return any(result.action in _WRITES for result in self.all_files)

    @property
    def conflicts(self) -> tuple[str, ...]:
        """Paths edited by hand; only a dry run can return a result that has any."""
        return tuple(r.path for r in self.files if r.action is Action.CONFLICT)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "dry_run": self.dry_run,
            "changed": self.changed,
            "files": [result.to_json() for result in self.files],
            "answers": self.answers.to_json(),
        }


@dataclass(frozen=True)
class _Current:
    """What is on disk now at one destination (``data`` is None when nothing is there)."""

    data: bytes | None
    mode: int | None


def render(
    plan: Plan, root: Path, *, dry_run: bool = False, force: bool = False, stamp: str
) -> RenderResult:
    """Apply ``plan`` under ``root``, or only report what would change when ``dry_run``.

    Raises ``ConflictError`` (before writing anything) when an owned file was edited by hand and
    ``force`` is not set; a dry run reports such files as ``CONFLICT`` instead, so their diff can
    be shown. Raises ``OnboardError`` for a path outside ``root`` or a failed write, after
    undoing every write of this call.
    """
    real_root = _real_root(root)
    answers_path = _answers_path(plan.model_type)
    *dests, answers_dest = _destinations(real_root, [*plan.paths(), answers_path])
    recorded = _recorded_hashes(answers_dest)
    decided = [
        _decide(change, dest, recorded.get(change.path), force=force)
        for change, dest in zip(plan.changes, dests, strict=True)
    ]
    decided.append(_decide_shared(answers_path, answers_dest, _answers_text(plan, stamp)))
    *files, answers = (file for file, _ in decided)
    writes = [write for _, write in decided if write is not None]
    result = RenderResult(Path(root), dry_run, tuple(files), answers)
    if result.conflicts and not dry_run:
        raise ConflictError(_conflict_message(result.conflicts))
    if not dry_run:
        commit(real_root, writes)
    return result


# --- paths ---------------------------------------------------------------------------------------


def _real_root(root: Path) -> Path:
    try:
        return Path(root).resolve()
    except (OSError, RuntimeError) as exc:
        raise EnvironmentFailure(f"cannot resolve the target root {root}: {exc}") from exc


def generated_before(root: Path, model_type: str) -> bool:
    """Whether onboard already wrote this model into ``root`` (its answers file exists)."""
    return (Path(root) / _answers_path(model_type)).is_file()


def _answers_path(model_type: str) -> str:
    """The answers file's plan-relative path; the model type must be a plain file name."""
    if not _MODEL_TYPE.fullmatch(model_type) or ".." in model_type:
        raise BadInputError(
            f"model type {model_type!r} cannot name an answers file: "
            "use letters, digits, '_', '-' or '.'"
        )
    return f"{ANSWERS_DIR}/{model_type}.json"


def _destinations(real_root: Path, paths: list[str]) -> list[Path]:
    """Resolve every path under the root, refusing escapes and two paths naming one file."""
    seen: dict[Path, str] = {}
    dests = []
    for path in paths:
        dest = _destination(real_root, path)
        if dest in seen:
            raise OnboardError(f"{path} and {seen[dest]} name the same file; fix the plan")
        seen[dest] = path
        dests.append(dest)
    return dests


def _destination(real_root: Path, path: str) -> Path:
    """The real file ``path`` names: lexically inside the root and still inside once resolved.

    Resolving follows symlinks, so a link (or a linked parent directory) pointing out of the root
    is refused, and one pointing inside it is written through rather than replaced.
    """
    posix = PurePosixPath(path)
    if (
        not path
        or "\\" in path
        or "\0" in path
        or posix.is_absolute()
        or PureWindowsPath(path).drive
        or ".." in posix.parts
        or not posix.parts
    ):
        raise OnboardError(f"refusing to write {path!r}: paths must be relative and stay in root")
    try:
        dest = (real_root / posix).resolve()
    except (OSError, RuntimeError) as exc:
        raise EnvironmentFailure(f"cannot resolve {path}: {exc}") from exc
    if dest == real_root or not dest.is_relative_to(real_root):
        raise BadInputError(f"refusing to write {path}: it resolves to {dest}, outside {real_root}")
    return dest


# --- decisions -----------------------------------------------------------------------------------


def _read(path: str, dest: Path) -> _Current:
    try:
        info = dest.stat()
    except FileNotFoundError:
        return _Current(None, None)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise EnvironmentFailure(f"cannot write {path}: something other than a file is there")
    try:
        return _Current(dest.read_bytes(), stat.S_IMODE(info.st_mode))
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read {path}: {exc.strerror or exc}") from exc


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _recorded_hashes(answers_dest: Path, key: str = "files") -> dict[str, str]:
    """Hashes from the last generation; a missing or unreadable record means none.

    Treating a damaged record as empty is safe: differing owned files then become conflicts,
    which only ``--force`` overwrites.
    """
    return _recorded(answers_dest, key) or {}


def _recorded(answers_dest: Path, key: str) -> dict[str, str] | None:
    """The string mapping the answers file records under ``key``; None when the file is
    missing or unreadable or has no such key, empty when the key holds no mapping."""
    try:
        data = json.loads(answers_dest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or key not in data:
        return None
    mapping = data[key]
    if not isinstance(mapping, dict):
        return {}
    return {k: v for k, v in mapping.items() if isinstance(k, str) and isinstance(v, str)}


def recorded_files(root: Path, model_type: str) -> dict[str, str]:
    """The files onboard wrote for ``model_type`` under ``root`` (path -> sha256), maybe none."""
    return _recorded_hashes(Path(root) / _answers_path(model_type))


def recorded_hidden(root: Path, model_type: str) -> dict[str, str] | None:
    """The registry entries an earlier ``--treat-as-new`` run hid (key -> the library's class);
    None when no run recorded them (none yet, or an answers file older than the record)."""
    return _recorded(Path(root) / _answers_path(model_type), "hidden")


def recorded_remote_code(root: Path, model_type: str) -> tuple[Path, dict[str, str]]:
    """The answers file under ``root`` and the remote-code hashes it recorded (maybe none)."""
    path = Path(root) / _answers_path(model_type)
    return path, _recorded_hashes(path, "remote_code")


def _decide(
    change: FileChange, dest: Path, recorded: str | None, *, force: bool
) -> tuple[FileResult, Write | None]:
    if not change.owned:
        return _decide_shared(change.path, dest, change.content)
    current = _read(change.path, dest)
    new = change.content.encode("utf-8")
    action = _owned_action(current.data, new, recorded, force=force)
    return _outcome(change.path, dest, current, new, action)


def _owned_action(before: bytes | None, new: bytes, recorded: str | None, *, force: bool) -> Action:
    """An owned file may only be replaced silently if it still holds what onboard wrote."""
    if before is None:
        return Action.CREATE
    if before == new:
        return Action.IDENTICAL
    if recorded is not None and recorded == _sha256(before):
        return Action.UPDATE
    return Action.FORCED if force else Action.CONFLICT


def _decide_shared(path: str, dest: Path, content: str) -> tuple[FileResult, Write | None]:
    """Shared files already carry the user's edits in ``content``, so they never conflict."""
    current = _read(path, dest)
    new = content.encode("utf-8")
    if current.data is None:
        action = Action.CREATE
    else:
        action = Action.IDENTICAL if current.data == new else Action.UPDATE
    return _outcome(path, dest, current, new, action)


def _outcome(
    path: str, dest: Path, current: _Current, new: bytes, action: Action
) -> tuple[FileResult, Write | None]:
    diff = "" if action is Action.IDENTICAL else _diff(path, current.data, new)
    write = Write(path, dest, new, current.data, current.mode) if action in _WRITES else None
    return FileResult(path, action, diff), write


def _diff(path: str, before: bytes | None, after: bytes) -> str:
    """A unified diff ``git apply`` takes: a new file comes from /dev/null."""
    old = (before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    new = after.decode("utf-8", errors="replace").splitlines(keepends=True)
    source = "/dev/null" if before is None else f"a/{path}"
    lines = difflib.unified_diff(old, new, fromfile=source, tofile=f"b/{path}")
    return "".join(_terminated(lines))


def _terminated(lines: Iterable[str]) -> Iterator[str]:
    """Mark a last line without a newline the way ``git diff`` does, instead of gluing lines."""
    for line in lines:
        yield line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n"


def _answers_text(plan: Plan, stamp: str) -> str:
    files = {c.path: _sha256(c.content.encode("utf-8")) for c in plan.changes if c.owned}
    answers: dict[str, object] = {
        "onboard": stamp,
        "target": plan.target,
        "model_type": plan.model_type,
        "files": files,
    }
    if plan.remote_code:  # what parity may import next time, pinned
        answers["remote_code"] = dict(plan.remote_code)
    answers["hidden"] = dict(plan.hidden)  # also when none: a record without it predates it
    if plan.provenance:
        answers["provenance"] = plan.provenance
    return json.dumps(answers, indent=2, sort_keys=True) + "\n"


def _conflict_message(paths: tuple[str, ...]) -> str:
    return (
        f"not overwriting {', '.join(paths)}: edited by hand since onboard generated them, or "
        "never generated by onboard; nothing was written. Re-run with --force to overwrite them"
    )


# --- presentation --------------------------------------------------------------------------------

_STYLES = {
    Action.CREATE: "green",
    Action.UPDATE: "yellow",
    Action.IDENTICAL: "dim",
    Action.CONFLICT: "red",
    Action.FORCED: "magenta",
}
_VERB_WIDTH = max(len(action.value) for action in Action)


def print_result(result: RenderResult, console: Console, *, show_diffs: bool) -> None:
    """Show what happened as a tree of the root, a count per action, and diffs if asked."""
    console.print(_tree(result))
    console.print(_summary(result))
    if not show_diffs:
        return
    for file in result.files:  # the answers file's diff is bookkeeping, not worth reading
        if not file.diff:
            continue
        if console.is_terminal:
            console.print(Syntax(file.diff, "diff"))
        else:  # piped: the bytes themselves, unpadded and uncoloured, so `git apply` takes them
            console.file.write(file.diff)


def _tree(result: RenderResult) -> Tree:
    tree = Tree(Text(str(result.root), style="bold"))
    nodes: dict[tuple[str, ...], Tree] = {(): tree}
    for file in sorted(result.all_files, key=lambda f: PurePosixPath(f.path).parts):
        parts = PurePosixPath(file.path).parts
        _directory_node(nodes, parts[:-1]).add(_file_label(file.action, parts[-1]))
    return tree


def _directory_node(nodes: dict[tuple[str, ...], Tree], parts: tuple[str, ...]) -> Tree:
    if parts not in nodes:
        parent = _directory_node(nodes, parts[:-1])
        nodes[parts] = parent.add(Text(f"{parts[-1]}/", style="bold blue"))
    return nodes[parts]


def _file_label(action: Action, name: str) -> Text:
    # Text (not markup) so a bracket in a file name is never read as a style.
    return Text.assemble((action.value.ljust(_VERB_WIDTH), _STYLES[action]), " ", name)


def _summary(result: RenderResult) -> Text:
    counts = Counter(file.action for file in result.all_files)
    parts = [
        (f"{counts[action]} {action.value}", _STYLES[action]) for action in Action if counts[action]
    ]
    text = Text.assemble(*_joined(parts, ", "))
    if result.dry_run:
        text.append(" (dry run: nothing was written)", style="italic")
    return text


def _joined(parts: list[tuple[str, str]], separator: str) -> Iterator[tuple[str, str] | str]:
    for index, part in enumerate(parts):
        if index:
            yield separator
        yield part
