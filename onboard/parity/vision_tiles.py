"""The parity batch of a VLM that takes tiles of any resolution (LLaVA-NeXT's "anyres").

Two rows, each with one image between different text: the images' original sizes are picked by
the tile rule (``tiny_tiles.tile_image_sizes``) so that their grids differ and one is cut back
to its aspect ratio by rows, the other by columns (and with a tile budget exactly one is
downsampled), so a candidate that packs tiles wrongly, drops the newline or puts the base tile
last fails. ``pixel_values [images, tiles, C, S, S]`` is padded with zero tiles as the processor
pads it; the placeholder counts are HF's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onboard.parity.vision import ROW_TEXT, TEXT_BEFORE, VisionBatch, _positions, _text


def tile_batch(reference: Any, hf_config: Any, seed: int = 3) -> VisionBatch:
    import torch

    from onboard.analysis.vision.tiles import provisional_tiles
    from onboard.tiny_model import image_features_method
    from onboard.tiny_tiles import tile_test_images

    vision, text = hf_config.vision_config, hf_config.text_config
    size = vision.image_size
    sizes, counts = tile_test_images(provisional_tiles(reference, hf_config), vision)
    rng = np.random.default_rng(seed)
    shape = (len(sizes), max(counts), vision.num_channels, size, size)
    pixels = np.zeros(shape, dtype=np.float32)
    for image, count in enumerate(counts):
        pixels[image, :count] = rng.standard_normal((count, *shape[2:]))
    image_sizes = np.array(sizes, dtype=np.int64)
    with torch.no_grad():
        features = image_features_method(reference)(
            pixel_values=torch.from_numpy(pixels), image_sizes=torch.from_numpy(image_sizes)
        ).pooler_output
    per_image = [int(f.reshape(-1, f.shape[-1]).shape[0]) for f in features]
    longest = max(per_image)
    rows = []
    image_token = hf_config.image_token_id
    for before, count in zip(TEXT_BEFORE, per_image, strict=True):
        tokens = _text(rng, text.vocab_size, image_token, ROW_TEXT + longest - count)
        rows.append([*tokens[:before], *[image_token] * count, *tokens[before:]])
    ids = np.array(rows, dtype=np.int64)
    return VisionBatch(
        pixels,
        ids,
        np.ones_like(ids),
        _positions(ids.shape, 0),
        image_sizes,
        tiles=tuple(counts),
    )
