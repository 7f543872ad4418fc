"""Shrink the image-generation side of a VLM (Janus' ``vq_config``: a VQ-VAE, its codebook
embeddings and the heads that predict image tokens).

onboard reads the image-understanding path; the generation parts are built by HF's model all
the same, so the tiny model must hold them small. Their widths that are the text's width (the
aligner's output, the head's input) follow the tiny text model; the VQ-VAE keeps two
resolutions of 32 channels (its GroupNorms take 32 groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GENERATION_CONFIG_KEYS = ("vq_config",)
_TINY_VQ = {
    "num_embeddings": 64,
    "base_channels": 32,
    "latent_channels": 32,
    "channel_multiplier": [1, 1],
    "num_res_blocks": 1,
}
_TEXT_WIDTH_KEYS = ("projection_dim", "image_token_embed_dim")


def shrink_generation_configs(
    tiny: dict[str, Any], hf_config: Any, tiny_text: Mapping[str, Any]
) -> None:
    """Shrink each generation sub-config of the tiny config dict ``tiny`` in place."""
    text_width = hf_config.text_config.hidden_size
    for key in GENERATION_CONFIG_KEYS:
        real = getattr(hf_config, key, None)
        if real is None:
            continue
        shrunk = {**tiny.get(key, {}), **{k: v for k, v in _TINY_VQ.items() if hasattr(real, k)}}
        for width in _TEXT_WIDTH_KEYS:
            if getattr(real, width, None) == text_width:
                shrunk[width] = tiny_text["hidden_size"]
        tiny[key] = shrunk
