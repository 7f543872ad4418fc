"""GLM-4V's tower parts in the Qwen-VL reading: the resampling probed against the trace, and the
evidence for each part the spec adds."""

from __future__ import annotations

import dataclasses
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.vision.glm import read_resample
from onboard.analysis.vision.parts import VLMParts
from onboard.analysis.vision.qwen_vl import QwenVLTrace
from onboard.analysis.vision.qwen_vl_run import QwenVLRun
from onboard.spec import Evidence
from onboard.vision import QwenVLTowerSpec


def glm_resample(
    model: Any, parts: VLMParts, tower: QwenVLTowerSpec, trace: QwenVLTrace
) -> tuple[QwenVLTowerSpec, Evidence | None]:
    """The tower with the resampling whose first-layer input is the one HF's layers received."""
    assert tower.glm is not None
    tower_module = parts.module(model, "tower")
    weights = dict(tower_module.named_parameters())
    grids = [tuple(g) for g in trace.grids.tolist()]

    def embed(mode: str) -> Any:
        import torch

        spec = dataclasses.replace(tower, glm=dataclasses.replace(tower.glm, resample=mode))
        with torch.no_grad():
            return QwenVLRun(spec, weights.__getitem__, grids).embed(trace.pixel_values)

    embeddings = tower_module.get_submodule(tower.name_of("positions").rpartition(".")[0])
    where = source_location(type(embeddings).forward) or type(embeddings).__name__
    mode, evidence = read_resample(embed, trace.layer_inputs[0], where)
    return dataclasses.replace(tower, glm=dataclasses.replace(tower.glm, resample=mode)), evidence


def glm_evidence(
    tower_module: Any, tower: QwenVLTowerSpec, config: Any, resample: Evidence | None
) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    if tower.glm is None:
        return ()
    where = source_location(type(tower_module).forward) or type(tower_module).__name__
    order = "called before the first layer"
    found = [
        (
            "vision.tower.glm.patch_norm",
            (Evidence("probe", where, f"{tower.name_of('patch_norm')}: {order}"),),
        ),
        (
            "vision.tower.glm.end_norm",
            (Evidence("probe", where, f"{tower.name_of('end_norm')}: called after the layers"),),
        ),
        (
            "vision.tower.glm.downsample_bias",
            (
                Evidence(
                    "probe",
                    where,
                    f"{tower.name_of('downsample')}: a {tower.spatial_merge_size}-square "
                    "convolution at its own stride, before the merger",
                ),
            ),
        ),
    ]
    if resample is not None:
        found.append(("vision.tower.glm.resample", (resample,)))
    keys = dict(tower.keys)
    if "position_side" in keys:
        side = config.image_size // config.patch_size
        found.append(
            (
                "vision.tower.position_embeddings",
                (
                    Evidence(
                        "config",
                        "config.json:vision_config.image_size",
                        f"(image_size / patch_size) ** 2 = {side * side} learned positions",
                    ),
                ),
            )
        )
    return tuple(found)
