"""``onboard new --repo`` into real checkouts of the libraries, checked as their maintainers would.

For each model: a fresh copy of the checkout, ``onboard new ... --repo COPY --json`` as a user
runs it (parity and the library's own tests included), then on what it wrote the library's
ruff (``--ruff``: the version the library pins) with the checkout's own configuration, for
mobius a static-cache build of the entry through the library's own test config, and a second
identical run that must change nothing. Prints one row per model. Needs checkouts (the
``fetch`` tool or ``git clone``), so it is a benchmark, not a test.

    .venv/bin/python benchmarks/real_checkouts.py --target mobius --repo ../mobius \\
        --ruff /tmp/rv16/bin/ruff [--only qwen3,mixtral]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HUB = ROOT / "tests" / "fixtures" / "hub"
# model type -> (its Hub id, whether tests/fixtures/hub has its config (else transformers'
# default config, named by that Hub id with --hub-id), --treat-as-new)
MODELS = {
    "qwen3": ("Qwen/Qwen3-0.6B", True, True),
    "qwen3_moe": ("Qwen/Qwen3-30B-A3B", True, True),
    "mixtral": ("mistralai/Mixtral-8x7B-v0.1", True, True),
    "vaultgemma": ("google/vaultgemma-1b", False, False),  # dense, in neither library
    "minimax_m2": ("MiniMaxAI/MiniMax-M2", False, False),  # MoE, in neither library
    "olmoe": ("allenai/OLMoE-1B-7B-0924", True, False),  # MoE, AutoModel lacks it
    "qwen3_next": ("Qwen/Qwen3-Next-80B-A3B-Instruct", True, True),  # hybrid
    "lfm2": ("LiquidAI/LFM2-1.2B", True, False),  # hybrid, mobius lacks it
    "llava": ("llava-hf/llava-1.5-7b-hf", True, True),  # vision-language
}

STATIC_CACHE = """
import sys
sys.path[:0] = ["src", "tests"]
from _test_configs import ALL_CAUSAL_LM_CONFIGS, _base_config
from mobius._registry import registry
from mobius.tasks import CausalLMTask
entries = [dict(o) for m, o, _ in ALL_CAUSAL_LM_CONFIGS if m == sys.argv[1]]
assert entries, "no test-config entry"
for overrides in entries:
    config = _base_config(**overrides)
    CausalLMTask(static_cache=True).build(registry.get(sys.argv[1])(config), config)
print(len(entries))
"""


def model_dir(model_type: str, scratch: Path) -> tuple[Path, str, bool]:
    hub_id, fixture, treat_as_new = MODELS[model_type]
    if fixture:
        return HUB / hub_id, hub_id, treat_as_new
    from tests.new_types import default_config_dir

    return default_config_dir(model_type, scratch / "models"), hub_id, treat_as_new


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts and "__pycache__" not in p.parts
    }


def onboard(args: list[str]) -> tuple[int, dict]:
    command = [sys.executable, "-m", "onboard", "new", *args, "--json"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    try:
        return run.returncode, json.loads(run.stdout)
    except json.JSONDecodeError:
        return run.returncode, {"error": (run.stderr or run.stdout).strip()[-300:]}


def ruff(ruff_bin: str, repo: Path, files: list[str]) -> str:
    python = [f for f in files if f.endswith(".py")]
    if not python:
        return "-"
    check = subprocess.run([ruff_bin, "check", *python], cwd=repo, capture_output=True, text=True)
    fmt = subprocess.run(
        [ruff_bin, "format", "--check", *python], cwd=repo, capture_output=True, text=True
    )
    if check.returncode == 0 and fmt.returncode == 0:
        return "clean"
    findings = [line for line in check.stdout.splitlines() if line and line[0] != " "]
    return f"check {check.returncode}, format {fmt.returncode}: {' | '.join(findings[:3])}"


def static_cache(repo: Path, model_type: str) -> str:
    run = subprocess.run(
        [sys.executable, "-c", STATIC_CACHE, model_type],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    if run.returncode == 0:
        return f"builds ({run.stdout.strip()} entr{'y' if run.stdout.strip() == '1' else 'ies'})"
    return "fails: " + (run.stderr.strip().splitlines() or ["?"])[-1][:120]


def one(model_type: str, target: str, checkout: Path, ruff_bin: str, scratch: Path) -> dict:
    repo = scratch / f"{target}-{model_type}"
    shutil.copytree(checkout, repo, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    folder, hub_id, treat_as_new = model_dir(model_type, scratch)
    args = [str(folder), "--target", target, "--repo", str(repo)]
    args += ["--treat-as-new"] * treat_as_new + ["--hub-id", hub_id]
    start = time.perf_counter()
    code, report = onboard(args)
    row = {"model": model_type, "exit": code, "seconds": round(time.perf_counter() - start)}
    if "error" in report:
        return {**row, "outcome": report["error"]}
    parity = report.get("parity") or {}
    tests = report.get("library_tests") or {}
    files = [f["path"] for f in (report.get("files") or {}).get("files", [])]
    row |= {
        "parity": "passed" if parity.get("passed") else "-" if not parity else "FAILED",
        "library tests": tests.get("summary", "not run"),
        "broken": [b["test"] for b in tests.get("broken", [])],
        "ruff": ruff(ruff_bin, repo, files) if code == 0 else "-",
    }
    if target == "mobius" and code == 0:
        row["static cache"] = static_cache(repo, model_type)
    if code == 0:
        before = snapshot(repo)
        again, _ = onboard(args)
        after = snapshot(repo)
        changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
        row["second run"] = f"exit {again}, " + (
            "unchanged" if not changed else f"changed {changed}"
        )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("mobius", "automodel"), required=True)
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of the library")
    parser.add_argument("--ruff", default="ruff", help="the ruff the library pins")
    parser.add_argument("--only", help="comma-separated model types")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    models = args.only.split(",") if args.only else list(MODELS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="onboard-checkouts-") as scratch:
        for model_type in models:
            row = one(model_type, args.target, args.repo.resolve(), args.ruff, Path(scratch))
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
