"""Day-0 types (transformers newer than the pinned one) that crashed onboard, each reduced to the
generic mechanism it tripped, so the tests run under the pinned transformers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from onboard.analysis.vision.encoder import forward_call_order
from onboard.analysis.vision.tower import read_tower
from onboard.tiny import TINY_VOCAB, shrink_config

# -- a second size of the vocabulary (Inkling 2's unpadded_vocab_size) ------------------------


def _shrunk(**keys: int) -> dict:
    config = {"model_type": "x", "num_hidden_layers": 2, "vocab_size": 201024, **keys}
    return shrink_config(config, None).config


def test_an_unpadded_vocab_size_shrinks_and_stays_below_the_vocab() -> None:
    """Left at 200058 beside a tiny vocab_size, transformers' re-padding of the head on save
    asked for -199802 rows (Inkling 2)."""
    tiny = _shrunk(unpadded_vocab_size=200058)
    assert tiny["vocab_size"] == TINY_VOCAB
    assert 0 < tiny["unpadded_vocab_size"] < TINY_VOCAB


def test_a_padded_vocab_size_shrinks_and_stays_above_the_vocab() -> None:
    tiny = _shrunk(padded_vocab_size=201088)
    assert tiny["padded_vocab_size"] > TINY_VOCAB


def test_an_equal_vocab_size_stays_equal() -> None:
    assert _shrunk(output_vocab_size=201024)["output_vocab_size"] == TINY_VOCAB


def test_another_vocabulary_keeps_its_size() -> None:
    """Token types and audio codes are vocabularies of their own, not this one's sizes."""
    tiny = _shrunk(type_vocab_size=2, audio_vocab_size=2048)
    assert tiny["type_vocab_size"] == 2 and tiny["audio_vocab_size"] == 2048


def test_the_tiny_model_cuts_its_logits_to_the_unpadded_size() -> None:
    """The pinned transformers' Inkling slices logits to unpadded_vocab_size: at the real size,
    beside a tiny vocab_size, the cut never happened, so the probe could not see it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    real = AutoConfig.for_model("inkling_text").to_dict()
    real["unpadded_vocab_size"] = real["vocab_size"] - 966  # a checkpoint's (5.18 default: None)
    tiny = shrink_config(real, None).config
    tiny.pop("model_type")
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("inkling_text", **tiny))
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3]])).logits
    assert logits.shape[-1] == tiny["unpadded_vocab_size"] < TINY_VOCAB


# -- a tower whose forward needs more than the pixels (Ovis 2.5's grid_thw) ---------------------


class _Embeddings(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patch_embedding = nn.Conv2d(3, 32, 4, 4)
        self.position_embedding = nn.Embedding(4, 32)


class _PackedTower(nn.Module):
    """A ViT's parts whose forward, like Qwen-VL's, takes the patches' grid besides the pixels."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = _Embeddings()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(2))

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor, scale: float = 1.0):
        return pixel_values * grid_thw.sum() * scale


_CONFIG = SimpleNamespace(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=8, patch_size=4,
    num_channels=3, intermediate_size=64, hidden_act="gelu", layer_norm_eps=1e-6,
)  # fmt: skip


def test_a_tower_needing_the_grid_is_refused_at_its_forward() -> None:
    reading = read_tower(_PackedTower(), _CONFIG, ())
    assert reading.spec is None
    [delta] = reading.deltas
    assert "needs grid_thw besides the pixels" in delta.what
    assert "test_day0_regressions.py" in delta.where


def test_the_call_order_names_every_required_argument() -> None:
    class Tower(_PackedTower):
        def forward(self, pixel_values, grid_thw, *, image_sizes, **kwargs):
            return pixel_values

    with pytest.raises(ValueError, match="needs grid_thw, image_sizes besides"):
        forward_call_order(Tower(), 3, 8, ValueError)


def test_optional_arguments_do_not_stop_the_call() -> None:
    class Tower(_PackedTower):
        def forward(self, pixel_values, image_sizes=None, **kwargs):
            return self.layers[1](self.layers[0](pixel_values.mean((1, 2))[:, :1].expand(1, 32)))

    assert forward_call_order(Tower(), 3, 8, ValueError) == ["", "layers.0", "layers.1"]
