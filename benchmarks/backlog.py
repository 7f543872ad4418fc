"""Onboard every causal-LM and image-text-to-text model type the installed transformers has and
the target's installed registry lacks: the library's real backlog (a benchmark, issue #16).

reonboard.py measures the types a library already has (with --treat-as-new); the backlog is
what users ask for, and its blockers, counted, say what to build next. The list is computed,
not kept: mobius' registry is keyed by model type, AutoModel's by architecture class (a type
is present when the class it is built as, its causal LM if it has one, is registered). Each
type gets reonboard.py's config (the fixture, else transformers' default config) and
`onboard new` without --treat-as-new, capped at ``--timeout`` seconds (common.py). A type whose
kind cannot be read (no config) is kept under any ``--kinds``, so it is never hidden. Prints
one row per type, then the pass rate per kind and the blockers by how many types they stop;
``--markdown`` prints that summary as the README's tables; ``--rows`` summarises a saved
``--json`` again without running anything.

    .venv/bin/python benchmarks/backlog.py [--target automodel] [--only a,b]
        [--kinds dense,moe] [--timeout 300] [--json F] [--markdown] [--rows F]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections import Counter
from pathlib import Path

from common import capped_run, installed_types, markdown_table, reason
from reonboard import DEFAULT_CONFIG, fixture_configs, prepare

# reonboard's statuses (an OnboardError's class name) as the outcomes the summary counts
OUTCOMES = {
    "UnsupportedFeatureError": "unsupported",
    "TinyModelRunError": "unsupported",  # HF's own class fails at the tiny sizes
    "UnsupportedKindError": "out-of-scope",
    "InvalidConfigError": "bad-config",
    "BadInputError": "bad-config",
    "ModelNotFoundError": "bad-config",
}
# A blocker's location: an HF source line (modeling_x.py:123) or a config key (config.json:k)
WHERE = re.compile(r"\b[\w./-]+\.(?:py|json):[\w.]+")
# The tensor a blocker's detail starts with: "... at modeling_x.py:12 (model.layers.*.mlp.w (4,)"
TENSOR = re.compile(r" at \S+ \((model\.[\w.*]+) \(\d")


def missing_types(
    types: dict[str, tuple[str, str]], registered: set[str], by_class: bool
) -> dict[str, tuple[str, str]]:
    """The types (each with its table and class) the registry lacks; ``by_class`` matches the
    class a type is built as (AutoModel), else the type itself (mobius)."""
    return {
        t: (table, cls)
        for t, (table, cls) in sorted(types.items())
        if (cls if by_class else t) not in registered
    }


def outcome(row: dict) -> str:
    """The row's outcome in the summary's words (pass, parity-fail, unsupported, bad-config,
    no-config, crash, timeout ...); a pass on a default config with overrides (one transformers
    cannot build a model from as it stands) is ``pass-override``, never a plain pass."""
    found = OUTCOMES.get(row["status"], row["status"])
    return "pass-override" if found == "pass" and overridden(row) else found


def overridden(row: dict) -> bool:
    """The row's config is transformers' default config with keys set (reonboard.config_dir
    writes them into the label: "default config + {...}")."""
    return str(row.get("config", "")).startswith(f"{DEFAULT_CONFIG} +")


def blocker_names(row: dict) -> list[str]:
    """What stopped the type, one name per feature without where it was seen, so the same
    feature in many types counts as one blocker; a refusal without items is its message."""
    if outcome(row) in ("pass", "pass-override", "timeout"):
        return []
    items, cut = row.get("blockers"), r" at | \(|: "
    if not items:  # a message: keep the exception's name, cut at its first aside
        items, cut = [reason(row, limit=400)], r" \(|; "
    own = re.compile(rf"(?<![\w-]){re.escape(row['model_type'])}(?![\w-])")
    names = [re.split(cut, own.sub("<type>", i), maxsplit=1)[0] + _module(i) for i in items]
    return list(dict.fromkeys(n.strip() for n in names if n.strip()))


def _module(item: str) -> str:
    """A blocker about one tensor names its module (``self_attn.sinks``, ``self_attn.indexer``):
    "parameter with no role" alone would lump attention sinks with an indexer."""
    found = TENSOR.search(item)
    if not found:
        return ""
    path = re.sub(r"^model\.(layers\.\*\.)?", "", found.group(1))
    return ": " + ".".join(re.sub(r"\.(weight|bias)$", "", path).split(".")[:2])


def format_row(row: dict) -> str:
    """One printed line: type, table, kind, outcome, closest class, seconds, blockers or reason."""
    blockers = " | ".join(row.get("blockers") or []) or reason(row, limit=200)
    config = f"  [{row['config'][:160]}]" if overridden(row) else ""
    return (
        f"{row['model_type']:<24} {row.get('table', '-'):<18} {row.get('kind', '-'):<10} "
        f"{outcome(row):<12} {(row.get('closest') or '-'):<26} {row['seconds']:>6.1f}s  "
        f"{blockers[:300]}{config}"
    )


def pass_rates(rows: list[dict]) -> list[tuple[str, int, int]]:
    """(kind, passed, types) per kind, then all kinds together."""
    kinds = Counter(_kind(r) for r in rows)
    passed = Counter(_kind(r) for r in rows if outcome(r) == "pass")
    table = [(k, passed[k], n) for k, n in sorted(kinds.items())]
    return [*table, ("all", sum(passed.values()), len(rows))]


def override_passes(rows: list[dict]) -> Counter:
    """Per kind and for "all", the passes on overridden default configs (not in pass_rates)."""
    found = Counter(_kind(r) for r in rows if outcome(r) == "pass-override")
    return found + Counter({"all": sum(found.values())}) if found else found


def _rate(passed: int, n: int, overridden: int) -> str:
    return f"{passed}/{n}" + (f" (+{overridden} on overridden configs)" if overridden else "")


def _kind(row: dict) -> str:
    return "(no config)" if row["status"] == "no-config" else row.get("kind", "-")


def blocker_counts(rows: list[dict]) -> list[tuple[str, int, list[str], str]]:
    """(blocker, types it stops, those types, one HF location) by frequency, most first."""
    stopped: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for row in rows:
        for item in row.get("blockers") or []:
            for name in blocker_names({**row, "blockers": [item]}):
                found = WHERE.search(item)
                if found:
                    where.setdefault(name, found.group())
        for name in blocker_names(row):
            stopped.setdefault(name, []).append(row["model_type"])
    ranked = sorted(stopped.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(name, len(types), types, where.get(name, "")) for name, types in ranked]


def summary(rows: list[dict], top: int = 15) -> str:
    """The pass rate per kind, the outcomes, and the blockers by frequency (plain text)."""
    lines = ["pass / types, by kind:"]
    extra = override_passes(rows)
    lines += [f"  {kind:<12} {_rate(p, n, extra[kind])}" for kind, p, n in pass_rates(rows)]
    outcomes = Counter(outcome(r) for r in rows)
    lines.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    lines.append("blockers, by the number of types they stop:")
    for name, count, types, where in blocker_counts(rows)[:top]:
        at = f" [{where}]" if where else ""
        lines.append(f"  {count:>3}  {name[:110]}{at}  ({', '.join(types[:6])})")
    return "\n".join(lines)


def markdown(rows: list[dict], top: int = 10) -> str:
    """The summary as the README's two tables: pass rate per kind, top blockers."""
    extra = override_passes(rows)
    rates = markdown_table(
        ("kind", "pass / types"), [(k, _rate(p, n, extra[k])) for k, p, n in pass_rates(rows)]
    )
    blockers = markdown_table(
        ("blocker", "types", "e.g.", "where"),
        [
            (name[:110], count, ", ".join(types[:4]), where or "-")
            for name, count, types, where in blocker_counts(rows)[:top]
        ],
    )
    return f"{rates}\n\n{blockers}"


