"""Re-onboard every causal-LM and VLM model type both transformers and a target know (a benchmark).

For each type: a config (the real fixture when tests/fixtures/hub has one, else transformers'
default config), then `onboard new --treat-as-new` into a temporary folder, in one process.
Prints one row per type (kind, closest class, deltas, parity, unresolved or blocking reasons,
seconds) and the pass rate per kind. The types are mobius' (so the targets' tables compare
type for type); ``--registered`` keeps those the target itself registers (AutoModel's registry
is keyed by architecture: a type counts when its causal-LM class is there).

    .venv/bin/python benchmarks/reonboard.py [--target automodel] [--registered]
        [--only qwen3,llama] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "tests" / "fixtures" / "hub"


def fixture_configs() -> dict[str, Path]:
    found = {}
    for path in sorted(FIXTURES.glob("*/*/config.json")):
        model_type = json.loads(path.read_text()).get("model_type")
        found.setdefault(model_type, path.parent)
    return found


# Hybrids whose default config has no attention layer at all (so it is a pure SSM): the layer
# pattern of their published checkpoints instead.
HYBRID_OVERRIDES = {
    "bamba": {"attn_layer_indices": [9, 18, 27]},  # Bamba-9B
    # Granite-4.0-H: attention among Mamba-2 layers
    "granitemoehybrid": {
        "layer_types": ["mamba"] * 5 + ["attention"] + ["mamba"] * 4,
        "num_hidden_layers": 10,
    },
}
HYBRID_KINDS = ("hybrid", "hybrid_moe", "ssm")

# Types whose default config transformers itself cannot build a model from (a transformers bug,
# at the line given): the published checkpoint's values for the keys the bug leaves unusable.
# The row's config label shows them, and backlog.py counts such a pass apart from plain ones.
BUILD_OVERRIDES = {
    # CohereCompassTextConfig defaults rope_parameters to {} (configuration_cohere_compass.py:135)
    # and leaves every layer full_attention (:115; its sliding pattern at :123 never runs), while
    # the rotary embedding reads rope_parameters[layer_type] (modeling_cohere_compass.py:80):
    # KeyError 'full_attention'. CohereLabs/North-Micro-Vision-Instruct's text_config, as SGLang's
    # port of its config class and mlxcel's port quote it: three sliding layers to one full
    # layer, M-RoPE (theta 50000, sections 24/20/20) on the sliding layers, none (NoPE,
    # modeling_cohere_compass.py:512) on the full ones.
    "cohere_compass_text": {
        "layer_types": ["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(40)],
        "rope_parameters": {
            "sliding_attention": {
                "rope_type": "default",
                "rope_theta": 50000.0,
                "mrope_section": [24, 20, 20],
                "mrope_interleaved": True,
            },
            "full_attention": None,
            "rope_type": "default",
            "rope_theta": 10000.0,
        },
    },
}
DEFAULT_CONFIG = "default config"


def config_dir(model_type: str, fixtures: dict[str, Path], scratch: Path) -> tuple[Path, str]:
    """The fixture, else transformers' default config with the labelled table's overrides (set,
    with the reason, only where transformers' own default config cannot build a model), the
    build overrides or the hybrid ones above."""
    if model_type in fixtures:
        return fixtures[model_type], "fixture"
    from tests.analysis.labels import LABELS
    from tests.new_types import default_config_dir
    from tests.published_vlms import VISION_OVERRIDES, VISION_TEXT_OVERRIDES, VISION_TOP_OVERRIDES

    overrides = next(
        (
            e.get("overrides", {})
            for e in LABELS
            if e["type"] == model_type and e["config"] == "default"
        ),
        BUILD_OVERRIDES.get(model_type, HYBRID_OVERRIDES.get(model_type, {})),
    )
    tower = VISION_OVERRIDES.get(model_type)
    overrides = {**overrides, **VISION_TOP_OVERRIDES.get(model_type, {})}
    label = DEFAULT_CONFIG + (f" + {overrides}" if overrides else "")
    text = VISION_TEXT_OVERRIDES.get(model_type)
    label += f" + vision_config {tower}" if tower else ""
    label += f" + text_config {text}" if text else ""
    folder = default_config_dir(
        model_type, scratch, vision_config=tower, text_config=text, **overrides
    )
    return folder, label


def prepare(model_type: str, fixtures: dict[str, Path], scratch: Path) -> tuple[Path | None, dict]:
    """The type's config folder and its row so far (config, kind), so a benchmark can pick types
    by kind before running them; no folder (a "no-config" row) when transformers cannot build
    even its own default config."""
    from onboard.classify import classify
    from onboard.errors import OnboardError
    from onboard.source import read_config

    row = {"model_type": model_type}
    try:
        folder, row["config"] = config_dir(model_type, fixtures, scratch)
    except Exception as exc:  # transformers cannot even build its own default config
        row.update(status="no-config", detail=f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
        return None, row
    try:
        row["kind"] = str(classify(read_config(folder / "config.json")).kind)
    except OnboardError:
        row["kind"] = "unknown"
    return folder, row


def run(
    model_type: str,
    fixtures: dict[str, Path],
    scratch: Path,
    target: str = "mobius",
    treat_as_new: bool = True,
) -> dict:
    from onboard.errors import OnboardError
    from onboard.pipeline import NewOptions, onboard_new

    start = time.perf_counter()
    folder, row = prepare(model_type, fixtures, scratch)
    if folder is None:
        row["seconds"] = round(time.perf_counter() - start, 2)
        return row
    try:
        result = onboard_new(
            NewOptions(
                model=str(folder),
                target=target,
                treat_as_new=treat_as_new,
                out=scratch / model_type / "out",
            )
        )
    except OnboardError as exc:
        blockers = list(getattr(exc, "items", ()))
        row.update(
            status=type(exc).__name__, detail="; ".join(blockers) or exc.message, blockers=blockers
        )
    except Exception as exc:  # a crash is a finding, recorded and counted
        row.update(status="crash", detail=f"{type(exc).__name__}: {exc}")
    else:
        report = result.parity
        chosen = result.proposal.chosen
        row.update(
            closest=chosen.variant.class_name if chosen else None,
            deltas=[d.feature for d in chosen.deltas] if chosen else [],
            status="pass" if report.passed else "parity-fail",
            xfail=sorted({c.bug for c in report.checks if c.bug}),
            worst=max(
                (c.metrics.max_abs for c in report.checks if c.metrics and c.status == "fail"),
                default=None,
            ),
            detail="; ".join(f"{c.provider} {c.name}: {c.detail}" for c in report.failures)[:300],
        )
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="mobius", choices=("mobius", "automodel"))
    parser.add_argument("--registered", action="store_true", help="only the target's types")
    parser.add_argument("--only", help="comma-separated model types")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()

    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    from onboard.targets.mobius.registry import open_library as open_mobius

    known = {*MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, *MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES}
    mobius_keys = {v.key for v in open_mobius(None).variants}
    types = sorted(t for t in known if t in mobius_keys)
    if args.target == "automodel" and args.registered:
        from onboard.targets.automodel.registry import open_library

        keys = {v.key for v in open_library(None).variants}
        types = sorted(t for t, arch in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if arch in keys)
    if args.only:
        types = [t for t in types if t in args.only.split(",")]
    fixtures = fixture_configs()
    rows = []
    with tempfile.TemporaryDirectory(prefix="onboard-reonboard-") as tmp:
        for model_type in types:
            row = run(model_type, fixtures, Path(tmp), args.target)
            rows.append(row)
            xfail = " xfail:" + "+".join(row["xfail"]) if row.get("xfail") else ""
            print(
                f"{model_type:<22} {row.get('kind', '-'):<10} {row['status']:<24} "
                f"{(row.get('closest') or '-'):<26} {row['seconds']:>5.1f}s  "
                f"{','.join(row.get('deltas', []))}{xfail}  {row.get('detail', '')[:160]}",
                flush=True,
            )
    by_kind = Counter(r.get("kind", "n/a") for r in rows)
    passed = Counter(r.get("kind", "n/a") for r in rows if r["status"] == "pass")
    print("\nparity passed / types, by kind:")
    for kind, total in sorted(by_kind.items()):
        print(f"  {kind:<10} {passed[kind]}/{total}")
    hybrids = [r for r in rows if r.get("kind") in HYBRID_KINDS]
    if hybrids:
        print("\nhybrid and state-space types (status, root cause):")
        for r in hybrids:
            cause = r.get("detail", "") if r["status"] != "pass" else ", ".join(r.get("xfail", []))
            print(f"  {r['model_type']:<18} {r['kind']:<10} {r['status']:<24} {cause[:150]}")
    vlms = [r for r in rows if r.get("kind") == "vlm"]
    if vlms:
        print("\nvision-language types (status, root cause):")
        for r in vlms:
            cause = r.get("detail", "") if r["status"] != "pass" else ", ".join(r.get("xfail", []))
            print(f"  {r['model_type']:<18} {r['status']:<24} {cause[:150]}")
    statuses = Counter(r["status"] for r in rows)
    print(f"all {len(rows)} types: " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
