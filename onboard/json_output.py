"""The one JSON document every ``--json`` run prints on stdout, whatever its outcome.

Every document carries the same envelope (``schema_version``, ``command``, ``exit_code``,
``outcome``) beside the command's own fields; a run that fails before its command could report
prints the envelope with ``error`` (and ``items``, ``log`` where known). The schema is written
down in ``onboard/data/output.schema.json``; tests validate every command's outputs against it.
"""

from __future__ import annotations

import json
import math
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
    text = json.dumps(_finite(data), indent=2, sort_keys=True, default=str, allow_nan=False)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _finite(value: Any) -> Any:
    """``value`` with its infinities as strings: a config may hold Infinity (transformers writes
    it), but JSON has no such number, and a strict parser (jq, JSON.parse) refuses the token."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value).replace("inf", "Infinity").replace("nan", "NaN")
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
