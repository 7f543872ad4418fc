"""The vision spec at the real model's sizes.

The readers read structure from the tiny VLM and the check runs the spec on it, so both see tiny
sizes. What the spec records is the real model: each size is read back from the real config
through the key the tiny one came from, and every width the projector holds is mapped from the
tiny width it was to the real one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from onboard.analysis.vision.projector_width import config_value
from onboard.errors import InvalidConfigError
from onboard.tiny_tiles import max_tiles
from onboard.tiny_vision import patch_grid_side, square_side
from onboard.vision import (
    PerceiverSpec,
    PixtralTowerSpec,
    ProjectorSpec,
    ProjectorStep,
    ProjectorWidth,
    TileGridSpec,
    VisionSpec,
    VitTowerSpec,
)


def at_real_sizes(vision: VisionSpec, tiny: Any, real: Any) -> VisionSpec:
    tower = vision.tower
    if isinstance(tower, PixtralTowerSpec):
        tower = _pixtral(tower, real.vision_config)
    else:
        tower = _tower(tower, real.vision_config)
    widths = _widths(vision, tiny, real)
    return dataclasses.replace(
        vision,
        towers=vision.towers.replace(tower),
        projector=_projector(vision.projector, widths, real),
        merge=dataclasses.replace(vision.merge, image_token_id=int(real.image_token_id)),
        tiles=_tiles(vision.tiles, real),
    )


def _tiles(tiles: TileGridSpec | None, real: Any) -> TileGridSpec | None:
    """The real config's pinpoints (the tiny ones are scaled to its narrower tiles) and tile
    budget."""
    if tiles is None:
        return None
    pinpoints = tuple((int(h), int(w)) for h, w in getattr(real, tiles.pinpoints_key))
    budget = max_tiles(real, tiles.max_tiles_key) if tiles.max_tiles_key else 0
    return dataclasses.replace(tiles, pinpoints=pinpoints, max_tiles=budget)


def _tower(tower: VitTowerSpec, config: Any) -> VitTowerSpec:
    fields, real = _real_fields(tower, config)
    norm = dataclasses.replace(tower.norm, eps=float(real("norm_eps")))
    return dataclasses.replace(tower, **fields, norm=norm)


def _pixtral(tower: PixtralTowerSpec, config: Any) -> PixtralTowerSpec:
    fields, _ = _real_fields(tower, config)
    rope_theta = float(config.rope_parameters["rope_theta"])
    head_dim = fields["attention"].head_dim
    return dataclasses.replace(tower, **fields, head_dim=head_dim, rope_theta=rope_theta)


def _real_fields(
    tower: VitTowerSpec | PixtralTowerSpec, config: Any
) -> tuple[dict[str, Any], Callable[[str], Any]]:
    """The sizes every tower kind reads through its keys, at the real config's values, and the
    reader of any other keyed field. A scale other than head_dim ** -0.5 is kept as read."""
    keys = dict(tower.keys)

    def real(field: str) -> Any:
        if keys[field] == "mlp_ratio":  # the MLP's width as a ratio of the hidden size
            return int(config.hidden_size * config.mlp_ratio)
        return getattr(config, keys[field])

    heads = real("num_heads")
    head_dim = real("hidden_size") // heads
    attention = tower.attention
    default_scale = attention.scale == attention.head_dim**-0.5
    fields = {
        "hidden_size": real("hidden_size"),
        "num_layers": real("num_layers"),
        "image_size": square_side(real("image_size"), "image_size"),
        "patch_size": square_side(real("patch_size"), "patch_size"),
        "num_channels": real("num_channels"),
        "attention": dataclasses.replace(
            attention,
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=head_dim,
            scale=head_dim**-0.5 if default_scale else attention.scale,
        ),
        "mlp": dataclasses.replace(
            tower.mlp, intermediate_size=real("intermediate_size"), activation=real("activation")
        ),
    }
    return fields, real


def _widths(vision: VisionSpec, tiny: Any, real: Any) -> dict[int, int]:
    """Tiny width -> real width for each width a projector reads or writes."""
    layers = len(vision.select.layers)
    pairs = {
        tiny.vision_config.hidden_size * layers: real.vision_config.hidden_size * layers,
        tiny.text_config.hidden_size: real.text_config.hidden_size,
    }
    if len(pairs) != 2:
        raise ValueError("the tiny vision and text widths coincide")
    for step in vision.projector.steps:
        if step.op == "pixel_shuffle":  # the features of a block of patches, side by side
            kernel = _real_shuffle(step, real)
            tiny_width = tiny.vision_config.hidden_size * step.kernel**2
            if tiny_width in pairs:
                raise ValueError("the tiny shuffled width coincides with another")
            pairs[tiny_width] = real.vision_config.hidden_size * kernel**2
    width = vision.projector.width
    if width is not None:
        real_width = _real_width(width, real)
        if pairs.setdefault(width.value, real_width) != real_width:
            raise ValueError(f"the tiny {width.key} coincides with another width")
    return pairs


def _real_width(width: ProjectorWidth, real: Any) -> int:
    value = config_value(real, width.key)
    return int(real.text_config.hidden_size if value is None and width.text_fallback else value)


def _real_perceiver(perceiver: PerceiverSpec, real: Any) -> PerceiverSpec:
    """The resampler's sizes from the real sub-config's keys (HF's, after it resets a perceiver
    of another width than the text's to the text's width and epsilon)."""
    sub = getattr(real, perceiver.config)
    values = {field: getattr(sub, key) for field, key in perceiver.keys}
    hidden = int(values["hidden_size"])
    return dataclasses.replace(
        perceiver,
        hidden_size=hidden,
        latents=int(values["latents"]),
        depth=int(values["depth"]),
        num_heads=int(values["num_heads"]),
        num_kv_heads=int(values["num_kv_heads"]),
        head_dim=int(values["head_dim"]),
        intermediate_size=hidden * perceiver.intermediate_factor,
        activation=str(values["activation"]),
        eps=float(values["eps"]),
    )


def _real_shuffle(step: ProjectorStep, real: Any) -> int:
    """The pixel shuffle's factor at the real sizes, which must fold the tower's patch grid."""
    kernel = step.kernel_at(real)
    side = patch_grid_side(real.vision_config)
    if kernel <= 0 or side % kernel:
        where = f"config.json:{step.kernel_key}" if step.kernel_key else "the pixel shuffle"
        raise InvalidConfigError(
            f"{where} {kernel} does not fold the tower's patch grid: vision_config image_size "
            f"{real.vision_config.image_size} // patch_size {real.vision_config.patch_size} = "
            f"{side} patches a side, not a multiple of {kernel} (HF's pixel_shuffle reshape "
            "fails)"
        )
    return kernel


def _projector(projector: ProjectorSpec, widths: dict[int, int], real: Any) -> ProjectorSpec:
    steps = _halved(
        tuple(
            _real_merge(step, real)
            if step.op == "patch_merge"
            else dataclasses.replace(
                step,
                in_features=widths[step.in_features],
                out_features=widths[step.out_features],
                kernel=_real_shuffle(step, real),
            )
            if step.op == "pixel_shuffle"
            else _perceiver_step(step, real)
            if step.perceiver is not None
            else dataclasses.replace(
                step,
                in_features=widths.get(step.in_features, step.in_features),
                out_features=widths.get(step.out_features, step.out_features),
                kernel=_real_kernel(step.kernel, step.tokens_key, real),
            )
            for step in projector.steps
        )
    )
    width = projector.width
    if width is not None:
        width = dataclasses.replace(width, value=widths.get(width.value, width.value))
    return dataclasses.replace(projector, steps=steps, width=width)


def _perceiver_step(step: ProjectorStep, real: Any) -> ProjectorStep:
    assert step.perceiver is not None
    perceiver = _real_perceiver(step.perceiver, real)
    width = perceiver.hidden_size
    return dataclasses.replace(step, in_features=width, out_features=width, perceiver=perceiver)


def _halved(steps: tuple[ProjectorStep, ...]) -> tuple[ProjectorStep, ...]:
    """A linear after a gated unit reads half the previous linear's width, at any size."""
    out, width = [], 0
    for step in steps:
        if step.op == "linear":
            if out and out[-1].op == "glu":
                step = dataclasses.replace(step, in_features=width // 2)
            width = step.out_features
        out.append(step)
    return tuple(out)


def _real_merge(step: ProjectorStep, real: Any) -> ProjectorStep:
    """A patch merge at the real sizes: the tower's width, merge size squared times, to it."""
    size = step.kernel_at(real)
    width = real.vision_config.hidden_size
    return dataclasses.replace(step, in_features=width * size**2, out_features=width, kernel=size)


def _real_kernel(kernel: int, tokens_key: str | None, real: Any) -> int:
    """A pooling kernel at the real sizes: the patch grid's side over the tokens' side."""
    if not kernel or tokens_key is None:
        return kernel
    side = patch_grid_side(real.vision_config)
    tokens = getattr(real, tokens_key)
    per_side = math.isqrt(tokens)
    if not per_side or side % per_side:
        raise InvalidConfigError(
            f"config.json:{tokens_key} {tokens} does not pool the tower's patch grid: "
            f"vision_config image_size {real.vision_config.image_size} // patch_size "
            f"{real.vision_config.patch_size} = {side} patches a side, not a multiple of "
            f"{per_side}"
        )
    return side // per_side
