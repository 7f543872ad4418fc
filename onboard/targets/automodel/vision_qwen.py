"""What a Qwen-VL model needs that the generated AutoModel VLM class does not have yet, each
named at the HF line that does it.

The generated VLM class is LLaVA-shaped (images as ``[images, C, H, W]``, the tower's
features merged once, 1-D text positions). A Qwen-VL model differs in its inputs and in its
text backbone, so each difference is a blocker of its own: the refusal says exactly what is
missing rather than generating a model that would be wrong on every image prompt.
"""

from __future__ import annotations

import inspect
from typing import Any

from onboard.vision import VisionSpec


def qwen_vl_blockers(vision: VisionSpec, module: Any) -> list[str]:
    """One line per missing feature; ``module`` is HF's modeling module of the VLM."""
    found = [
        "images as flattened patches with image_grid_thw and the merger inside the tower "
        f"({_where(module, 'get_image_features') or 'vision.tower'}): the generated VLM passes "
        "pixel_values [images, channels, height, width] to a tower and a projector apart"
    ]
    mrope = vision.merge.mrope
    if mrope is not None:
        found.append(
            f"M-RoPE positions in {mrope.layout} sections {list(mrope.sections)} from the image "
            f"grids ({_where(module, 'get_rope_index') or 'vision.merge.mrope'}): the generated "
            "text backbone rotates by 1-D positions"
        )
    if vision.deepstack is not None:
        found.append(
            f"DeepStack features from tower layers {list(vision.deepstack.layers)} added to the "
            f"outputs of the first {len(vision.deepstack.layers)} text layers at the image "
            f"placeholders ({_where(module, '_deepstack_process') or 'vision.deepstack'}): the "
            "generated text backbone takes the merged embeddings only"
        )
    return found


def _where(module: Any, method: str) -> str:
    """``modeling_x.py:N`` of the first class in ``module`` that defines ``method``."""
    from onboard.analysis.probe import source_location

    if module is None:
        return ""
    for value in vars(module).values():
        if inspect.isclass(value) and method in vars(value):
            return source_location(vars(value)[method]) or ""
    return ""
