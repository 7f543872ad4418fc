"""Precision and recall of every catalogue feature against the hand-read labels (a benchmark).

Runs ``onboard.analysis.analyse`` on every type of ``tests/analysis/labels.py`` and compares the
detected ``feature_values`` with the labels, as ``tests/analysis/test_labels.py`` does. A
*positive* is a value different from the baseline (what a plain Llama has: no qk norm, no bias,
head_dim scale, pre-norm RMSNorm ...); a label ``Unresolved(reason)`` is a positive that is
detected correctly when onboard reports a delta containing ``reason``.

- precision = correct non-baseline detections / all non-baseline detections
- recall = correct non-baseline detections / all non-baseline labels
- accuracy = correct detections / labelled types

A type whose analysis fails emits no value: its labels count against recall and accuracy only.

    .venv/bin/python benchmarks/feature_accuracy.py [--only qwen3,gemma2]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.analysis.labels import (  # after the path fix-up
    BASELINE,
    LABELS,
    Unresolved,
    delta_texts,
    detected_features,
    expected_features,
    expected_unresolved,
    reported,
    source_for,
)

FAILED = "<analysis failed>"


@dataclass
class Score:
    labels_positive: int = 0
    detected_positive: int = 0
    true_positive: int = 0
    correct: int = 0
    total: int = 0

    @staticmethod
    def ratio(num: int, den: int) -> str:
        return f"{num / den:6.1%}" if den else "     -"


@dataclass
class Disagreement:
    model_type: str
    feature: str
    label: Any
    detected: Any
    known_bug: str | None


@dataclass
class Run:
    scores: dict[str, Score] = field(default_factory=lambda: {n: Score() for n in BASELINE})
    disagreements: list[Disagreement] = field(default_factory=list)
    unresolved_issues: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _show(value: Any) -> str:
    return f"unresolved({value.reason!r})" if isinstance(value, Unresolved) else repr(value)


def _analyse(entry: dict[str, Any]) -> Any:
    from onboard.analysis import analyse

    try:
        return analyse(source_for(entry)).spec
    except Exception as exc:  # reported, and scored as no detection
        return exc


def score(entries: list[dict[str, Any]]) -> Run:
    run = Run()
    for entry in entries:
        spec = _analyse(entry)
        labels = expected_features(entry)
        bugs = entry.get("bugs", {})
        if isinstance(spec, Exception):
            detected = dict.fromkeys(labels, FAILED)
            line = str(spec).splitlines()[0] if str(spec) else ""
            run.failures.append(f"{entry['type']}: {type(spec).__name__}: {line[:150]}")
        else:
            detected = detected_features(spec, entry)
            _check_unresolved(run, entry, spec)
        for name, label in labels.items():
            got = detected[name]
            s = run.scores[name]
            s.total += 1
            ok = got == label
            s.correct += ok
            label_positive = label != BASELINE[name]
            detected_positive = got != FAILED and got != BASELINE[name]
            s.labels_positive += label_positive
            s.detected_positive += detected_positive
            s.true_positive += ok and label_positive
            if not ok:
                known = bugs.get(name) or bugs.get("*")
                run.disagreements.append(Disagreement(entry["type"], name, label, got, known))
    return run


def _check_unresolved(run: Run, entry: dict[str, Any], spec: Any) -> None:
    if not expected_unresolved(entry):
        if spec.unresolved:
            run.unresolved_issues.append(
                f"{entry['type']}: expected a complete spec, got {delta_texts(spec)}"
            )
        return
    for reason in entry.get("unresolved", ()):
        if not reported(spec, reason):
            run.unresolved_issues.append(f"{entry['type']}: {reason!r} not reported")


def report(run: Run, entries: int, seconds: float) -> None:
    print(f"{entries} labelled types, analysed in {seconds:.1f} s\n")
    header = (
        f"{'feature':<26} {'labels+':>7} {'found+':>7} {'TP':>4} "
        f"{'precision':>9} {'recall':>7} {'accuracy':>8}"
    )
    print(header)
    print("-" * len(header))
    total = Score()
    for name, s in run.scores.items():
        print(
            f"{name:<26} {s.labels_positive:>7} {s.detected_positive:>7} {s.true_positive:>4} "
            f"{Score.ratio(s.true_positive, s.detected_positive):>9} "
            f"{Score.ratio(s.true_positive, s.labels_positive):>7} "
            f"{Score.ratio(s.correct, s.total):>8}"
        )
        for attr in ("labels_positive", "detected_positive", "true_positive", "correct", "total"):
            setattr(total, attr, getattr(total, attr) + getattr(s, attr))
    print("-" * len(header))
    print(
        f"{'all features':<26} {total.labels_positive:>7} {total.detected_positive:>7} "
        f"{total.true_positive:>4} {Score.ratio(total.true_positive, total.detected_positive):>9} "
        f"{Score.ratio(total.true_positive, total.labels_positive):>7} "
        f"{Score.ratio(total.correct, total.total):>8}"
    )

    shown = [d for d in run.disagreements if d.detected != FAILED]
    failed_types = list(
        dict.fromkeys(d.model_type for d in run.disagreements if d.detected == FAILED)
    )
    failed = f", plus every feature of {len(failed_types)} failed analyses" if failed_types else ""
    print(f"\ndisagreements ({len(shown)}{failed}):")
    for d in shown:
        tag = "known bug" if d.known_bug else "NEW"
        print(
            f"  [{tag}] {d.model_type:<14} {d.feature:<24} label {_show(d.label)}, "
            f"detected {_show(d.detected)}"
        )
    for model_type in failed_types:
        print(f"  [analysis failed] {model_type}: all {len(BASELINE)} features (see below)")
    if run.unresolved_issues:
        print(f"\nunresolved expectations not met ({len(run.unresolved_issues)}):")
        for line in run.unresolved_issues:
            print(f"  {line}")
    if run.failures:
        print(f"\nanalyses that failed ({len(run.failures)}):")
        for line in run.failures:
            print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model types (default: every labelled type)")
    args = parser.parse_args(argv)
    import transformers

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    entries = LABELS
    if args.only:
        wanted = set(args.only.split(","))
        entries = [e for e in LABELS if e["type"] in wanted]
    start = time.perf_counter()
    run = score(entries)
    report(run, len(entries), time.perf_counter() - start)
    new = [d for d in run.disagreements if not d.known_bug]
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
