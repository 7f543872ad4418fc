"""Values a transformers config class's validator pins survive the tiny shrink (ZAYA's top-1
routing), and ZAYA then stops where onboard stops reading it: its attention."""

from __future__ import annotations

import pytest

from onboard.config_pins import validator_pins
from onboard.errors import InvalidConfigError
from onboard.hf_config import make_hf_config
from onboard.tiny import shrink_config


class _Base:
    def validate_base(self):
        if self.tie != "never":
            raise ValueError("pinned by a base class")


class _Pinned(_Base):
    def validate_architecture(self):
        if self.top_k != 1:
            raise ValueError("one expert only")
        if self.heads % self.kv_heads != 0:  # a relation, not a pin
            raise ValueError("heads")
        if self.window != 4:  # no raise: not a pin
            self.window = 4

    def helper(self):  # not a validator
        if self.other != 2:
            raise ValueError("not read")


def test_only_a_validators_plain_inequality_that_raises_is_a_pin() -> None:
    assert validator_pins(_Pinned) == {"tie": "never", "top_k": 1}


def test_zayas_validator_pins_top_1_routing() -> None:
    from transformers import ZayaConfig

    assert validator_pins(ZayaConfig) == {"num_experts_per_tok": 1}


def _zaya_default() -> dict:
    from transformers import ZayaConfig

    return ZayaConfig().to_dict()


def test_the_shrink_keeps_a_pinned_value() -> None:
    from transformers import ZayaConfig

    tiny = shrink_config(_zaya_default(), None, pinned=validator_pins(ZayaConfig)).config
    assert tiny["num_experts_per_tok"] == 1
    assert make_hf_config(tiny).num_experts_per_tok == 1


def test_the_shrink_without_the_pin_is_rejected() -> None:
    """Sabotage: the shrinker's own top-2 is what ZAYA's validator refused."""
    tiny = shrink_config(_zaya_default(), None).config
    with pytest.raises(InvalidConfigError, match="num_experts_per_tok=1"):
        make_hf_config(tiny)


def test_zaya_is_refused_at_its_attention_not_its_residual_scales(tmp_path) -> None:
    """Its per-channel residual scales are no token mixer: the one left is ZayaAttention
    (compressed convolutional attention), which onboard does not read."""
    from onboard.analysis import analyse
    from onboard.source import load_source
    from tests.new_types import default_config_dir

    spec = analyse(load_source(str(default_config_dir("zaya", tmp_path)))).spec
    deltas = [f"{d.what} at {d.where}" for d in spec.unresolved]
    assert any(
        "token mixer ZayaAttention is no kind onboard computes at modeling_zaya.py:" in d
        for d in deltas
    ), deltas
    assert not any("no one token mixer" in d for d in deltas)
