"""The Qwen-VL stage check run on a tiny VLM the tests built (Qwen3-VL's, GLM-4V's)."""

from __future__ import annotations

from typing import Any


def tiny_qwen_vl(config: Any, model: Any) -> tuple[Any, ...]:
    """The vision spec the analysis reads from the tiny Qwen-VL ``model`` (no deltas), with the
    model, its parts, its trace and ``config``: what ``stage_check`` takes."""
    from onboard.analysis.vision.qwen_read import read_qwen_vision
    from onboard.analysis.vision.qwen_vl import qwen_vl_parts, trace_qwen_vl

    vision, _evidence, deltas = read_qwen_vision(model, config)
    assert deltas == ()
    parts = qwen_vl_parts(model)
    return vision, model, parts, trace_qwen_vl(model, parts, config), config


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
