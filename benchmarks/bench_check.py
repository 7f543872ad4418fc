"""Wall time of ``onboard check``: a synthetic 300-entry mobius checkout and the real registries.

    .venv/bin/python benchmarks/bench_check.py

The synthetic checkout is laid out like upstream mobius: 300 ``_REGISTRATIONS`` entries keyed by
real transformers model types, 100 model modules (three classes each, imported through
``mobius.models``), the side tables, ``tests/_test_configs.py``, YAML test cases and a generated
module with an onboard header, so every mobius rule has work to do. One entry in ten is an alias
of the generic ``CausalLMModel`` (each one reads its HF attention source); a second run makes all
300 generic aliases, the worst case. The goal is under 2 s per run on the build machine; a
pre-commit run also pays for the interpreter and imports, so the cold CLI time is printed too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onboard.lint import check
from onboard.lint.hf import load_catalog

ENTRIES = 300
CLASSES_PER_MODULE = 3
GOAL_S = 2.0


def model_types(count: int) -> list[str]:
    catalog = load_catalog()
    if catalog is None:
        raise SystemExit("transformers is not installed")
    return sorted(catalog.model_types)[:count]


def synthetic_repo(root: Path, keys: list[str], generic_every: int) -> Path:
    """Write a mobius-shaped checkout whose registry has one entry per key."""
    package = root / "src" / "mobius"
    (package / "models").mkdir(parents=True)
    (package / "_configs").mkdir()
    (package / "__init__.py").write_text("")
    (package / "_configs" / "__init__.py").write_text(
        "from mobius._configs._base import CausalLMConfig\n"
    )
    (package / "_configs" / "_base.py").write_text(
        "class CausalLMConfig:\n"
        "    @classmethod\n"
        "    def from_transformers(cls, config):\n"
        "        model_type = config.model_type\n"
        "        return dict(\n"
        '            attn_qkv_bias=model_type in ("qwen2",),\n'
        '            attn_qk_norm=model_type in ("qwen3",) or getattr(config, "use_qk_norm", 0),\n'
        "        )\n"
    )
    (package / "models" / "base.py").write_text(
        "from mobius._configs import CausalLMConfig\n\n\n"
        "class CausalLMModel:\n    config_class = CausalLMConfig\n"
    )
    classes = [f"Model{i:03d}CausalLMModel" for i in range(len(keys))]
    init = ["from mobius.models.base import CausalLMModel"]
    for start in range(0, len(classes), CLASSES_PER_MODULE):
        group = classes[start : start + CLASSES_PER_MODULE]
        name = f"family{start // CLASSES_PER_MODULE:03d}"
        body = "".join(f"\n\nclass {c}(CausalLMModel):\n    pass\n" for c in group)
        (package / "models" / f"{name}.py").write_text(
            f"from mobius.models.base import CausalLMModel\n{body}"
        )
        init.append(f"from mobius.models.{name} import {', '.join(group)}")
    (package / "models" / "__init__.py").write_text("\n".join(init) + "\n")
    registry = [
        "from mobius.models import (",
        "    CausalLMModel,",
        *(f"    {c}," for c in classes),
        ")",
        "",
        "_REGISTRATIONS = {",
    ]
    for i, (key, cls) in enumerate(zip(keys, classes, strict=True)):
        target = "CausalLMModel" if i % generic_every == 0 else cls
        inline = ', family="synthetic"' if i % 50 == 1 else ""
        registry.append(f"    {json.dumps(key)}: ModelRegistration({target}{inline}),")
    registry += ["}", "", "_TEST_MODEL_IDS = {"]
    registry += [f'    {json.dumps(k)}: "org/{k}",' for k in keys]
    registry += ["}", "", "_FAMILY_OVERRIDES = {"]
    registry += [f'    {json.dumps(k)}: "family",' for k in keys[::2]]
    registry += ["}", "", "_VARIANT_LABELS = {}", "_TEXT_ONLY_MODEL_TYPE = {}", ""]
    (package / "_registry.py").write_text("\n".join(registry))
    tests = root / "tests"
    tests.mkdir()
    configs = "".join(f"    ({json.dumps(k)}, {{}}, False),\n" for k in keys[::2])
    (tests / "_test_configs.py").write_text(f"CAUSAL_LM_CONFIGS = [\n{configs}]\n")
    cases = root / "testdata" / "cases" / "causal-lm"
    cases.mkdir(parents=True)
    for key in keys[::3]:
        (cases / f"{key}.yaml").write_text(f'model_id: "org/{key}"\nmodel_type: "{key}"\n')
    (package / "models" / "generated.py").write_text(
        "# onboard 0.1.0: generated from Qwen/Qwen3-0.6B (revision unknown), transformers 5.18.0\n"
        "# modeling_qwen3.py sha256:0000000000000000.\n"
        "# Regenerate: onboard new Qwen/Qwen3-0.6B --target mobius\n"
    )
    return root


def timed(label: str, run, repeat: int) -> float:
    """Print the first run (cold caches: what a pre-commit process pays) and the warm median."""
    times, findings = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        findings = run()
        times.append(time.perf_counter() - start)
    first, median = times[0], statistics.median(times[1:] or times)
    verdict = "ok" if max(first, median) < GOAL_S else f"over the {GOAL_S:.0f} s goal"
    print(
        f"{label:<52} first {first:6.3f} s  median {median:6.3f} s  "
        f"{findings:4d} findings  {verdict}"
    )
    return first


def in_process(root: Path | None, target: str | None = None):
    def run() -> int:
        _clear_caches()
        return len(check(root, target).findings)

    return run


def _clear_caches() -> None:
    """Forget what earlier runs read, so every in-process run starts cold."""
    from onboard.lint import hf, hf_source

    for cached in (hf.load_catalog, hf._source_files, hf_source._facts, hf_source._parse):
        cached.cache_clear()


def cold_cli(args: list[str], cwd: Path | None = None):
    def run() -> int:
        command = [sys.executable, "-m", "onboard.lint", "--json", *args]
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr)
        return len(json.loads(done.stdout)["findings"])

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    keys = model_types(ENTRIES)
    with tempfile.TemporaryDirectory() as tmp:
        mixed = synthetic_repo(Path(tmp) / "mixed", keys, generic_every=10)
        worst = synthetic_repo(Path(tmp) / "worst", keys, generic_every=1)
        timed("synthetic mobius, 300 entries (30 generic aliases)", in_process(mixed), args.repeat)
        timed("synthetic mobius, 300 generic aliases (worst case)", in_process(worst), args.repeat)
        timed("  same, cold CLI (python -m onboard.lint)", cold_cli([], cwd=worst), args.repeat)
    for target, package in (("mobius", "mobius"), ("automodel", "nemo_automodel")):
        if importlib.util.find_spec(package) is None:
            print(f"{target}: not installed, skipped")
            continue
        timed(f"installed {target}", in_process(None, target), args.repeat)
        timed("  same, cold CLI", cold_cli(["--installed", "-t", target]), args.repeat)


if __name__ == "__main__":
    main()
