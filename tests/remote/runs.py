"""``onboard new <remote-code checkpoint> --trust-remote-code --json`` for the remote tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.test_cli import onboard


def trusted_new(folder: Path, out: Path, env: dict[str, str], *flags: str) -> dict[str, Any]:
    """The JSON report of a run that must succeed (exit 0)."""
    run = onboard(
        "new", str(folder), "--out", str(out), "--trust-remote-code", "--json", *flags, env=env
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)