def registry_keys(target: str) -> tuple[set[str], bool]:
    """The installed registry's keys, and whether they are class names (AutoModel's are)."""
    if target == "automodel":
        from onboard.targets.automodel.registry import open_library

        return {v.key for v in open_library(None).variants}, True
    from onboard.targets.mobius.registry import open_library

    return {v.key for v in open_library(None).variants}, False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="mobius", choices=("mobius", "automodel"))
    parser.add_argument("--only", help="comma-separated model types")
    parser.add_argument("--kinds", help="comma-separated kinds (dense,moe,vlm,hybrid ...)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a type may take")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--markdown", action="store_true", help="print the summary as Markdown")
    parser.add_argument("--rows", type=Path, help="summarise an earlier run's --json, run nothing")
    args = parser.parse_args()

    import transformers

    rows = json.loads(args.rows.read_text()) if args.rows else run_backlog(args)
    print(f"\n{args.target}, transformers {transformers.__version__}\n{summary(rows)}")
    if args.markdown:
        print("\n" + markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))


def run_backlog(args: argparse.Namespace) -> list[dict]:
    """Each type of the target's backlog (``--only``, ``--kinds``) onboarded, printed as it ends."""
    import transformers

    keys, by_class = registry_keys(args.target)
    backlog = missing_types(installed_types(), keys, by_class)
    if args.only:
        backlog = {t: v for t, v in backlog.items() if t in args.only.split(",")}
    kinds = set(args.kinds.split(",")) if args.kinds else None
    print(f"{len(backlog)} types in transformers {transformers.__version__} not in {args.target}")
    fixtures = fixture_configs()
    rows = []
    left_out: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="onboard-backlog-") as tmp:
        for model_type, (table, _) in backlog.items():
            folder, found = prepare(model_type, fixtures, Path(tmp) / "kind")
            if kinds and folder is not None and found.get("kind") not in kinds:
                left_out.setdefault(found.get("kind", "-"), []).append(model_type)
                continue
            row = {**capped_run(model_type, Path(tmp), args.timeout, args.target), "table": table}
            rows.append({"kind": found.get("kind", "-"), **row})
            print(format_row(rows[-1]), flush=True)
            if args.json:  # after each type, so a run stopped early can still be summarised
                args.json.write_text(json.dumps(rows, indent=2, default=str))
    if left_out:  # named, so a type whose kind moved out of --kinds is not silently gone
        print("left out by --kinds: " + left_out_line(left_out))
    return rows


def left_out_line(left_out: dict[str, list[str]]) -> str:
    """The types ``--kinds`` left out, by kind: ``encoder_lm 2 (xlnet, ...); ...``."""
    return "; ".join(
        f"{kind} {len(types)} ({', '.join(types)})" for kind, types in sorted(left_out.items())
    )


if __name__ == "__main__":
    main()
