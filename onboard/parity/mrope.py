"""Multimodal RoPE positions as a host computes them (Qwen2-VL, Qwen2.5-VL), in numpy.

The generated decoder takes ``position_ids [3, B, S]``; the host that feeds it computes them from
the prompt and the images' grids by the rule ``MRopeSpec`` states (the rule of HF's
``get_rope_index``, written here without it, so the parity run proves the two agree): text
tokens run on one position three times; an image's placeholders at running position p get
``(p + t, p + row, p + column)`` over its merged grid and the text after it resumes at
``p + max(rows, columns)``. A decode step at cache length n sits at ``n + delta`` three times.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def mrope_positions(
    input_ids: np.ndarray, image_token: int, grids: Sequence[Sequence[int]], merge: int
) -> tuple[np.ndarray, np.ndarray]:
    """``positions [3, B, S]`` and ``deltas [B]`` for a prompt without padding. Images take the
    grids ``(t, h, w)`` (in patches) in reading order over the whole batch; a run of
    placeholders holds one or more whole images."""
    rows, length = input_ids.shape
    positions = np.zeros((3, rows, length), dtype=np.int64)
    deltas = np.zeros(rows, dtype=np.int64)
    pending = iter(grids)
    for row in range(rows):
        ids = input_ids[row]
        column, running = 0, 0
        while column < length:
            if ids[column] != image_token:
                positions[:, row, column] = running
                column, running = column + 1, running + 1
                continue
            t, h, w = (int(x) for x in next(pending))
            h, w = h // merge, w // merge
            count = t * h * w
            if not (ids[column : column + count] == image_token).all():
                raise ValueError(
                    f"row {row}: an image of {count} tokens at column {column} has fewer "
                    "placeholders"
                )
            tt, hh, ww = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
            block = np.stack([tt.ravel(), hh.ravel(), ww.ravel()]) + running
            positions[:, row, column : column + count] = block
            column, running = column + count, running + max(h, w)
        deltas[row] = positions[:, row].max() + 1 - length
    if next(pending, None) is not None:
        raise ValueError("more image grids than images in the prompt")
    return positions, deltas


def text_positions(shape: tuple[int, int], start: np.ndarray | int) -> np.ndarray:
    """``[3, B, S]``: each row's ``start`` onwards, the same on all three axes (text, decode)."""
    rows, length = shape
    starts = np.broadcast_to(np.asarray(start, dtype=np.int64), (rows,))
    flat = starts[:, None] + np.arange(length, dtype=np.int64)[None]
    return np.broadcast_to(flat[None], (3, rows, length)).copy()
