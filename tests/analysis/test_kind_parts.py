"""Attention parts that differ between layer kinds are refused by name, each with its HF line
(MiMo-V2-Flash, from the backlog: sinks and twice the key/value heads in its sliding layers
only, value heads narrower than its query/key heads), not as a parameter without a role."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onboard.errors import UnsupportedFeatureError
from onboard.pipeline import NewOptions, onboard_new


@pytest.fixture(scope="module")
def mimo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("mimo_v2_flash", tmp_path_factory.mktemp("hub"))


def _line(delta) -> int:
    match = re.fullmatch(r"modeling_mimo_v2_flash\.py:(\d+)", delta.where)
    assert match, delta
    return int(match.group(1))


def test_mimo_v2_flash_names_each_kind_difference(mimo: Path) -> None:
    from onboard.analysis import analyse
    from onboard.source import load_source

    unresolved = {d.what: d for d in analyse(load_source(str(mimo))).spec.unresolved}
    assert not any("no role" in what for what in unresolved), unresolved
    sinks = unresolved["attention sinks only in sliding_attention layers"]
    assert "self.sinks = nn.Parameter" in sinks.detail and "if is_swa" in sinks.detail
    heads = unresolved["key/value heads that differ by layer kind"]
    assert heads.detail == "full_attention 2, sliding_attention 4"
    values = unresolved["value heads of another width than the query/key heads"]
    assert values.detail == "v_head_dim 128, head_dim 192"
    # the k_proj and v_proj lines that size them, after the sinks' line in __init__'s order
    assert _line(heads) < _line(values) < _line(sinks)


def test_mimo_v2_flash_refusal_writes_nothing(mimo: Path, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFeatureError) as raised:
        onboard_new(NewOptions(model=str(mimo), out=tmp_path / "out"))
    text = " ".join(raised.value.items)
    assert "attention sinks only in sliding_attention layers" in text
    assert "modeling_mimo_v2_flash.py:" in text
    assert not (tmp_path / "out").exists()
