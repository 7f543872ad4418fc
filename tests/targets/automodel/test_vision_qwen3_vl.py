"""Qwen3-VL into AutoModel: the generated LLaVA-shaped VLM class cannot take flattened patches
with image_grid_thw, M-RoPE positions or DeepStack, so ``onboard new`` refuses it, naming each
missing feature at its HF line, and writes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onboard.errors import UnsupportedFeatureError
from onboard.pipeline import NewOptions, onboard_new
from tests.hub_cache import fixture_config

MODEL = "Qwen/Qwen3-VL-2B-Instruct"


def test_qwen3_vl_is_refused_by_feature_at_hfs_lines(tmp_path: Path) -> None:
    options = NewOptions(
        model=str(fixture_config(MODEL).parent),
        out=tmp_path / "out",
        target="automodel",
        treat_as_new=True,
        parity=False,
    )
    with pytest.raises(UnsupportedFeatureError) as raised:
        onboard_new(options)
    items = list(raised.value.items)
    assert len(items) == 3, items
    flattened, mrope, deepstack = items
    assert "flattened patches with image_grid_thw" in flattened
    assert "interleaved sections [24, 20, 20]" in mrope
    assert "DeepStack features from tower layers [5, 11, 17]" in deepstack
    assert "first 3 text layers" in deepstack
    for item in items:
        assert re.search(r"\(modeling_qwen3_vl\.py:\d+\)", item), item
    assert not (tmp_path / "out").exists()
