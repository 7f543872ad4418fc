"""Wall time of each phase of `onboard new` for a bundled model, offline (a benchmark, not a test).

Runs the real console script in a fresh process (so imports are counted) against an empty HF
cache, i.e. from the bundled config snapshot, once as "already supported" (parity of mobius'
own class) and once with --treat-as-new (generation + parity of the generated class).

    .venv/bin/python benchmarks/bench_new.py [--repeat 3] [--model LiquidAI/LFM2-1.2B]
        [--target automodel]

The default is Qwen/Qwen3-0.6B; LFM2 (a hybrid mobius 0.1.0 lacks) is generated in both runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GOAL_SECONDS = 20.0


def run_once(model: str, flags: list[str], target: str) -> tuple[float, dict[str, float]]:
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=cache)
        command = [
            sys.executable,
            "-m",
            "onboard",
            "new",
            model,
            "--target",
            target,
            "--json",
            "--out",
            out,
            *flags,
        ]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    # exit 1 is a parity failure (mobius' own Qwen3-Next: hybrid M7): timed all the same
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    if done.returncode == 1:
        print(f"  (parity failed: {' '.join(flags) or 'the library class'}; timed all the same)")
    timings = json.loads(done.stdout)["timings"]
    return wall, {t["phase"]: t["seconds"] for t in timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B", help="a bundled model id")
    parser.add_argument("--target", default="mobius", choices=("mobius", "automodel"))
    args = parser.parse_args()
    for flags in ([], ["--treat-as-new"]):
        walls, phases = [], {}
        for _ in range(args.repeat):
            wall, timings = run_once(args.model, flags, args.target)
            walls.append(wall)
            for phase, seconds in timings.items():
                phases.setdefault(phase, []).append(seconds)
        shown = " ".join([args.model, "--target", args.target, *flags])
        print(f"\nonboard new {shown}  ({args.repeat} runs, median)")
        for phase, values in phases.items():
            print(f"  {phase:<10} {statistics.median(values):6.2f} s")
        in_phases = sum(statistics.median(v) for v in phases.values())
        wall = statistics.median(walls)
        print(f"  {'imports+':<10} {wall - in_phases:6.2f} s  (process start, imports, output)")
        verdict = "under" if wall < GOAL_SECONDS else "OVER"
        print(f"  {'wall':<10} {wall:6.2f} s  ({verdict} the {GOAL_SECONDS:.0f} s goal)")


if __name__ == "__main__":
    main()
