"""What an exception that escaped a command means for the user: its outcome class and one line.

onboard's own errors carry their exit code. Anything else is sorted by where it was raised: in
the checkpoint's own code (imported from ``onboard_remote_<hash>`` packages), by the machine
(permissions, a full or read-only disk), or in onboard itself, which is a bug: its traceback goes
to a log file whose path the one line names, so the report can be filed.
"""

from __future__ import annotations

import errno
import os
import tempfile
import time
import traceback
from pathlib import Path

from onboard.errors import EnvironmentFailure, ExitCode, OnboardError, RemoteCodeError

# Errors the machine raises whatever onboard does; anything else from the OS is onboard's bug
_MACHINE_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EMFILE}
)
REMOTE_PACKAGE_PREFIX = "onboard_remote_"


class InternalError(OnboardError):
    """A bug in onboard; ``log`` holds the traceback."""

    exit_code = ExitCode.INTERNAL

    def __init__(self, message: str, log: Path | None) -> None:
        super().__init__(message)
        self.log = log


def classify(exc: BaseException) -> OnboardError:
    """The onboard error ``exc`` stands for (itself when it already is one)."""
    if isinstance(exc, OnboardError):
        return exc
    remote = remote_frame(exc)
    if remote is not None:
        return RemoteCodeError(
            f"the checkpoint's own code failed at {remote}: {_one_line(exc)} (not an onboard "
            "bug: that code may need CUDA kernels or another transformers)"
        )
    if isinstance(exc, OSError) and exc.errno in _MACHINE_ERRNOS:
        where = f": {exc.filename}" if exc.filename else ""
        return EnvironmentFailure(f"{exc.strerror or type(exc).__name__}{where}")
    log = write_log(exc)
    shown = f"; traceback in {log}" if log else ""
    return InternalError(f"internal error (a bug in onboard): {_one_line(exc)}{shown}", log)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def remote_frame(exc: BaseException) -> str | None:
    """``file:line`` of the innermost frame in the checkpoint's code, if the error passed there."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if f"/{REMOTE_PACKAGE_PREFIX}" in frame.filename.replace(os.sep, "/"):
            found = f"{Path(frame.filename).name}:{frame.lineno}"
    return found


def failure(exc: BaseException, doing: str) -> str:
    """One line: what the checkpoint's code raised while onboard was ``doing`` something (building
    or running its tiny model, importing it), and the line of that code where it was raised."""
    where = remote_frame(exc)
    at = f" at {where}" if where else ""
    lines = str(exc).splitlines()
    reason = f"{type(exc).__name__}: {lines[0][:160]}" if lines else type(exc).__name__
    return f"the checkpoint's own code failed {doing}{at}: {reason}"


def write_log(exc: BaseException) -> Path | None:
    """Write the traceback where the user can attach it to a bug report; None if that fails."""
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "onboard" / "logs"
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for where in (folder, Path(tempfile.gettempdir())):
        try:
            where.mkdir(parents=True, exist_ok=True)
            path = where / f"onboard-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None
