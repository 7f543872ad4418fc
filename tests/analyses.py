"""Analyses of the fixture configs, computed once per test process."""

from __future__ import annotations

from functools import cache

from onboard.analysis import Analysis, analyse
from onboard.source import load_source
from tests.hub_cache import fixture_config

# The five dense architectures issue #2 re-onboards with --treat-as-new.
DENSE = (
    "Qwen/Qwen3-0.6B",
    "meta-llama/Llama-3.2-1B",
    "mistralai/Mistral-7B-v0.1",
    "Qwen/Qwen2.5-0.5B",
    "google/gemma-3-1b-it",
    "HuggingFaceTB/SmolLM3-3B",  # RoPE skipped in the layers config.no_rope_layers marks
)


@cache
def analysis_of(repo_id: str) -> Analysis:
    return analyse(load_source(str(fixture_config(repo_id))))
