"""The Qwen-VL stage check run on a tiny VLM the tests built (Qwen3-VL's, GLM-4V's)."""

from __future__ import annotations

from typing import Any


def stage_check(vision: Any, tiny: tuple[Any, ...]) -> tuple[Any, ...]:
    """``check_qwen_vl``'s deltas for ``vision`` over ``tiny``: (vision spec, model, parts,
    trace, config), as each test's ``_tiny()`` returns them."""
    from onboard.analysis.vision.qwen_check import check_qwen_vl

    _, model, parts, trace, config = tiny
    return check_qwen_vl(
        vision.tower,
        vision.projector,
        vision.merge.mrope,
        config.image_token_id,
        model,
        parts,
        trace,
        vision.deepstack,
    )
