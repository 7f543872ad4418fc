"""Analyse every causal-LM type of the installed transformers in one process (a benchmark).

For each model type in ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` it writes transformers' default
config (plus ``architectures``) to a temporary checkpoint folder, loads it with
``onboard.source.load_source`` and runs ``onboard.analysis.analyse``. An ``OnboardError`` is an
expected refusal; any other exception raised by onboard is a crash. A type whose default config
transformers itself cannot build never reaches onboard and is listed apart ("no default config").

    .venv/bin/python benchmarks/inspect_all.py [--only llama,qwen3] [--tracebacks]

Goal: no crash, and the whole sweep under 60 s on a 2-core machine. Exit status 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

GOAL_SECONDS = 60.0
OUTCOMES = ("complete", "unresolved", "refused", "crash", "no_config")


@dataclass
class Outcome:
    model_type: str
    kind: str
    outcome: str  # one of OUTCOMES
    detail: str
    seconds: float
    unresolved: int = 0
    top_frame: str = ""
    trace: str = ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _one_line(text: str, width: int = 110) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _onboard_frame(exc: BaseException) -> str:
    """The innermost traceback frame inside onboard/ (where onboard let the error through)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/onboard/" in f.filename]
    if not frames:
        return ""
    frame = frames[-1]
    return f"{frame.filename.rsplit('/onboard/', 1)[-1]}:{frame.lineno} in {frame.name}"


def write_default_config(model_type: str, root: Path) -> Path:
    """transformers' default config for ``model_type`` as a checkpoint folder."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = CONFIG_MAPPING[model_type]().to_dict()
    config["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]]
    folder = root / model_type
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2, default=str))
    return folder


def _kind(source: object) -> str:
    """The classification kind, also for types the analysis refuses."""
    from onboard.classify import classify
    from onboard.errors import OnboardError

    modeling = source.hf_file("modeling_")  # type: ignore[attr-defined]
    try:
        return str(classify(source.config, modeling.text if modeling else None).kind)  # type: ignore[attr-defined]
    except OnboardError:
        return "?"


def inspect_type(model_type: str, root: Path) -> Outcome:
    from onboard.analysis import analyse
    from onboard.errors import OnboardError
    from onboard.source import load_source

    start = time.perf_counter()
    try:
        folder = write_default_config(model_type, root)
    except Exception as exc:  # transformers' own default config does not build
        return Outcome(model_type, "?", "no_config", _first_line(exc), time.perf_counter() - start)
    kind = "?"
    try:
        source = load_source(str(folder))
        kind = _kind(source)
        spec = analyse(source).spec
    except OnboardError as exc:
        return Outcome(model_type, kind, "refused", _first_line(exc), time.perf_counter() - start)
    except Exception as exc:  # anything but OnboardError is a crash
        return Outcome(
            model_type,
            kind,
            "crash",
            _first_line(exc),
            time.perf_counter() - start,
            top_frame=_onboard_frame(exc),
            trace=traceback.format_exc(),
        )
    seconds = time.perf_counter() - start
    if not spec.unresolved:
        return Outcome(model_type, spec.kind, "complete", "", seconds)
    first = spec.unresolved[0]
    return Outcome(
        model_type,
        spec.kind,
        "unresolved",
        f"{first.what} @ {first.where}",
        seconds,
        unresolved=len(spec.unresolved),
    )


def describe(o: Outcome) -> str:
    if o.outcome == "complete":
        return "spec complete"
    if o.outcome == "unresolved":
        return f"spec with {o.unresolved} unresolved (first: {_one_line(o.detail, 80)})"
    if o.outcome == "refused":
        return "refused: " + _one_line(o.detail)
    if o.outcome == "no_config":
        return "no default config (transformers: " + _one_line(o.detail, 80) + ")"
    return f"CRASH {_one_line(o.detail, 90)} [{o.top_frame or 'outside onboard/'}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model types (default: all)")
    parser.add_argument("--tracebacks", action="store_true", help="print each crash's traceback")
    args = parser.parse_args(argv)

    wall_start = time.perf_counter()
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    import onboard.analysis  # noqa: F401 - the import is counted once, outside per-type times

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    import_seconds = time.perf_counter() - wall_start

    types = list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    if args.only:
        wanted = set(args.only.split(","))
        types = [t for t in types if t in wanted]

    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="onboard-inspect-") as tmp:
        for model_type in types:
            outcome = inspect_type(model_type, Path(tmp))
            outcomes.append(outcome)
            print(
                f"{model_type:<28} {outcome.kind:<15} {outcome.seconds:5.2f} s  "
                f"{describe(outcome)}",
                flush=True,
            )

    wall = time.perf_counter() - wall_start
    counts = {k: sum(o.outcome == k for o in outcomes) for k in OUTCOMES}
    crashes = [o for o in outcomes if o.outcome == "crash"]
    print()
    print(
        f"types: {len(outcomes)}  complete: {counts['complete']}  "
        f"with unresolved: {counts['unresolved']}  refused: {counts['refused']}  "
        f"crashes: {counts['crash']}  no default config: {counts['no_config']}"
    )
    print(f"wall time: {wall:.1f} s (imports {import_seconds:.1f} s; goal < {GOAL_SECONDS:.0f} s)")
    slow = sorted(outcomes, key=lambda o: -o.seconds)[:5]
    print("slowest: " + ", ".join(f"{o.model_type} {o.seconds:.2f} s" for o in slow))
    if crashes:
        print("\ncrashes:")
        for o in crashes:
            print(f"  {o.model_type}: {o.detail}\n    top onboard frame: {o.top_frame or '-'}")
            if args.tracebacks:
                print("    " + o.trace.rstrip().replace("\n", "\n    "))
    no_config = [o for o in outcomes if o.outcome == "no_config"]
    if no_config:
        print("\nno default config (transformers cannot build one; onboard never ran):")
        for o in no_config:
            print(f"  {o.model_type}: {_one_line(o.detail, 120)}")
    return 0 if not crashes and wall < GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
