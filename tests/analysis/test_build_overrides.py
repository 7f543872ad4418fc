"""Cohere Compass: transformers cannot build its default config (rope_parameters {} read per
layer kind); with the published checkpoint's values (benchmarks/reonboard.py BUILD_OVERRIDES)
it builds, and the analysis reads its reordered RoPE frequencies."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.errors import InvalidConfigError
from onboard.tiny import shrink_config

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def overrides(monkeypatch) -> dict:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from reonboard import BUILD_OVERRIDES

    return BUILD_OVERRIDES["cohere_compass_text"]


def _default(**overrides) -> dict:
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING["cohere_compass_text"]().to_dict()
    return {**config, **overrides}


def test_the_default_config_cannot_build_a_model() -> None:
    """The transformers bug the override stands in for (KeyError 'full_attention')."""
    from onboard.hf_config import make_hf_config
    from onboard.tiny_model import build_tiny_model

    tiny = shrink_config(_default(), None).config
    with pytest.raises(InvalidConfigError, match="KeyError: 'full_attention'"):
        build_tiny_model(make_hf_config(tiny))


def test_mrope_sections_kept_per_layer_kind_shrink_with_the_head(overrides) -> None:
    """Sabotage: left at 24/20/20 (64 frequencies), the tiny head's 8 cannot be split."""
    tiny = shrink_config(_default(**overrides), None).config
    sliding = tiny["rope_parameters"]["sliding_attention"]
    assert sum(sliding["mrope_section"]) == 8 and len(sliding["mrope_section"]) == 3
    assert tiny["rope_parameters"]["full_attention"] is None


def test_cohere_compass_reads_its_reordered_rope_frequencies(overrides, tmp_path) -> None:
    """What no spec said before (its M-RoPE pre-rotation) is read now: nothing unresolved
    (tests/targets/mobius/test_reordered_rope.py proves it)."""
    from onboard.analysis import analyse
    from onboard.source import load_source
    from tests.new_types import default_config_dir

    folder = default_config_dir("cohere_compass_text", tmp_path, **overrides)
    spec = analyse(load_source(str(folder))).spec
    assert spec.unresolved == ()
    assert spec.text.rope_for("sliding_attention").order is not None
