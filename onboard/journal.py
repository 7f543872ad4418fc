"""Put a set of files in place all together or not at all, even if the process dies midway.

A commit writes a journal first (``<root>/.onboard/_journal.json``): every file it is about to
replace, with the bytes that were there (or ``null``: nothing was), every folder it is about to
make and the temporary name each new file is staged under. Only then are the new files staged
beside their destinations (same filesystem, so each ``os.replace`` is atomic) and swapped in, and
the journal is removed last. A journal found on disk therefore always means an unfinished commit,
and ``repair`` rolls it back to the state the journal recorded: the next run starts from the
checkout as it was, never from a half-onboarded one.

Every change to the disk goes through ``_perform``, one step at a time, so a test can stop a
commit or a repair at any step and check what is left. Each rollback step reads the disk before
it acts, so a repair that is itself interrupted is simply run again.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from onboard.errors import EnvironmentFailure

# A model type never starts with "_", so this cannot be any model's answers file.
JOURNAL = ".onboard/_journal.json"
_VERSION = 1
_TEMP_SUFFIX = ".onboard-tmp"


@dataclass(frozen=True)
class Write:
    """One file to put in place: ``before`` is what is there now (None: nothing), ``mode`` its
    permission bits, which the new file keeps."""

    path: str  # as the plan names it, for messages
    dest: Path  # resolved, under the root
    data: bytes
    before: bytes | None
    mode: int | None


@dataclass(frozen=True)
class _Entry:
    """One journalled file, relative to the root: where it goes and how to put it back."""

    path: str
    staged: str
    before: bytes | None
    mode: int | None


@dataclass(frozen=True)
class _Record:
    """What a commit is about to do: the journal's content."""

    dirs: tuple[str, ...]  # folders it makes, top-down, relative to the root
    entries: tuple[_Entry, ...]


# --- the commit ----------------------------------------------------------------------------------


def commit(root: Path, writes: Sequence[Write]) -> None:
    """Write every file or none; a failure or Ctrl-C rolls back what was done before raising.

    Raises ``EnvironmentFailure`` when a write fails. A process killed midway leaves the journal,
    which the next run's ``repair`` rolls back.
    """
    if not writes:
        return
    journal = root / JOURNAL
    if pending(root):  # its bytes are the only record of what to put back: never overwrite it
        raise EnvironmentFailure(
            f"an interrupted run left {journal}; run onboard new again to roll it back first"
        )
    record = _Record(
        _missing_dirs(root, [journal, *(w.dest for w in writes)]), _entries(root, writes)
    )
    current = JOURNAL
    try:
        for directory in _journal_dirs(root, record):
            _perform(partial(os.mkdir, _at(root, directory)))
        _perform(partial(_stage, _journal_temp(root), _encode(record), None, exclusive=False))
        _perform(partial(_swap, _journal_temp(root), journal))
        for directory in record.dirs:
            if not _at(root, directory).is_dir():
                _perform(partial(os.mkdir, _at(root, directory)))
        for write, entry in zip(writes, record.entries, strict=True):
            current = write.path
            _perform(partial(_stage, root / entry.staged, write.data, write.mode, exclusive=True))
        for write, entry in zip(writes, record.entries, strict=True):
            current = write.path
            _perform(partial(_swap, root / entry.staged, write.dest))
        current = JOURNAL
        _perform(partial(_unlink, journal))
    except BaseException as exc:
        unrestored = _roll_back(root, record)
        if not isinstance(exc, Exception):
            raise
        raise EnvironmentFailure(_failure_message(current, exc, unrestored, journal)) from exc


def _perform(step: Callable[[], object]) -> None:
    """Do one change to the disk: the only place any is done, so tests can stop at each one."""
    step()


