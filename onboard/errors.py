"""Typed errors and the exit codes the CLI maps them to.

Every error a user can fix carries a one-line message that says what went wrong and what to do
next; the CLI prints that line and exits with the error's code, never a traceback (set
``ONBOARD_DEBUG=1`` to see one).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Stable exit codes, documented in the README."""

    OK = 0
    FAILED = 1  # parity mismatch, dropped weights, lint errors
    BAD_INPUT = 2  # unknown model, malformed config, unsupported kind, bad --repo, usage
    CONFLICT = 3  # a generated file was edited by hand; re-run with --force
    UNSUPPORTED = 4  # the analysis found something the generator cannot express yet
    REFUSED = 5  # remote code needed but --trust-remote-code not given, or hashes differ
    REMOTE_CODE_FAILED = 6  # the checkpoint's own code (auto_map) raised while it ran
    ENVIRONMENT = 7  # the machine refused: permissions, a full or read-only disk
    INTERNAL = 8  # a bug in onboard itself; the traceback is written to a log file
    INTERRUPTED = 130  # SIGINT (Ctrl-C), as shells report it


# The outcome class each code stands for, in the ``--json`` error document
OUTCOMES: dict[ExitCode, str] = {
    ExitCode.OK: "ok",
    ExitCode.FAILED: "failed",
    ExitCode.BAD_INPUT: "bad_input",
    ExitCode.CONFLICT: "conflict",
    ExitCode.UNSUPPORTED: "unsupported",
    ExitCode.REFUSED: "refused",
    ExitCode.REMOTE_CODE_FAILED: "remote_code_failed",
    ExitCode.ENVIRONMENT: "environment",
    ExitCode.INTERNAL: "internal_error",
    ExitCode.INTERRUPTED: "interrupted",
}


def one_line(text: str, limit: int = 400) -> str:
    """A message on one line: its lines joined (the reason is often on the second), capped."""
    joined = " ".join(text.split())
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


class OnboardError(Exception):
    """Root of every error onboard reports to a user."""

    exit_code: ExitCode = ExitCode.FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInputError(OnboardError):
    """The model id, config, repository or options cannot be used as given."""

    exit_code = ExitCode.BAD_INPUT


class ModelNotFoundError(BadInputError):
    """The model id or path resolves to nothing: no path, cache entry, Hub repo or snapshot."""


class InvalidConfigError(BadInputError):
    """config.json exists but is not a usable model config."""


class UnsupportedKindError(BadInputError):
    """The architecture's kind is outside what onboard can generate (encoder-only, seq2seq, ...)."""


class TargetRepoError(BadInputError):
    """The --repo path is not a checkout of the target library, or its registry does not parse."""


class ConflictError(OnboardError):
    """A file onboard generated earlier was changed by hand; overwriting needs --force."""

    exit_code = ExitCode.CONFLICT


class UnsupportedFeatureError(OnboardError):
    """The spec has deltas no target component can express; ``items`` says which and where."""

    exit_code = ExitCode.UNSUPPORTED

    def __init__(self, message: str, items: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.items = items


class RefusedError(OnboardError):
    """Running remote code was needed but not allowed."""

    exit_code = ExitCode.REFUSED


class RemoteCodeError(OnboardError):
    """The checkpoint's own code failed to import or to run (not onboard's fault, not the
    user's input either: the code needs CUDA kernels, or an older transformers)."""

    exit_code = ExitCode.REMOTE_CODE_FAILED


class EnvironmentFailure(OnboardError):
    """The machine refused an operation onboard needs: a folder it may not write, a full disk."""

    exit_code = ExitCode.ENVIRONMENT
