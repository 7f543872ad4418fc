"""What the benchmarks that onboard model types as a user would (day0.py, backlog.py) share: the
installed transformers' types, reonboard.py's `run` under a time cap, the one-line reason per
row and Markdown tables, so the benchmarks' rows read the same."""

from __future__ import annotations

import time
from pathlib import Path

from reonboard import fixture_configs, run

from tests.time_limit import TimeLimitExceeded, time_limit


def installed_types() -> dict[str, tuple[str, str]]:
    """The installed release's causal-LM and image-text-to-text types, each with its table and
    the class onboard builds it as (the causal LM where a type is in both tables, as
    tests/new_types.py's `default_config_dir` does)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    found = {
        t: ("image-text-to-text", c) for t, c in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.items()
    }
    return {**found, **{t: ("causal-lm", c) for t, c in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()}}


def capped_run(model_type: str, scratch: Path, timeout: int, target: str = "mobius") -> dict:
    """reonboard's run without --treat-as-new, stopped after ``timeout`` seconds (a type that
    hangs must not stop the benchmark)."""
    start = time.perf_counter()
    try:
        with time_limit(timeout):
            return run(model_type, fixture_configs(), scratch, target, treat_as_new=False)
    except TimeLimitExceeded:
        seconds = round(time.perf_counter() - start, 2)
        return {"model_type": model_type, "status": "timeout", "seconds": seconds}


def reason(row: dict, limit: int = 140) -> str:
    """One line: why it did not pass, or the class it was built on."""
    if row["status"] == "pass":
        return f"built on {row.get('closest') or 'the registered class'}"
    if row["status"] == "timeout":
        return "stopped at the time cap"
    return " ".join(str(row.get("detail", "")).split())[:limit]


def markdown_table(header: tuple[str, ...], rows: list[tuple]) -> str:
    """A Markdown table; a ``|`` inside a cell would end it, so it becomes ``/``."""
    lines = [header, ("---",) * len(header), *rows]
    return "\n".join(
        "| " + " | ".join(str(cell).replace("|", "/") for cell in line) + " |" for line in lines
    )