def _missing_dirs(root: Path, files: list[Path]) -> tuple[str, ...]:
    """The folders that must be made for ``files``, top-down, each once."""
    missing: list[Path] = []
    for file in files:
        chain = []
        directory = file.parent
        while not directory.exists() and directory not in missing:
            chain.append(directory)
            directory = directory.parent
        missing.extend(reversed(chain))
    return tuple(os.path.relpath(d, root) for d in missing)


def _journal_dirs(root: Path, record: _Record) -> list[str]:
    """The recorded folders the journal itself needs, so they are made before it is written."""
    home = (root / JOURNAL).parent
    return [d for d in record.dirs if home.is_relative_to(_at(root, d))]


def _at(root: Path, directory: str) -> Path:
    """A recorded folder: under the root, the root itself (".") or above it ("..")."""
    return Path(os.path.normpath(root / directory))


def _entries(root: Path, writes: Sequence[Write]) -> tuple[_Entry, ...]:
    return tuple(
        _Entry(
            path=w.dest.relative_to(root).as_posix(),
            staged=w.dest.with_name(f".{w.dest.name}.{secrets.token_hex(6)}{_TEMP_SUFFIX}")
            .relative_to(root)
            .as_posix(),
            before=w.before,
            mode=w.mode,
        )
        for w in writes
    )


def _journal_temp(root: Path) -> Path:
    """A fixed name, so a journal whose own writing was cut off is found and removed."""
    journal = root / JOURNAL
    return journal.with_name(journal.name + _TEMP_SUFFIX)


# --- disk steps ----------------------------------------------------------------------------------


def _stage(path: Path, data: bytes, mode: int | None, *, exclusive: bool) -> None:
    """Write ``data`` to ``path`` and flush it to disk; 0o666 lets the umask pick a new file's
    mode, an existing file's mode is kept."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            path.chmod(mode)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _swap(source: Path, dest: Path) -> None:
    """Rename atomically, then make the rename itself survive a power loss."""
    source.replace(dest)
    _sync_dir(dest.parent)


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)
    _sync_dir(path.parent)


def _rmdir_if_empty(path: Path) -> None:
    """A folder that holds something now, or cannot be removed, stays: it is only empty."""
    with contextlib.suppress(OSError):
        path.rmdir()


def _sync_dir(directory: Path) -> None:
    """Best effort: some filesystems cannot open or fsync a folder, and then there is no more
    to do."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


# --- rolling back --------------------------------------------------------------------------------


def repair(root: Path) -> str | None:
    """Roll back the commit an interrupted run left under ``root``; returns the notice to show,
    None when there was nothing to repair.

    Raises ``EnvironmentFailure`` when the journal cannot be read or a file cannot be put back;
    the journal then stays, so the next run tries again.
    """
    journal = root / JOURNAL
    _remove(_journal_temp(root))  # a journal cut off while written: nothing was swapped yet
    if not journal.exists():
        # all a commit killed before its journal was in place (or a repair killed after it was
        # gone) can leave is its empty folder
        if journal.parent.is_dir() and not any(journal.parent.iterdir()):
            _perform(partial(_rmdir_if_empty, journal.parent))
        return None
    record = _read(journal)
    changed = [e.path for e in record.entries if not _holds(root / e.path, e)]
    unrestored = _roll_back(root, record)
    if unrestored:
        raise EnvironmentFailure(
            f"could not roll back the interrupted run recorded in {journal}: "
            f"{', '.join(unrestored)} could not be put back; fix them by hand from that journal "
            "(each file's former bytes, base64), then delete it"
        )
    what = f"put back {', '.join(changed)}" if changed else "no file had changed yet"
    return f"rolled back a run interrupted while writing into {root}: {what}"


def pending(root: Path) -> bool:
    """Whether an interrupted run left a journal under ``root`` (for a dry run, which only says)."""
    return (root / JOURNAL).exists()


