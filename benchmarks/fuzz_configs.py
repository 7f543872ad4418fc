"""Fuzz ``onboard new`` / ``onboard inspect`` with mutated bundled configs (a benchmark, issue 20).

Runs ``--cases`` cases drawn by hypothesis from ``tests/fuzz_configs.py`` (the strategies and
checks the test uses, many more of them) in this process, and prints the count of each exit
code, of runs that broke a promise (a traceback or an exception out of ``main``, exit 8, an
error that is not one line or has no reason, files written by a failed run, ``--json`` output
that is not one document), the first of each kind with its case, and the rate.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/fuzz_configs.py --cases 10000 [--seed 0]

Exit status 1 when any run broke a promise.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.fuzz_configs import cases, problems, run_case  # after the path fix-up


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--every", type=int, default=500, help="print progress every N cases")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    codes: Counter[str] = Counter()
    broken: Counter[str] = Counter()
    first: dict[str, str] = {}
    start = time.perf_counter()

    @seed(args.seed)
    @settings(
        max_examples=args.cases,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases())
    def run(case) -> None:
        outcome = run_case(case)
        codes["exception" if outcome.code is None else str(outcome.code)] += 1
        for problem in problems(outcome):
            kind = problem.split(":")[0][:60]
            if outcome.traceback:  # a bug: one kind per place it was raised
                kind = " | ".join(outcome.traceback.strip().splitlines()[-3:])
            broken[kind] += 1
            first.setdefault(kind, f"{case.describe()}\n    {problem}")
        done = sum(codes.values())
        if done % args.every == 0:
            rate = done / (time.perf_counter() - start)
            print(f"{done} cases, {rate:.1f}/s, {sum(broken.values())} broken", flush=True)

    run()
    seconds = time.perf_counter() - start
    total = sum(codes.values())
    print(f"\n{total} cases in {seconds:.0f} s ({total / seconds:.1f} cases/s)")
    print("exit codes: " + ", ".join(f"{code}: {n}" for code, n in sorted(codes.items())))
    print(f"broken promises: {sum(broken.values())}")
    for kind, count in broken.most_common():
        print(f"  {count:6d}  {kind}\n    {first[kind]}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
