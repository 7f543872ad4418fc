"""Cohere's q/k norms hold a weight row per head: AutoModel's generated attention shares one
weight across the heads, so the generator refuses it by name instead of failing parity."""

from __future__ import annotations

import pytest

from onboard.errors import UnsupportedFeatureError
from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir


def test_qk_norm_with_a_weight_per_head_is_refused_by_name(tmp_path) -> None:
    folder = default_config_dir("cohere", tmp_path / "models", use_qk_norm=True)
    options = NewOptions(
        model=str(folder), target="automodel", treat_as_new=True, out=tmp_path / "out"
    )
    with pytest.raises(UnsupportedFeatureError) as refused:
        onboard_new(options)
    assert "q/k norms with a weight per head" in "\n".join(refused.value.items)
    assert not (tmp_path / "out").exists()
