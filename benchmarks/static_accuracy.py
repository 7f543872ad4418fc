"""How well the static reader (remote-code analysis, no execution) reads known models.

transformers' own modeling files stand in for remote code: for every dense entry of the labelled
table (tests/analysis/labels.py) the modeling file is read with ``StaticReader`` only, as if it
came from a Hub repo, and its catalogue features are compared with the hand-checked labels.
A label onboard cannot express (``Unresolved``) counts as read correctly when the reader reports
at least one delta instead of a complete spec. Every miss is classed: ``refused`` (the reader
reported deltas, so nothing is generated from the wrong value), ``read`` (the labels expect a
refusal, the reader gives a value), or ``SILENT`` (a complete spec with a wrong value: the
failure that matters). Prints per-feature agreement and every miss.

    .venv/bin/python benchmarks/static_accuracy.py
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def static_spec(source):
    from onboard.analysis.static import StaticReader
    from onboard.spec import ArchitectureSpec, SourceRef, WeightSpec

    files = [f for f in source.hf_files if f.name.startswith(("modeling_", "configuration_"))]
    result = StaticReader(files, source.config, source.architecture).read()
    if result.text is None:
        return None, result.deltas
    ref = SourceRef(source.model_id, "local", None, source.model_type, source.architecture, "")
    spec = ArchitectureSpec(ref, "dense", result.text, WeightSpec((), ()), result.evidence)
    return spec, result.deltas


def main() -> int:
    from onboard.analysis.features import feature_values
    from tests.analysis.labels import LABELS, Unresolved, expected_features, source_for

    agree: Counter[str] = Counter()
    total: Counter[str] = Counter()
    misses = []
    crashes = []
    start = time.perf_counter()
    dense = [e for e in LABELS if e.get("moe.router", "none") == "none"]
    for entry in dense:
        source = source_for(entry)
        try:
            spec, deltas = static_spec(source)
        except Exception as exc:  # a reader crash is a finding, listed with the misses
            crashes.append((entry["type"], f"{type(exc).__name__}: {exc}"))
            continue
        found = feature_values(spec) if spec else {}
        for name, label in expected_features(entry).items():
            if name.startswith("moe."):
                continue
            total[name] += 1
            ok = bool(deltas) if isinstance(label, Unresolved) else found.get(name) == label
            agree[name] += ok
            if not ok:
                misses.append((entry["type"], name, label, found.get(name), len(deltas)))
    seconds = time.perf_counter() - start
    print(f"{len(dense)} dense labelled types, static reading only, {seconds:.1f} s")
    for name in total:
        print(f"  {name:26} {agree[name]:3}/{total[name]:3}")
    print(f"  {'all':26} {sum(agree.values()):3}/{sum(total.values()):3}")
    for model_type, why in crashes:
        print(f"crash {model_type:18} {why}")
    classes: Counter[str] = Counter()
    for model_type, name, label, value, n in misses:
        kind = "refused" if n else ("read" if isinstance(label, Unresolved) else "SILENT")
        classes[kind] += 1
        print(f"{kind:8} {model_type:18} {name:24} label={label!s:24} read={value!s:20}")
    print(f"misses: {dict(classes)}")
    return 1 if crashes or classes["SILENT"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
