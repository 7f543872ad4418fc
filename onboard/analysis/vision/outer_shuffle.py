"""A pixel shuffle a VLM runs between its tower and its projector module (InternVL folds each
2 x 2 block of patches in ``get_image_features``, then calls the projector on the result).

The readers take the projector's input to be a tower state (``select.py``) and find a shuffle
inside the projector by its first leaf's width (``projector.py``). When the input is a tower
state already folded, the trace is handed on with that state as the projector's input, so the
shuffle is read as the projector's first step and the check proves its element order against
HF's output like any other step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from onboard.analysis.vision.check import pixel_shuffle
from onboard.analysis.vision.trace import VisionTrace, same_values
from onboard.tiny_vision import pixel_shuffle_factor


def unfold_outer_shuffle(trace: VisionTrace, config: Any, class_token: bool) -> VisionTrace:
    """``trace`` with the projector's input unfolded to the tower state a pixel shuffle made it
    from; ``trace`` itself when no state folds into it."""
    kernel = pixel_shuffle_factor(config)
    received = trace.projector_in
    if not kernel or received.dim() != 3:
        return trace
    states = (*reversed(trace.hidden_states), trace.post_normed)
    for state in (s for s in states if s is not None):
        for candidate in (state[:, 1:], state) if class_token else (state,):
            if not _folds(candidate, kernel, received):
                continue
            return dataclasses.replace(trace, projector_in=candidate)
    return trace


def _folds(state: Any, kernel: int, received: Any) -> bool:
    import math

    side = math.isqrt(state.shape[1])
    if side * side != state.shape[1] or side % kernel:
        return False
    folded = pixel_shuffle(state, kernel)
    return same_values(folded, received)
