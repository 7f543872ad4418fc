"""GLM-4V (glm4v, glm4v_moe): a Qwen-VL relative whose tower norms the patches after the
convolution, adds learned positions resampled bicubically to each grid, ends in an RMS norm and
a downsample convolution over each merge block, and hands a gated merger the result; its text
model turns half of each head in adjacent pairs, by M-RoPE sections."""

from __future__ import annotations

import pytest

from onboard.tiny import shrink_config


@pytest.mark.parametrize(
    ("rope", "sections"),
    [
        ({"partial_rotary_factor": 0.5, "mrope_section": [8, 12, 12]}, [1, 2, 1]),
        ({"mrope_section": [16, 24, 24]}, [2, 3, 3]),
        # a rotated quarter of the tiny head is two frequencies: the column section gets none
        ({"partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10]}, [1, 1, 0]),
    ],
    ids=["half-rotated", "whole-head", "quarter-rotated"],
)
def test_tiny_mrope_sections_cover_the_rotated_half(rope, sections) -> None:
    """HF splits the rotated frequencies by the sections exactly (GLM-4V's split_with_sizes):
    the tiny sections sum to the tiny head's rotated half, not to half the head."""
    config = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, **rope},
    }
    tiny = shrink_config(config, None).config
    assert tiny["rope_parameters"]["mrope_section"] == sections
