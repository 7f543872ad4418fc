"""Check that the vision spec computes what the tiny HF VLM computes, component by component.

Each stage runs the spec on the exact input HF's module received (from the trace), so a mismatch
points at one module: the embeddings, the pre norm, each encoder layer, the selection, the
projector and the merge. Then the whole chain runs from the pixels, so stages that are right
alone but wired wrong (a feature layer off by one) fail too. Weights are the tiny model's own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.vision.parts import VLMParts
from onboard.analysis.vision.perceiver_run import (
    capture_perceiver,
    run_perceiver,
    run_perceiver_layer,
)
from onboard.analysis.vision.pixtral_run import PixtralRun, patch_merge
from onboard.analysis.vision.steps import ROW_OPS, run_row_step, stage_deltas
from onboard.analysis.vision.tiles import tile_packer
from onboard.analysis.vision.trace import VisionTrace
from onboard.spec import Delta
from onboard.vision import PixtralTowerSpec, VisionSpec, VitTowerSpec

TOLERANCE = 1e-5  # fp32; the right spec matches to ~1e-7


@dataclass(frozen=True)
class _Stage:
    module: str  # the HF module path whose input or output is compared, relative to the VLM
    compute: Callable[[], Any]  # the spec's value, computed when the stage is checked
    expected: Any
    side: str = "output"
    method: str = "forward"  # whose source line the delta cites


def check_vision(
    vision: VisionSpec, model: Any, parts: VLMParts, trace: VisionTrace
) -> tuple[Delta, ...]:

    paths = {
        "tower": f"{parts.base}.{parts.tower}",
        "projector": f"{parts.base}.{parts.projector}",
        "text": f"{parts.base}.{parts.language_model}",
    }
    tower_weights = _weights(model.get_submodule(paths["tower"]))
    grids: list[tuple[int, int]] = []
    run: VitRun | PixtralRun
    if isinstance(vision.tower, PixtralTowerSpec):
        run = PixtralRun(vision.tower, tower_weights, trace.image_sizes)
        grids = run.grids
    else:
        run = VitRun(vision.tower, tower_weights)
    project = _projector(vision, model.get_submodule(paths["projector"]), grids)
    stages = _stages(vision, run, project, trace, paths)
    stages[-3:-3] = _perceiver_stages(vision, model.get_submodule(paths["projector"]), trace, paths)
    packer = tile_packer(vision, model, trace)
    if packer is not None:
        stages = _tile_stages(stages, packer, project, vision, run, trace, parts.base)
    return stage_deltas(stages, _difference, lambda stage, detail: _delta(model, stage, detail))


def _stages(
    vision: VisionSpec,
    run: VitRun | PixtralRun,
    project: Callable[[Any], Any],
    trace: VisionTrace,
    paths: dict[str, str],
) -> list[_Stage]:
    tower = vision.tower
    states = trace.hidden_states
    pixels = trace.pixel_values
    layers = f"{paths['tower']}.{tower.name_of('layers')}"
    first = tower.name_of("pre_norm") if tower.pre_norm else tower.name_of("patch")
    stages = [
        _Stage(f"{paths['tower']}.{first}", lambda: run.pre_norm(run.embed(pixels)), states[0])
    ]
    stages += [
        _Stage(f"{layers}.{i}", lambda i=i: run.layer(i, states[i]), states[i + 1])
        for i in range(tower.num_layers)
    ]
    if vision.select.post_norm and trace.post_normed is not None:
        stages.append(
            _Stage(
                f"{paths['tower']}.{tower.name_of('post_norm')}",
                lambda: run.post_norm(states[-1]),
                trace.post_normed,
            )
        )
    stages += [
        _Stage(
            paths["projector"],
            lambda: select(vision, run, states),
            trace.projector_in,
            side="input",
            method="get_image_features",
        ),
        _Stage(
            paths["projector"], lambda: project(trace.projector_in), _tokens(trace.projector_out)
        ),
        _Stage(
            paths["text"],
            lambda: merge(vision, trace.text_embeddings, trace.input_ids, trace.projector_out),
            trace.merged,
            side="input",
            method="get_placeholder_mask",
        ),
        # the whole chain from the pixels: stages right alone but wired wrong fail here
        _Stage(
            paths["projector"],
            lambda: project(select(vision, run, run.states(pixels))),
            _tokens(trace.projector_out),
        ),
    ]
    return stages


def _perceiver_stages(
    vision: VisionSpec, projector: Any, trace: VisionTrace, paths: dict[str, str]
) -> list[_Stage]:
    """A perceiver resampler's stages, each on what HF's module received: the steps before it
    (the resampler's input), each layer, the resampler's output; and HF's mask for the context
    is all ones (every patch real, the only case the spec describes)."""
    steps = vision.projector.steps
    at = next((i for i, s in enumerate(steps) if s.perceiver is not None), None)
    if at is None:
        return []
    step = steps[at]
    spec = step.perceiver
    assert spec is not None
    captured = capture_perceiver(projector, step.name, (trace.projector_in, *trace.projector_extra))
    weight = _weights(projector)
    before = dataclasses.replace(vision.projector, steps=steps[:at])
    project_before = _projector(dataclasses.replace(vision, projector=before), projector, [])
    resampler = f"{paths['projector']}.{step.name}"
    layers = f"{resampler}.{spec.name_of('layers')}"
    stages = [
        _Stage(resampler, lambda: project_before(trace.projector_in), captured.context, "input")
    ]
    if captured.mask is not None:
        mask = captured.mask.float()
        stages.append(_Stage(resampler, lambda: _all_ones(mask), mask, "input"))
    stages += [
        _Stage(
            f"{layers}.{i}",
            lambda i=i, got=layer: run_perceiver_layer(spec, step.name, weight, i, got[0], got[1]),
            layer[2],
        )
        for i, layer in enumerate(captured.layers)
    ]
    stages.append(
        _Stage(
            resampler,
            lambda: run_perceiver(spec, step.name, weight, captured.context),
            captured.output,
        )
    )
    return stages


def _all_ones(mask: Any) -> Any:
    """The context mask the spec computes with: every patch real."""
    import torch

    return torch.ones_like(mask)


def _tile_stages(
    stages: list[_Stage],
    packer: Callable[[Any], Any],
    project: Callable[[Any], Any],
    vision: VisionSpec,
    run: VitRun | PixtralRun,
    trace: VisionTrace,
    base: str,
) -> list[_Stage]:
    """Tiles: the projected tiles packed into each image's grid (HF's pack_image_features),
    the packed features merged, and the chain from the pixels through the packing."""
    merge_at = next(i for i, s in enumerate(stages) if s.method == "get_placeholder_mask")
    text = stages[merge_at].module
    return [
        *stages[:merge_at],
        _Stage(
            base,
            lambda: packer(trace.projector_out),
            trace.packed,
            method="pack_image_features",
        ),
        _Stage(
            text,
            lambda: merge(vision, trace.text_embeddings, trace.input_ids, trace.packed),
            trace.merged,
            side="input",
            method="get_placeholder_mask",
        ),
        _Stage(
            base,
            lambda: packer(project(select(vision, run, run.states(trace.pixel_values)))),
            trace.packed,
            method="get_image_features",
        ),
    ]


class VitRun:
    """The ViT tower, computed from its spec with ``weight(name)`` giving its tensors."""

    def __init__(self, spec: VitTowerSpec, weight: Callable[[str], Any]) -> None:
        self.spec = spec
        self.weight = weight

    def embed(self, pixels: Any) -> Any:
        import torch
        import torch.nn.functional as F

        s = self.spec
        patch = s.name_of("patch")
        bias = self.weight(f"{patch}.bias") if s.patch_bias else None
        x = F.conv2d(pixels, self.weight(f"{patch}.weight"), bias, stride=s.patch_size)
        x = x.flatten(2).transpose(1, 2)
        if s.class_token:
            cls = self.weight(s.name_of("class_embedding")).reshape(1, 1, -1)
            x = torch.cat([cls.expand(x.shape[0], 1, -1), x], dim=1)
        positions = s.name_of("positions")
        table = self.weight(positions if s.table_parameters else f"{positions}.weight")
        return x + table.reshape(-1, s.hidden_size)[: x.shape[1]]

    def pre_norm(self, x: Any) -> Any:
        return self._norm(self.spec.name_of("pre_norm"), x) if self.spec.pre_norm else x

    def post_norm(self, x: Any) -> Any:
        return self._norm(self.spec.name_of("post_norm"), x)

    def states(self, pixels: Any) -> list[Any]:
        """The hidden states as HF lists them: the encoder's input, then each layer's output."""
        states = [self.pre_norm(self.embed(pixels))]
        for i in range(self.spec.num_layers):
            states.append(self.layer(i, states[-1]))
        return states

    def layer(self, index: int, x: Any) -> Any:
        s = self.spec
        prefix = f"{s.name_of('layers')}.{index}."
        norm = dict(s.norm.names)
        attended = self._attention(
            prefix + s.name_of("attention"), self._norm(prefix + norm["attn_in"], x)
        )
        h = x + self._scaled(prefix, "attn_scale", attended)
        out = self._mlp(prefix + s.name_of("mlp"), self._norm(prefix + norm["mlp_in"], h))
        return h + self._scaled(prefix, "mlp_scale", out)

    def _scaled(self, prefix: str, role: str, x: Any) -> Any:
        return x * self.weight(prefix + self.spec.name_of(role)) if self.spec.layer_scale else x

    def _norm(self, name: str, x: Any) -> Any:
        import torch.nn.functional as F

        s = self.spec.norm
        bias = self.weight(f"{name}.bias") if s.bias else None
        return F.layer_norm(x, x.shape[-1:], self.weight(f"{name}.weight"), bias, s.eps)

    def _linear(self, name: str, x: Any, bias: bool) -> Any:
        import torch.nn.functional as F

        return F.linear(
            x, self.weight(f"{name}.weight"), self.weight(f"{name}.bias") if bias else None
        )

    def _attention(self, name: str, x: Any) -> Any:
        a = self.spec.attention
        batch, seq, _ = x.shape

        def heads(projection: str, bias: bool) -> Any:
            out = self._linear(f"{name}.{projection}", x, bias)
            return out.view(batch, seq, a.num_heads, a.head_dim).transpose(1, 2)

        q, k, v = heads("q_proj", a.q_bias), heads("k_proj", a.k_bias), heads("v_proj", a.v_bias)
        scores = (q @ k.transpose(-1, -2)) * a.scale
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, -1)
        return self._linear(f"{name}.{self.spec.name_of('o_proj')}", out, a.o_bias)

    def _mlp(self, name: str, x: Any) -> Any:
        from transformers.activations import ACT2FN

        m = self.spec.mlp
        up, down = m.projections
        hidden = ACT2FN[m.activation](self._linear(f"{name}.{up}", x, m.bias))
        return self._linear(f"{name}.{down}", hidden, m.bias)


def select(vision: VisionSpec, run: VitRun | PixtralRun, states: Any) -> Any:
    import torch

    s = vision.select
    picked = [run.post_norm(states[-1])] if s.post_norm else [states[i] for i in s.layers]
    if s.drop_class_token:
        picked = [p[:, 1:] for p in picked]
    selected = torch.cat(picked, dim=-1)
    # Pixtral packs every image's patches into one row; the projector takes the patches
    return selected[0] if isinstance(run, PixtralRun) else selected


def merge(vision: VisionSpec, embeddings: Any, input_ids: Any, features: Any) -> Any:
    """Placeholder rows replaced by feature rows, in reading order over the batch."""
    placeholders = input_ids == vision.merge.image_token_id
    rows = features.reshape(-1, features.shape[-1]).shape[0]
    if int(placeholders.sum()) != rows:
        raise ValueError(
            f"{int(placeholders.sum())} placeholders of token {vision.merge.image_token_id} "
            f"for {rows} feature rows"
        )
    merged = embeddings.clone()
    merged[placeholders] = features.reshape(-1, features.shape[-1]).to(merged.dtype)
    return merged


def _projector(
    vision: VisionSpec, projector: Any, grids: list[tuple[int, int]]
) -> Callable[[Any], Any]:
    """The projector's steps over features; ``grids``: each image's patch rows and columns,
    for a patch merge."""
    import torch.nn.functional as F
    from transformers.activations import ACT2FN

    weight = _weights(projector)

    def project(x: Any) -> Any:
        for step in vision.projector.steps:
            if step.op in ROW_OPS:
                x = run_row_step(step, weight, x)
            elif step.op == "avg_pool":
                batch, count, width = x.shape
                side = math.isqrt(count)
                grid = x.transpose(1, 2).reshape(batch, width, side, side)
                x = F.avg_pool2d(grid, step.kernel).flatten(2).transpose(1, 2)
            elif step.op == "matmul":
                x = x @ weight(step.name)
            elif step.op == "glu":
                value, gate = x.chunk(2, dim=-1)
                x = ACT2FN[step.activation](gate) * value
            elif step.op == "pixel_shuffle":
                x = pixel_shuffle(x, step.kernel)
            elif step.op == "perceiver" and step.perceiver is not None:
                x = run_perceiver(step.perceiver, step.name, weight, x)
            elif step.op == "patch_merge":
                bias = weight(f"{step.name}.bias") if step.bias else None
                merged = patch_merge(x, grids, step.kernel)
                x = F.linear(merged, weight(f"{step.name}.weight"), bias)
            else:
                x = ACT2FN[step.activation](x)
        return x

    return project


def _tokens(features: Any) -> Any:
    """A projector's output as ``[images, tokens, width]``: Aya Vision's keeps the shuffled
    grid ``[images, rows, columns, width]``, which its caller flattens row by row."""
    if features.dim() == 4:
        return features.reshape(features.shape[0], -1, features.shape[-1])
    return features


def pixel_shuffle(x: Any, kernel: int) -> Any:
    """Space to depth over each image's square patch grid: ``[images, patches, width]`` ->
    ``[images, patches / kernel**2, kernel**2 * width]``, blocks in reading order, each block's
    patches in reading order, each patch's features whole."""
    images, count, width = x.shape
    side = math.isqrt(count)
    blocks = side // kernel
    grid = x.reshape(images, blocks, kernel, blocks, kernel, width)
    return grid.permute(0, 1, 3, 2, 4, 5).reshape(images, blocks * blocks, kernel**2 * width)


def _weights(module: Any) -> Callable[[str], Any]:
    tensors = dict(module.named_parameters())
    return tensors.__getitem__


def _difference(got: Any, expected: Any) -> str | None:
    if got.shape != expected.shape:
        return f"shape {tuple(got.shape)} against HF's {tuple(expected.shape)}"
    worst = float((got - expected).abs().max())
    return f"max abs {worst:.2g}" if worst > TOLERANCE else None


def _delta(model: Any, stage: _Stage, detail: str) -> Delta:
    module = model.get_submodule(stage.module)
    owner = module if stage.method == "forward" else model.base_model
    where = source_location(getattr(type(owner), stage.method, None)) or stage.module
    what = (
        f"{type(module).__name__} computes something the vision spec does not describe"
        if stage.side == "output"
        else f"{type(module).__name__} receives something the vision spec does not describe"
    )
    return Delta(what, where, f"{stage.module} ({stage.side}): {detail}")
