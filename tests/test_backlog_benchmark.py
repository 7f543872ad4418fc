"""benchmarks/backlog.py's list and summary, without running a model: the backlog must leave out
what the registry has (by type for mobius, by class for AutoModel) and its summary must count
blockers across types and never count a type without a config as a pass."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

ROWS = [
    {"model_type": "a", "kind": "dense", "status": "pass", "closest": "X", "seconds": 1.0},
    {
        "model_type": "b",
        "kind": "dense",
        "status": "UnsupportedFeatureError",
        "blockers": ["attention sinks at modeling_b.py:12 (s_aux)", "ALiBi at modeling_b.py:40"],
        "seconds": 2.0,
    },
    {
        "model_type": "c",
        "kind": "moe",
        "status": "UnsupportedFeatureError",
        "blockers": ["attention sinks at modeling_c.py:7"],
        "seconds": 3.0,
    },
    {
        "model_type": "d",
        "kind": "-",
        "status": "no-config",
        "detail": "ValueError: no",
        "seconds": 0,
    },
    {"model_type": "e", "kind": "moe", "status": "crash", "detail": "KeyError: 'w'", "seconds": 0},
]


@pytest.fixture
def backlog(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the benchmarks import each other as scripts
    return importlib.import_module("backlog")


def test_mobius_backlog_leaves_out_registered_types(backlog):
    types = {"llama": ("causal-lm", "LlamaForCausalLM"), "new": ("causal-lm", "NewForCausalLM")}
    assert list(backlog.missing_types(types, {"llama"}, by_class=False)) == ["new"]


def test_automodel_backlog_matches_the_class_not_the_type(backlog):
    types = {
        "llama": ("causal-lm", "LlamaForCausalLM"),
        "new": ("causal-lm", "NewForCausalLM"),
        "vlm": ("image-text-to-text", "VlmForConditionalGeneration"),
    }
    registered = {"LlamaForCausalLM", "new", "VlmForConditionalGeneration"}
    assert list(backlog.missing_types(types, registered, by_class=True)) == ["new"]


def test_a_type_in_both_tables_is_built_as_its_causal_lm(backlog):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    types = backlog.installed_types()
    assert all(types[t] == ("causal-lm", c) for t, c in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items())


def test_the_installed_mobius_backlog_is_what_its_registry_lacks(backlog):
    keys, by_class = backlog.registry_keys("mobius")
    types = backlog.installed_types()
    missing = backlog.missing_types(types, keys, by_class)
    assert missing and not set(missing) & keys
    assert set(missing) | (set(types) & keys) == set(types)


def test_pass_rate_per_kind_never_counts_a_type_without_config(backlog):
    rates = [("(no config)", 0, 1), ("dense", 1, 2), ("moe", 0, 2), ("all", 1, 5)]
    assert backlog.pass_rates(ROWS) == rates
    assert [backlog.outcome(r) for r in ROWS] == [
        "pass",
        "unsupported",
        "unsupported",
        "no-config",
        "crash",
    ]


def test_blockers_count_one_feature_across_types_with_its_location(backlog):
    counts = backlog.blocker_counts(ROWS)
    assert counts[0] == ("attention sinks", 2, ["b", "c"], "modeling_b.py:12")
    assert ("ALiBi", 1, ["b"], "modeling_b.py:40") in counts
    assert {name for name, *_ in counts} >= {"ValueError: no", "KeyError: 'w'"}


def test_blockers_about_tensors_are_counted_by_module(backlog):
    item = "parameter with no role in the spec at m.py:{} (model.layers.*.self_attn.{}.weight (8,))"
    row = {
        "model_type": "g",
        "status": "UnsupportedFeatureError",
        "blockers": [
            item.format(1, "indexer.wk"),
            item.format(2, "indexer.wq_b"),
            item.format(3, "g"),
        ],
    }
    assert backlog.blocker_names(row) == [
        "parameter with no role in the spec: self_attn.indexer",
        "parameter with no role in the spec: self_attn.g",
    ]


def test_row_and_markdown_show_status_blockers_and_rates(backlog):
    line = backlog.format_row(ROWS[1])
    assert "unsupported" in line and "modeling_b.py:12" in line and "ALiBi" in line
    table = backlog.markdown(ROWS)
    assert "| dense | 1/2 |" in table and "| all | 1/5 |" in table
    assert "| attention sinks | 2 | b, c | modeling_b.py:12 |" in table


def test_markdown_cells_cannot_break_the_table(backlog):
    assert backlog.markdown_table(("a", "b"), [("x|y", 1)]).splitlines()[-1] == "| x/y | 1 |"


def test_a_pass_on_an_overridden_default_config_is_not_a_plain_pass(backlog):
    """Issue #16: a type transformers cannot build from its own default config runs with
    documented overrides, and its row says so; it is never counted as a default-config pass."""
    plain = {**ROWS[0], "config": "default config"}
    overridden = {**ROWS[0], "model_type": "o", "config": "default config + {'k': 1}"}
    fixture = {**ROWS[0], "model_type": "f", "config": "fixture"}
    assert [backlog.outcome(r) for r in (plain, overridden, fixture)] == [
        "pass",
        "pass-override",
        "pass",
    ]
    assert backlog.pass_rates([plain, overridden]) == [("dense", 1, 2), ("all", 1, 2)]
    assert backlog.blocker_names(overridden) == []  # it passed: nothing stopped it
    assert "| dense | 1/2 (+1 on overridden configs) |" in backlog.markdown([plain, overridden])
    assert "  all          1/2 (+1 on overridden configs)" in backlog.summary([plain, overridden])
    assert "[default config + {'k': 1}]" in backlog.format_row(overridden)
    assert "[" not in backlog.format_row(plain).split("s  ", 1)[1]


def test_types_left_out_by_kind_are_named(backlog):
    assert backlog.left_out_line({"multi_stack": ["blt"], "encoder_lm": ["xlnet", "xlm"]}) == (
        "encoder_lm 2 (xlnet, xlm); multi_stack 1 (blt)"
    )


def test_the_build_overrides_are_in_the_config_label(backlog, tmp_path):
    import reonboard

    folder, label = reonboard.config_dir("cohere_compass_text", {}, tmp_path)
    assert label.startswith("default config + {'layer_types': ")
    assert "'full_attention': None" in label
    assert (folder / "config.json").exists()
