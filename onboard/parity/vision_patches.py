"""The parity batch of a VLM with no tower, whose images enter as flattened patches (Fuyu).

Two images of different patch grids (the processor crops each image to whole patches of its own
size), flattened by the model type's own image processor and concatenated as FuyuProcessor
returns them, ``image_patches [patches, P * P * C]``; row r holds image r's placeholders laid
out as the processor lays them out, each row of patches closed by an image-newline text token.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onboard.analysis.vision.linear_patch import (
    TEST_GRIDS,
    image_processor,
    processor_patches,
    prompt_rows,
)


def patch_batch(hf_config: Any, seed: int = 3) -> Any:
    import torch

    from onboard.parity.vision import VisionBatch, _positions, _text

    processor = image_processor(hf_config.model_type)
    if processor is None:
        raise ValueError(f"{hf_config.model_type} has no image processor that flattens patches")
    rng = np.random.default_rng(seed)
    patch, channels = hf_config.patch_size, hf_config.num_channels
    pixels = [
        torch.from_numpy(
            rng.standard_normal((1, channels, rows * patch, columns * patch)).astype(np.float32)
        )
        for rows, columns in TEST_GRIDS
    ]
    patches = processor_patches(processor, pixels, patch).numpy().astype(np.float32)
    vocab, image_token = hf_config.text_config.vocab_size, hf_config.image_token_id

    def text(_row: int, count: int) -> list[int]:
        return _text(rng, vocab, image_token, count)

    ids = np.array(prompt_rows(TEST_GRIDS, image_token, text), dtype=np.int64)
    return VisionBatch(
        None, ids, np.ones_like(ids), _positions(ids.shape, 0), image_patches=patches
    )
