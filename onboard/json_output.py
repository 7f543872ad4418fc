"""The one JSON document every ``--json`` run prints on stdout, whatever its outcome.

Every document carries the same envelope (``schema_version``, ``command``, ``exit_code``,
``outcome``) beside the command's own fields; a run that fails before its command could report
prints the envelope with ``error`` (and ``items``, ``log`` where known). The schema is written
down in ``onboard/data/output.schema.json``; tests validate every command's outputs against it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from onboard.errors import OUTCOMES, ExitCode, OnboardError

SCHEMA_VERSION = 1


def document(command: str, code: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` inside the envelope of a run of ``command`` that ends with ``code``."""
    exit_code = ExitCode(code)
    return {
        **data,
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "exit_code": int(exit_code),
        "outcome": OUTCOMES[exit_code],
    }


def error_document(command: str, error: OnboardError) -> dict[str, Any]:
    data: dict[str, Any] = {"error": error.message, "items": list(getattr(error, "items", ()))}
    log = getattr(error, "log", None)
    if log is not None:
        data["log"] = str(log)
    return document(command, error.exit_code, data)


def write(data: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
