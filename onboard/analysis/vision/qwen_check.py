"""Check a Qwen-VL vision spec stage by stage against what the tiny HF model's modules received
and returned: the patch embedding, each layer, the tower's end, the merger, the whole tower from
the pixels, DeepStack, the merge, the host's M-RoPE positions and the rotary angles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.vision.mrope_read import rotary_width
from onboard.analysis.vision.parts import VLMParts
from onboard.analysis.vision.qwen_vl import QwenVLTrace
from onboard.analysis.vision.qwen_vl_run import QwenVLRun, mrope_cos_sin
from onboard.analysis.vision.steps import stage_deltas
from onboard.spec import Delta
from onboard.vision import DeepStackSpec, MRopeSpec, ProjectorSpec, QwenVLTowerSpec

TOLERANCE = 1e-5


@dataclass(frozen=True)
class _Stage:
    module: str
    compute: Any
    expected: Any
    what: str


def check_qwen_vl(
    tower: QwenVLTowerSpec,
    projector: ProjectorSpec,
    mrope: MRopeSpec,
    image_token: int,
    model: Any,
    parts: VLMParts,
    trace: QwenVLTrace,
    deepstack: DeepStackSpec | None = None,
) -> tuple[Delta, ...]:
    """Each stage computed from the spec on what HF's module received, compared with what it
    returned; then the whole tower from the pixels; then the merge, the host's M-RoPE positions
    and the rotary angles they give."""
    import torch

    from onboard.analysis.vision.check import merge as merge_rows
    from onboard.parity.mrope import mrope_positions

    base = parts.base
    tower_path = f"{base}.{parts.tower}"
    weights = dict(model.get_submodule(tower_path).named_parameters())
    merger_weights = dict(model.get_submodule(f"{base}.{parts.projector}").named_parameters())
    run = QwenVLRun(tower, weights.__getitem__, [tuple(g) for g in trace.grids.tolist()])
    layers = f"{tower_path}.{tower.name_of('layers')}"
    text = model.get_submodule(f"{base}.{parts.language_model}")

    def host_positions() -> Any:
        positions, _ = mrope_positions(
            trace.input_ids.numpy(), image_token, trace.grids.tolist(), tower.spatial_merge_size
        )
        return torch.from_numpy(positions)

    def host_angles() -> Any:
        theta = float(text.config.rope_parameters["rope_theta"])
        width = rotary_width(text.config)
        return torch.stack(
            mrope_cos_sin(mrope.sections, theta, width, trace.positions, mrope.layout, mrope.pairs)
        )

    stages = [
        _Stage(
            f"{tower_path}.{tower.name_of('patch').rpartition('.')[0]}",
            lambda: run.patches(trace.pixel_values),
            trace.embedded[run.order],
            "the patch embedding, in window order",
        ),
        _Stage(
            f"{layers}.0",
            lambda: run.embed(trace.pixel_values),
            trace.layer_inputs[0],
            "the first layer's input (patches regrouped by window"
            + (", learned positions added)" if tower.position_embeddings else ")"),
        ),
    ]
    stages += [
        _Stage(
            f"{layers}.{i}",
            lambda i=i: run.layer(i, trace.layer_inputs[i]),
            trace.layer_outputs[i],
            f"layer {i} ({'full' if i in tower.fullatt_layers else 'window'} attention)",
        )
        for i in range(tower.num_layers)
    ]
    if tower.glm is not None:
        stages.append(
            _Stage(
                f"{tower_path}.{tower.name_of('downsample')}",
                lambda: run.end(trace.layer_outputs[-1]),
                trace.merger_in,
                "the tower's end: its norm, then the downsample convolution over each merge block",
            )
        )
    stages += _deepstack_stages(deepstack, run, weights, tower_path, trace)
    stages += _injection_stages(deepstack, image_token, f"{base}.{parts.language_model}", trace)
    stages += [
        _Stage(
            f"{base}.{parts.projector}",
            lambda: run.merge(projector, merger_weights.__getitem__, trace.merger_in),
            trace.features,
            "the merger, rows back in merge-block order",
        ),
        _Stage(
            f"{base}.{parts.projector}",
            lambda: run.merge(
                projector, merger_weights.__getitem__, run.end(run.states(trace.pixel_values)[-1])
            ),
            trace.features,
            "the whole tower from the pixels",
        ),
        _Stage(
            f"{base}.{parts.language_model}",
            lambda: merge_rows_of(merge_rows, image_token, trace),
            trace.merged,
            "the merged embeddings",
        ),
        _Stage(
            f"{base}.{parts.language_model}",
            host_positions,
            trace.positions,
            "the M-RoPE positions (the host's rule against HF's get_rope_index)",
        ),
        _Stage(
            f"{base}.{parts.language_model}.rotary_emb",
            host_angles,
            torch.stack(trace.cos_sin),
            "the M-RoPE angles from the sections",
        ),
    ]
    return stage_deltas(stages, _difference, lambda stage, detail: _delta(model, stage, detail))


def _deepstack_stages(
    deepstack: DeepStackSpec | None,
    run: QwenVLRun,
    weights: dict[str, Any],
    tower_path: str,
    trace: QwenVLTrace,
) -> list[_Stage]:
    """Each DeepStack merger over what its tower layer returned, against HF's features; a
    tower that returned features the spec does not have is a stage with nothing to compute."""
    if deepstack is None:
        if not trace.deepstack:
            return []
        return [
            _Stage(tower_path, _missing_deepstack, trace.deepstack[0], "the DeepStack features")
        ]
    stages = []
    for k, layer in enumerate(deepstack.layers):

        def compute(k: int = k, layer: int = layer) -> Any:
            def weight(name: str) -> Any:
                return weights[f"{deepstack.name}.{k}.{name}"]

            if k >= len(trace.deepstack):
                raise ValueError(f"HF returned {len(trace.deepstack)} DeepStack features")
            return run.merge(deepstack.projector, weight, trace.layer_outputs[layer])

        expected = trace.deepstack[k] if k < len(trace.deepstack) else trace.features
        stages.append(
            _Stage(
                f"{tower_path}.{deepstack.name}.{k}",
                compute,
                expected,
                f"DeepStack merger {k} over tower layer {layer}'s output",
            )
        )
    return stages


def _missing_deepstack() -> Any:
    raise ValueError("HF's tower returned DeepStack features the spec does not describe")


def _injection_stages(
    deepstack: DeepStackSpec | None, image_token: int, text_path: str, trace: QwenVLTrace
) -> list[_Stage]:
    """What follows each text layer receives its output, plus the k-th DeepStack features at
    the image placeholders after text layer k (k below the number of DeepStack layers)."""
    features = trace.deepstack if deepstack is not None else ()
    placeholders = trace.input_ids == image_token

    def compute(j: int) -> Any:
        out = trace.text_outputs[j].clone()
        if j < len(features):
            out[placeholders] = out[placeholders] + features[j]
        return out

    return [
        _Stage(
            text_path,
            lambda j=j: compute(j),
            trace.text_inputs[j],
            f"text layer {j}'s output"
            + (
                f" with DeepStack features {j} at the image placeholders"
                if j < len(features)
                else ""
            ),
        )
        for j in range(len(trace.text_outputs))
    ]


def merge_rows_of(merge_rows: Any, image_token: int, trace: QwenVLTrace) -> Any:
    placeholders = trace.input_ids == image_token
    merged = trace.text_embeddings.clone()
    if int(placeholders.sum()) != trace.features.shape[0]:
        raise ValueError(
            f"{int(placeholders.sum())} placeholders for {trace.features.shape[0]} rows"
        )
    merged[placeholders] = trace.features
    return merged


def _difference(got: Any, expected: Any) -> str | None:
    if tuple(got.shape) != tuple(expected.shape):
        return f"shape {tuple(got.shape)} against HF's {tuple(expected.shape)}"
    worst = float((got.double() - expected.double()).abs().max())
    return f"max abs {worst:.2g}" if worst > TOLERANCE else None


def _delta(model: Any, stage: _Stage, detail: str) -> Delta:
    module = model.get_submodule(stage.module)
    where = source_location(type(module).forward) or stage.module
    return Delta(
        f"{type(module).__name__}: {stage.what} is not what the vision spec describes",
        where,
        f"{stage.module}: {detail}",
    )
