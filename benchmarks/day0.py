"""Onboard, into mobius, every causal-LM and VLM model type the installed transformers has and an
older release lacks: the day-0 set (a benchmark, run under the newer transformers).

The older release's types are read from its wheel (``pip download``, then its
``modeling_auto.py`` statically), so one environment is enough. Each type gets transformers'
default config (reonboard.py's `config_dir`) and `onboard new` without --treat-as-new
(reonboard.py's `run`), capped at ``--timeout`` seconds (common.py's `capped_run`). Prints
one row per type (type, kind, outcome, reason, seconds) and a summary by outcome;
``--markdown`` prints the table for the README.

    /tmp/tf525/bin/python benchmarks/day0.py [--since 5.18.0] [--only a,b] [--timeout 240]
        [--json F] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

from common import capped_run, installed_types, markdown_table, reason

from onboard.lint.hf import mapping_keys

TABLES = ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES")
AUTO_MODULE = "transformers/models/auto/modeling_auto.py"


def release_types(version: str, folder: Path) -> frozenset[str]:
    """The causal-LM and image-text-to-text model types of a transformers release (its wheel)."""
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(folder)]
    subprocess.run([*pip, f"transformers=={version}"], check=True)
    [wheel] = folder.glob(f"transformers-{version}-*.whl")
    source = zipfile.ZipFile(wheel).read(AUTO_MODULE).decode()
    return frozenset().union(*(mapping_keys(source, table) for table in TABLES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", default="5.18.0", help="the older transformers release")
    parser.add_argument("--only", help="comma-separated model types")
    parser.add_argument("--timeout", type=int, default=240, help="seconds a type may take")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args()

    import transformers

    current = installed_types()
    with tempfile.TemporaryDirectory(prefix="onboard-day0-") as tmp:
        older = release_types(args.since, Path(tmp))
        types = sorted(t for t in current if t not in older)
        if args.only:
            types = [t for t in types if t in args.only.split(",")]
        print(f"{len(types)} types in transformers {transformers.__version__} not in {args.since}")
        rows = []
        for model_type in types:
            table = current[model_type][0]
            row = {**capped_run(model_type, Path(tmp), args.timeout), "table": table}
            rows.append(row)
            print(
                f"{model_type:<24} {row['table']:<18} {row.get('kind', '-'):<10} "
                f"{row['status']:<24} {row['seconds']:>6.1f}s  {reason(row)}",
                flush=True,
            )
    statuses = Counter(r["status"] for r in rows)
    print(f"all {len(rows)} types: " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()))
    if args.markdown:
        header = ("type", "table", "kind", "outcome", "reason", "s")
        cells = [
            (
                r["model_type"],
                r["table"],
                r.get("kind", "-"),
                r["status"],
                reason(r),
                f"{r['seconds']:.0f}",
            )
            for r in rows
        ]
        print("\n" + markdown_table(header, cells))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