def _roll_back(root: Path, record: _Record) -> list[str]:
    """Put every journalled file back and remove what the commit made; returns what failed.

    The journal goes only when everything is back, and the folders it sits in after it.
    """
    unrestored = []
    for entry in reversed(record.entries):
        try:
            _restore(root, entry)
        except OSError:
            unrestored.append(entry.path)
    if unrestored:
        return unrestored
    home = set(_journal_dirs(root, record))
    for directory in reversed(record.dirs):
        if directory not in home and _at(root, directory).is_dir():
            _perform(partial(_rmdir_if_empty, _at(root, directory)))
    try:
        _remove(_journal_temp(root))
        _remove(root / JOURNAL)
    except OSError:
        return [JOURNAL]
    for directory in reversed(record.dirs):
        if directory in home and _at(root, directory).is_dir():
            _perform(partial(_rmdir_if_empty, _at(root, directory)))
    return []


def _remove(path: Path) -> None:
    """Unlink ``path`` if anything is there (a step only when there is something to undo)."""
    if os.path.lexists(path):
        _perform(partial(_unlink, path))


def _restore(root: Path, entry: _Entry) -> None:
    """Make ``entry``'s destination hold what it held before, touching it only if it differs."""
    dest, staged = root / entry.path, root / entry.staged
    if _holds(dest, entry):
        _remove(staged)
    elif entry.before is None:
        _remove(dest)
        _remove(staged)
    else:  # the staged name is this journal's own, so it may be overwritten
        _perform(partial(_stage, staged, entry.before, entry.mode, exclusive=False))
        _perform(partial(_swap, staged, dest))


def _holds(dest: Path, entry: _Entry) -> bool:
    """Whether ``dest`` is already as the journal says it was before the commit."""
    try:
        data = dest.read_bytes()
    except FileNotFoundError:
        return entry.before is None
    except IsADirectoryError:
        return False
    return data == entry.before


def _failure_message(path: str, exc: BaseException, unrestored: list[str], journal: Path) -> str:
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__
    if not unrestored:
        return f"could not write {path}: {reason}; nothing was changed"
    return (
        f"could not write {path}: {reason}; undoing the other writes also failed for "
        f"{', '.join(unrestored)}: the next onboard run on this folder retries from {journal}"
    )


# --- the journal file ----------------------------------------------------------------------------


def _encode(record: _Record) -> bytes:
    document = {
        "onboard_journal": _VERSION,
        "dirs": list(record.dirs),
        "files": [
            {
                "path": e.path,
                "staged": e.staged,
                "before": None if e.before is None else base64.b64encode(e.before).decode(),
                "mode": e.mode,
            }
            for e in record.entries
        ],
    }
    return (json.dumps(document, indent=2) + "\n").encode()


def _read(journal: Path) -> _Record:
    try:
        document = json.loads(journal.read_bytes())
        if document.get("onboard_journal") != _VERSION:
            raise ValueError(f"unknown journal version {document.get('onboard_journal')!r}")
        return _Record(
            tuple(str(d) for d in document["dirs"]),
            tuple(_entry(item) for item in document["files"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EnvironmentFailure(
            f"cannot read {journal}, left by an interrupted onboard run: {exc}; check the files "
            "it names by hand, then delete it"
        ) from exc


def _entry(item: dict[str, Any]) -> _Entry:
    path, staged = _inside(item["path"]), _inside(item["staged"])
    if PurePosixPath(staged).parent != PurePosixPath(path).parent:
        raise ValueError(f"{staged} is not staged beside {path}")
    before = item["before"]
    mode = item["mode"]
    return _Entry(
        path,
        staged,
        None if before is None else base64.b64decode(before, validate=True),
        None if mode is None else int(mode),
    )


def _inside(path: object) -> str:
    """A journalled file path: relative and staying under the root (the journal is trusted no
    further than that)."""
    posix = PurePosixPath(str(path))
    if not str(path) or posix.is_absolute() or ".." in posix.parts:
        raise ValueError(f"{path!r} is not a path inside the folder")
    return posix.as_posix()
