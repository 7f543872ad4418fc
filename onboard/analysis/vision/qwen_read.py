"""The Qwen-VL vision side of a tiny VLM as one ``VisionSpec``: tower, merger (the projector),
merge with M-RoPE positions, on-disk prefixes and tensors, proved by ``check_qwen_vl``.

Kept apart from ``_read_vision`` because every input differs: flattened patches with
``image_grid_thw`` instead of an image batch, a projector inside the tower, and positions the
host computes from the grids.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.vision.glm_read import glm_evidence, glm_resample
from onboard.analysis.vision.merger import called_inputs, called_leaves, read_merger
from onboard.analysis.vision.mrope_read import mrope_spec, read_mrope_layout
from onboard.analysis.vision.parts import disk_prefixes
from onboard.analysis.vision.qwen_check import check_qwen_vl
from onboard.analysis.vision.qwen_vl import (
    NotQwenVL,
    qwen_vl_evidence,
    qwen_vl_parts,
    read_qwen_vl_tower,
    trace_qwen_vl,
)
from onboard.checkpoint import tensors
from onboard.spec import Delta, Evidence
from onboard.tiny_vision import image_token_key
from onboard.vision import DeepStackSpec, FeatureSelectSpec, MergeSpec, VisionSpec, VisionTowers

_SUPPORTED = (
    "onboard reads Qwen-VL towers with a Conv3d patch embedding, 2-D RoPE, RMS pre-norm layers "
    "with a fused qkv and a gated MLP, and a patch merger so far"
)


def read_qwen_vision(
    model: Any, config: Any
) -> tuple[VisionSpec | None, tuple[tuple[str, tuple[Evidence, ...]], ...], tuple[Delta, ...]]:
    import torch

    tower_module = model.get_submodule(f"{model.base_model_prefix}.visual")
    try:
        parts = qwen_vl_parts(model)
        tower = read_qwen_vl_tower(tower_module, config.vision_config)
        mrope = mrope_spec(config.text_config)
        rotary = parts.module(model, "language_model").rotary_emb
        layout, pairs, layout_evidence = read_mrope_layout(rotary, mrope.sections)
        mrope = dataclasses.replace(mrope, layout=layout, pairs=pairs)
        merger = parts.module(model, "projector")
        merger_width = tower.out_hidden_size if tower.glm else tower.hidden_size
        probe = torch.zeros(4, merger_width)
        leaves = called_leaves(merger, lambda: merger(probe))
        inputs = called_inputs(merger, lambda: merger(probe))
        projector = read_merger(merger, merger_width, leaves, inputs)
        deepstack = _deepstack(tower_module, tower, config.vision_config)
    except NotQwenVL as exc:
        where = source_location(type(tower_module).forward) or type(tower_module).__name__
        what = f"vision tower {type(tower_module).__name__} is not a Qwen-VL tower onboard reads"
        return None, (), (Delta(f"{what} ({exc})", where, _SUPPORTED),)
    trace = trace_qwen_vl(model, parts, config)
    resample_evidence = None
    if tower.glm is not None:
        tower, resample_evidence = glm_resample(model, parts, tower, trace)
    key = image_token_key(config)
    merge = MergeSpec(
        image_token_id=config.image_token_id,
        image_token_key=key,
        positions="mrope",
        mrope=mrope,
    )
    saved = tensors(model)
    prefixes = disk_prefixes(model, parts, saved)
    vision_prefixes = tuple(p for r, p in prefixes if r in ("tower", "projector"))
    vision = VisionSpec(
        towers=VisionTowers(qwen_vl=tower),
        # the merger reads the last layer's output, whole (no class token, no post norm)
        select=FeatureSelectSpec(layers=(-1,), drop_class_token=False, post_norm=False),
        projector=projector,
        merge=merge,
        prefixes=prefixes,
        text_model_type=config.text_config.model_type,
        tensors=tuple(
            sorted((n, tuple(t.shape)) for n, t in saved.items() if n.startswith(vision_prefixes))
        ),
        deepstack=deepstack,
    )
    evidence = (
        *qwen_vl_evidence(tower_module, tower, config.vision_config, mrope),
        (
            "vision.projector",
            (Evidence("probe", source_location(type(merger).forward) or "merger", "merger steps"),),
        ),
        (
            "vision.merge.image_token_id",
            (Evidence("config", f"config.json:{key}", "image placeholder token"),),
        ),
        ("vision.merge.mrope.layout", (layout_evidence,)),
        *_deepstack_evidence(tower_module, deepstack, config.vision_config),
        *glm_evidence(tower_module, tower, config.vision_config, resample_evidence),
    )
    deltas = check_qwen_vl(
        tower, projector, mrope, config.image_token_id, model, parts, trace, deepstack
    )
    return vision, evidence, deltas


def _deepstack(tower_module: Any, tower: Any, config: Any) -> DeepStackSpec | None:
    """The DeepStack layers (config) and their mergers' steps (read from the first one: the
    others are built alike, and the check runs each with its own weights)."""
    import torch

    if "deepstack" not in dict(tower.names):
        return None
    name = tower.name_of("deepstack")
    first = tower_module.get_submodule(f"{name}.0")
    probe = torch.zeros(tower.spatial_merge_size**2, tower.hidden_size)
    leaves = called_leaves(first, lambda: first(probe))
    projector = dataclasses.replace(read_merger(first, tower.hidden_size, leaves), name=name)
    return DeepStackSpec(
        layers=tuple(int(i) for i in config.deepstack_visual_indexes),
        name=name,
        projector=projector,
    )


def _deepstack_evidence(
    tower_module: Any, deepstack: DeepStackSpec | None, config: Any
) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    if deepstack is None:
        return ()
    where = source_location(type(tower_module).forward) or type(tower_module).__name__
    return (
        (
            "vision.deepstack.layers",
            (
                Evidence(
                    "config",
                    f"config.json:vision_config.{deepstack.key}",
                    repr(list(config.deepstack_visual_indexes)),
                ),
                Evidence("probe", where, f"one merger each in {deepstack.name}"),
            ),
        ),
        (
            "vision.deepstack.projector",
            (Evidence("probe", where, f"{deepstack.name}.0 steps; checked per merger"),),
        ),
    )
