"""A Qwen-VL vision spec read at tiny sizes, restated at the real config's sizes."""

from __future__ import annotations

from typing import Any

from onboard.analysis.vision.mrope_read import mrope_spec
from onboard.vision import ProjectorStep, QwenVLTowerSpec


def qwen_vl_at_real_sizes(vision: Any, real: Any) -> Any:
    """The Qwen-VL vision spec at the real config's sizes: the tower's through its keys, the
    merger's widths (the tower's, merge-size-squared times, and the text's), the real
    M-RoPE sections and image token."""
    import dataclasses

    tower: QwenVLTowerSpec = vision.tower
    config = real.vision_config
    keys = dict(tower.keys)

    def value(field: str) -> Any:
        return getattr(config, keys[field])

    hidden, heads = value("hidden_size"), value("num_heads")
    head_dim = hidden // heads
    tiny_group = tower.hidden_size * tower.spatial_merge_size**2
    real_group = hidden * value("spatial_merge_size") ** 2
    widths = {
        tower.hidden_size: hidden,
        tiny_group: real_group,
        tower.out_hidden_size: value("out_hidden_size"),
    }
    if len(widths) != 3:
        raise ValueError("the tiny tower, merger and text widths coincide")
    if "merger_width" in keys:  # GLM-4V's merger: its gated unit is intermediate_size wide
        tiny_merger = next(s.out_features for s in vision.projector.steps if s.op == "gate_up")
        if tiny_merger in widths:
            raise ValueError("the tiny merger's width is another width too")
        widths[tiny_merger] = value("merger_width")
    default_scale = tower.attention.scale == tower.attention.head_dim**-0.5
    real_tower = dataclasses.replace(
        tower,
        hidden_size=hidden,
        num_layers=value("num_layers"),
        patch_size=value("patch_size"),
        temporal_patch_size=value("temporal_patch_size"),
        num_channels=value("num_channels"),
        head_dim=head_dim,
        rope_theta=float(config.rope_parameters["rope_theta"]),
        spatial_merge_size=value("spatial_merge_size"),
        window_size=int(value("window_size")) if "window_size" in keys else 0,
        fullatt_layers=tuple(int(i) for i in value("fullatt_layers"))
        if "fullatt_layers" in keys
        else tuple(range(value("num_layers"))),
        out_hidden_size=value("out_hidden_size"),
        position_embeddings=_positions(tower, keys, value),
        attention=dataclasses.replace(
            tower.attention,
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=head_dim,
            scale=head_dim**-0.5 if default_scale else tower.attention.scale,
        ),
        mlp=dataclasses.replace(
            tower.mlp,
            intermediate_size=value("intermediate_size")
            if "intermediate_size" in keys
            else int(hidden * config.mlp_ratio),
            activation=value("activation"),
        ),
    )
    steps = _real_steps(vision.projector.steps, widths, value)
    mrope = dataclasses.replace(
        mrope_spec(real.text_config, vision.merge.mrope.layout), pairs=vision.merge.mrope.pairs
    )
    deepstack = vision.deepstack
    if deepstack is not None:
        deepstack = dataclasses.replace(
            deepstack,
            layers=tuple(int(i) for i in getattr(config, deepstack.key)),
            projector=dataclasses.replace(
                deepstack.projector, steps=_real_steps(deepstack.projector.steps, widths, value)
            ),
        )
    return dataclasses.replace(
        vision,
        towers=vision.towers.replace(real_tower),
        projector=dataclasses.replace(vision.projector, steps=steps),
        merge=dataclasses.replace(
            vision.merge, image_token_id=int(real.image_token_id), mrope=mrope
        ),
        deepstack=deepstack,
    )


def _positions(tower: QwenVLTowerSpec, keys: dict[str, str], value: Any) -> int:
    """The real table's rows: num_position_embeddings, or GLM-4V's (image_size / patch) ** 2."""
    if not tower.position_embeddings:
        return 0
    if "position_side" in keys:
        return (value("position_side") // value("patch_size")) ** 2
    return value("position_embeddings")


def _real_steps(steps: Any, widths: dict[int, int], value: Any) -> tuple[ProjectorStep, ...]:
    import dataclasses

    return tuple(
        dataclasses.replace(
            step,
            in_features=widths.get(step.in_features, step.in_features),
            out_features=widths.get(step.out_features, step.out_features),
            kernel=value("spatial_merge_size") ** 2 if step.op == "group_rows" else step.kernel,
        )
        for step in steps
    )
