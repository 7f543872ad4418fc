"""The vision side's rows of the feature catalogue (``analysis.features``), for VLMs only."""

from __future__ import annotations

from collections.abc import Callable

from onboard.spec import ArchitectureSpec
from onboard.vision import VisionSpec

Value = str | bool | int | float | None


def _steps(s: ArchitectureSpec) -> str:
    assert s.vision is not None
    steps = s.vision.projector.steps
    return ">".join(step.activation if step.op == "activation" else step.op for step in steps) or (
        "none"
    )


def _vision(s: ArchitectureSpec) -> VisionSpec:
    assert s.vision is not None
    return s.vision


def _tower_activation(s: ArchitectureSpec) -> Value:
    """The tower's MLP activation; None for a tower without layers (a linear patch embedding)."""
    mlp = getattr(_vision(s).tower, "mlp", None)
    return mlp.activation if mlp is not None else None


VISION_CATALOGUE: tuple[tuple[str, str, Callable[[ArchitectureSpec], Value]], ...] = (
    ("vision.tower", "vision.tower.names", lambda s: _vision(s).towers.kind),
    ("vision.class_token", "vision.tower.names", lambda s: _vision(s).tower.class_token),
    ("vision.pre_norm", "vision.tower.names", lambda s: _vision(s).tower.pre_norm),
    ("vision.activation", "vision.tower.activation", lambda s: _tower_activation(s)),
    (
        "vision.feature_layers",
        "vision.select.layers",
        lambda s: ",".join(str(i) for i in _vision(s).select.layers),
    ),
    (
        "vision.drop_class_token",
        "vision.select.drop_class_token",
        lambda s: _vision(s).select.drop_class_token,
    ),
    ("vision.post_norm_applied", "vision.select.layers", lambda s: _vision(s).select.post_norm),
    ("vision.projector", "vision.projector", _steps),
    (
        "vision.image_attention",
        "vision.merge.token_blocks",
        lambda s: {"images": "bidirectional", "prefix": "bidirectional prefix"}.get(
            _vision(s).merge.token_blocks, "causal"
        ),
    ),
    (
        "vision.image_token",
        "vision.merge.image_token_id",
        lambda s: _vision(s).merge.image_token_key,
    ),
)
