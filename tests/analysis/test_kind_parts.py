"""Attention parts that differ between layer kinds, and values unlike the keys, read into the
spec with their HF lines (MiMo-V2-Flash, from the backlog: sinks and twice the key/value heads
in its sliding layers only, value heads narrower than its query/key heads, values scaled after
v_proj), not refused and not left as a parameter without a role."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onboard.block_specs import KindAttention


@pytest.fixture(scope="module")
def mimo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("mimo_v2_flash", tmp_path_factory.mktemp("hub"))


def _lines(evidence) -> list[int]:
    found = [re.fullmatch(r"modeling_mimo_v2_flash\.py:(\d+)", e.where) for e in evidence]
    return [int(m.group(1)) for m in found if m]


def test_mimo_v2_flash_reads_each_kind_difference(mimo: Path) -> None:
    from onboard.analysis import analyse
    from onboard.source import load_source

    spec = analyse(load_source(str(mimo))).spec
    assert spec.unresolved == ()
    attention = spec.text.attention
    assert attention.kinds == (KindAttention("sliding_attention", 2, "sinks"),)
    assert attention.for_kind("full_attention") == KindAttention("full_attention")
    assert attention.sinks is None  # not in every layer
    assert (attention.v_head_dim, attention.v_head_dim_key) == (8, "v_head_dim")
    assert attention.value_scale == pytest.approx(0.707)
    assert attention.value_scale_key == "attention_value_scale"
    evidence = dict(spec.evidence)
    kinds = evidence["text.attention.kinds"]
    assert any("if is_swa" in e.detail for e in kinds), kinds  # the sinks' and heads' lines
    assert len(_lines(kinds)) == 2, kinds
    (width,) = _lines(evidence["text.attention.v_head_dim"])
    scale = _lines(evidence["text.attention.value_scale"])
    assert len(scale) == 2 and width < scale[1] < scale[0], scale  # use after __init__'s line


def _tiny(**real) -> dict:
    from onboard.tiny import shrink_config

    base = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 192,
        "num_hidden_layers": 2,
        "intermediate_size": 16384,
        "vocab_size": 152576,
    }
    return shrink_config(base | real, None).config


def test_tiny_values_stay_narrower_and_rotary_pairs_whole() -> None:
    from onboard.tiny import TINY_HEAD_DIM, TINY_VALUE_HEAD_DIM

    tiny = _tiny(v_head_dim=128)
    assert (tiny["head_dim"], tiny["v_head_dim"]) == (TINY_HEAD_DIM, TINY_VALUE_HEAD_DIM)
    assert _tiny(v_head_dim=192)["v_head_dim"] == 16  # as wide as the keys: kept so
    # 0.334 turns int(16 x 0.334) = 5 channels, where HF rotates 6: the tiny factor turns 6
    rope = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.334}
    tiny = _tiny(rope_parameters={"full_attention": dict(rope), "sliding_attention": dict(rope)})
    assert {k: v["partial_rotary_factor"] for k, v in tiny["rope_parameters"].items()} == {
        "full_attention": 6 / 16,
        "sliding_attention": 6 / 16,
    }
    assert _tiny(partial_rotary_factor=0.25)["partial_rotary_factor"] == 0.25  # 4: even
