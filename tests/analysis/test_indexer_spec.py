"""The lightning indexer (DeepSeek Sparse Attention) as the analysis reads it, and the spec
check proving it: the tiny model keeps 4 of the 9 keys the check runs, so a reading that selects
other keys (the indexer left out, its RoPE on the wrong pairs, one key more) no longer computes
the attention HF computes."""

from __future__ import annotations

import dataclasses
import re

import pytest

from onboard.analysis import analyse
from onboard.analysis.spec_check import check_spec
from onboard.hf_config import make_hf_config
from onboard.source import default_config_source
from onboard.tiny import TINY_INDEX_TOPK
from onboard.tiny_model import build_tiny_model, perturb


@pytest.fixture(scope="module")
def deepseek_v32():
    return analyse(default_config_source("deepseek_v32"))


def test_the_indexer_is_read_with_its_sizes_keys_and_lines(deepseek_v32) -> None:
    spec = deepseek_v32.spec
    assert spec.unresolved == ()
    assert set(spec.text.layer_types) == {"indexed_attention"}
    indexer = spec.text.attention.indexer
    assert (indexer.heads_key, indexer.head_dim_key, indexer.topk_key) == (
        "index_n_heads",
        "index_head_dim",
        "index_topk",
    )
    assert indexer.norm_eps == 1e-6 and not indexer.rope_interleaved
    assert deepseek_v32.tiny.config["index_topk"] == TINY_INDEX_TOPK < 9  # the prompts' length
    where = [e.where for e in spec.evidence_for("text.attention.indexer")]
    assert any(re.fullmatch(r"modeling_deepseek_v32\.py:\d+", w) for w in where), where


def _wrong(text, **change):
    attention = text.attention
    indexer = dataclasses.replace(attention.indexer, **change) if change else None
    return dataclasses.replace(text, attention=dataclasses.replace(attention, indexer=indexer))


@pytest.mark.parametrize(
    "change",
    [{}, {"rope_interleaved": True}, {"topk_key": "num_experts_per_tok"}],
    ids=["indexer-left-out", "rope-on-pairs", "another-top-k"],
)
def test_a_wrong_indexer_reading_is_a_mismatch(deepseek_v32, change) -> None:
    config = make_hf_config(deepseek_v32.tiny.config)
    model = perturb(build_tiny_model(config))
    assert check_spec(deepseek_v32.spec.text, model, config) == ()
    deltas = check_spec(_wrong(deepseek_v32.spec.text, **change), model, config)
    assert deltas and all("DeepseekV32Attention" in d.what for d in deltas), deltas
