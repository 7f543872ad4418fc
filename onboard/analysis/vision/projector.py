"""Read a sequential projector: its leaf modules in the order its forward calls them (linears,
layer norms, activations). A gated unit (a linear that reads what the linear before an
activation read: Idefics 2's modality projection) is one ``gate_up`` step, and a perceiver
resampler one ``perceiver`` step (``perceiver.py``). A leaf of another kind is refused; that the
steps in this order compute the projector is proved by the check."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.source_lines import init_assignment
from onboard.analysis.vision.perceiver import find_perceiver, read_perceiver
from onboard.analysis.vision.projector_activation import sub_config_activation_key
from onboard.analysis.vision.projector_width import config_value, read_projector_width
from onboard.source import SourceFile
from onboard.spec import Delta, Evidence
from onboard.tiny_vision import (
    PIXEL_SHUFFLE_KEYS,
    PIXEL_SHUFFLE_RATIO_KEYS,
    TOKENS_PER_IMAGE_KEYS,
    patch_grid_side,
    pixel_shuffle_factor,
)
from onboard.vision import ProjectorSpec, ProjectorStep

_ACTIVATION_KEYS = ("projector_hidden_act",)
_MERGE_KEY = "spatial_merge_size"
# torch.nn.GELU's approximations as the HF activation names that compute the same
_TORCH_GELU = {"none": "gelu", "tanh": "gelu_pytorch_tanh"}


@dataclass(frozen=True)
class ProjectorReading:
    spec: ProjectorSpec | None
    evidence: tuple[Evidence, ...]
    deltas: tuple[Delta, ...] = ()


def read_projector(
    name: str,
    projector: Any,
    inputs: tuple[Any, ...],
    config: Any,
    files: Sequence[SourceFile],
    features: Any = None,
) -> ProjectorReading:
    """``inputs``: what HF called the projector with (the features, then Mistral 3's
    ``image_sizes``); ``features``: the tower state they were folded from, where the model
    runs a pixel shuffle before calling the projector (``outer_shuffle.py``)."""
    import torch.nn as nn

    steps, evidence = [], []
    activation_key = None
    bias_key = None
    leaves = _called_leaves(projector, inputs)
    outside = features is not None
    features = inputs[0] if features is None else features
    shuffle = _pixel_shuffle(features, tuple(leaves[0][2].shape), config) if leaves else None
    if shuffle is not None:
        steps.append(dataclasses.replace(shuffle, outside=outside))
    previous: tuple[Any, Any] | None = None  # the last leaf called and what it received
    received_by: dict[str, Any] = {}  # each step's leaf -> what it received
    resampler = find_perceiver(projector)
    for leaf_name, leaf, received in leaves:
        received_by[leaf_name] = received
        if leaf_name == resampler:
            perceiver = read_perceiver(leaf_name, leaf, config, files, received)
            if perceiver.spec is None:
                return ProjectorReading(None, (), (perceiver.delta,) if perceiver.delta else ())
            width = perceiver.spec.hidden_size
            steps.append(
                ProjectorStep("perceiver", leaf_name, width, width, perceiver=perceiver.spec)
            )
            evidence.extend(perceiver.evidence)
        elif isinstance(leaf, nn.Linear) and (
            gated := _gated_unit(steps, received_by, leaf_name, leaf, received)
        ):
            steps[-2:] = [gated]
        elif _takes_image_sizes(leaf):
            merge = _patch_merge(leaf_name, leaf, config)
            if merge is None:
                return _refused(projector, f"{type(leaf).__name__} at {leaf_name}")
            steps.append(merge)
        elif isinstance(leaf, nn.Linear):
            bias = leaf.bias is not None
            steps.append(
                ProjectorStep("linear", leaf_name, leaf.in_features, leaf.out_features, bias)
            )
            bias_key = bias_key or _keyword_key(files, type(projector).__name__, leaf_name)
        elif isinstance(leaf, nn.LayerNorm):
            steps.append(ProjectorStep("layer_norm", leaf_name, eps=float(leaf.eps)))
        elif isinstance(leaf, nn.AvgPool2d) and _square(leaf):
            kernel = _size(leaf.kernel_size)
            steps.append(
                ProjectorStep(
                    "avg_pool", leaf_name, kernel=kernel, tokens_key=_tokens_key(config, kernel)
                )
            )
        elif (offset := rms_offset(leaf)) is not None:
            steps.append(
                ProjectorStep(
                    "rms_norm", leaf_name, eps=float(norm_eps(leaf)), weight_offset=offset
                )
            )
        elif not any(True for _ in leaf.parameters()):
            activation, key = _activation(leaf, config, _holder_key(files, projector, leaf_name))
            if activation is not None and key is None:
                key = sub_config_activation_key(projector, config, activation)
            activation_key = activation_key or key
            if activation is None:
                return _refused(projector, f"{type(leaf).__name__} at {leaf_name}")
            half = _gated_half(previous, received)
            if half == "first":
                return _refused(projector, f"a gate in the first half before {leaf_name}")
            op = "glu" if half == "second" else "activation"
            steps.append(ProjectorStep(op, leaf_name, activation=activation))
        else:
            return _refused(projector, f"{type(leaf).__name__} at {leaf_name}")
        previous = (leaf, received)
    # A bare weight of the projector's own (Gemma 3's mm_input_projection_weight) is multiplied
    # in last; the check proves the order
    for weight_name, weight in projector.named_parameters(recurse=False):
        if weight.dim() != 2:
            return _refused(projector, f"a {weight.dim()}-D parameter {weight_name}")
        rows, columns = weight.shape
        steps.append(ProjectorStep("matmul", weight_name, int(rows), int(columns)))
    where = source_location(type(projector).forward) or type(projector).__name__
    evidence.append(Evidence("probe", where, " -> ".join(s.name for s in steps)))
    if activation_key:
        value = config_value(config, activation_key)
        evidence.append(Evidence("config", f"config.json:{activation_key}", repr(value)))
    width, found = read_projector_width(projector, config)
    spec = ProjectorSpec(
        name, tuple(steps), activation_key=activation_key, bias_key=bias_key, width=width
    )
    return ProjectorReading(spec, (*evidence, *found))


def _called_leaves(projector: Any, inputs: tuple[Any, ...]) -> list[tuple[str, Any, Any]]:
    """The leaves the forward calls, in order, each with its first input; a module that lays
    patches out by ``image_sizes`` counts as one leaf (its linear is part of the merge), and so
    does a perceiver resampler (``perceiver.py``)."""
    import torch

    order: list[tuple[str, Any, Any]] = []
    merges = [n for n, m in projector.named_modules() if n and _takes_image_sizes(m)]
    perceiver = find_perceiver(projector)
    merges += [perceiver] if perceiver else []

    def keep(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> None:
        if not any(n == name for n, _, _ in order):
            first = args[0] if args else next(iter(kwargs.values()))
            order.append((name, module, first.detach()))

    handles = [
        module.register_forward_pre_hook(
            lambda m, a, k, name=name: keep(m, a, k, name), with_kwargs=True
        )
        for name, module in projector.named_modules()
        if name
        and not any(name.startswith(f"{merge}.") for merge in merges)
        and (name in merges or not any(True for _ in module.children()))
    ]
    try:
        with torch.no_grad():
            projector(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return order


def _gated_half(previous: tuple[Any, Any] | None, received: Any) -> str | None:
    """Which half of the previous leaf's output an activation received, when it received half
    of it (a gated unit computing ``act(gate) * value`` in the forward, Aya Vision's SwiGLU):
    "first", "second", or None when it received the whole output."""
    import torch

    if previous is None:
        return None
    leaf, leaf_input = previous
    with torch.no_grad():
        out = leaf(leaf_input)
    half = out.shape[-1] // 2
    if received.shape[-1] != half or out.shape[-1] != 2 * half:
        return None
    for name, part in (("first", out[..., :half]), ("second", out[..., half:])):
        if part.shape == received.shape and torch.equal(part, received):
            return name
    return None


def _pixel_shuffle(features: Any, first: tuple, config: Any) -> ProjectorStep | None:
    """A space-to-depth the projector's forward does before its first leaf (Idefics 3's and Aya
    Vision's ``pixel_shuffle``): the first leaf reads ``k ** 2`` times the width on ``k ** 2``
    times fewer tokens, where ``k`` is a config key's value. The check proves the order."""
    if len(first) < 2 or features.dim() < 2:
        return None
    width, tokens = int(features.shape[-1]), math.prod(int(d) for d in features.shape[1:-1])
    read_width, read_tokens = first[-1], math.prod(first[1:-1])
    if read_width == width or read_width % width or not read_tokens:
        return None
    kernel = math.isqrt(read_width // width)
    if kernel**2 * width != read_width or read_tokens * kernel**2 != tokens:
        return None
    key = next((k for k in PIXEL_SHUFFLE_KEYS if getattr(config, k, None) == kernel), None)
    ratio = None
    if key is None and pixel_shuffle_factor(config) == kernel:
        ratio = next(k for k in PIXEL_SHUFFLE_RATIO_KEYS if getattr(config, k, None))
    return ProjectorStep(
        "pixel_shuffle",
        "pixel_shuffle",
        width,
        read_width,
        kernel=kernel,
        kernel_key=key or ratio,
        kernel_from_ratio=ratio is not None,
    )


def _takes_image_sizes(module: Any) -> bool:
    import inspect

    return "image_sizes" in inspect.signature(type(module).forward).parameters


def _patch_merge(name: str, merger: Any, config: Any) -> ProjectorStep | None:
    """A spatial merge of ``spatial_merge_size`` squared patches into one linear (Mistral 3's
    patch merger): its one linear reads that many patches' features. The check proves the
    order it concatenates them in."""
    import torch.nn as nn

    size = getattr(config, _MERGE_KEY, None)
    linears = [(n, m) for n, m in merger.named_modules() if isinstance(m, nn.Linear)]
    if not isinstance(size, int) or len(linears) != 1:
        return None
    linear_name, linear = linears[0]
    if linear.in_features != linear.out_features * size**2:
        return None
    return ProjectorStep(
        "patch_merge",
        f"{name}.{linear_name}",
        linear.in_features,
        linear.out_features,
        linear.bias is not None,
        kernel=size,
        kernel_key=_MERGE_KEY,
    )


def _tokens_key(config: Any, kernel: int) -> str | None:
    """The config key whose tokens per image make this pooling kernel."""
    side = patch_grid_side(config.vision_config)
    for key in TOKENS_PER_IMAGE_KEYS:
        tokens = getattr(config, key, None)
        if isinstance(tokens, int) and tokens > 0 and (side // math.isqrt(tokens)) == kernel:
            return key
    return None


def _square(pool: Any) -> bool:
    """A pool over square, non-overlapping blocks without padding."""
    kernel, stride = _size(pool.kernel_size), _size(pool.stride or pool.kernel_size)
    return kernel == stride and not _size(pool.padding) and not pool.ceil_mode


def _size(value: Any) -> int:
    """One side of a square size (``4`` or ``(4, 4)``); -1 when it is not square."""
    if isinstance(value, tuple | list):
        return int(value[0]) if len(set(value)) == 1 else -1
    return int(value)


def rms_offset(module: Any) -> float | None:
    """0.0 or 1.0 when ``module`` is an RMS norm scaling by ``offset + weight`` (told by its
    output on a probe), else None."""
    import torch

    weights = [p for n, p in module.named_parameters() if n == "weight"]
    eps = norm_eps(module)
    if len(list(module.parameters())) != 1 or len(weights) != 1 or eps is None:
        return None
    (weight,) = weights
    x = torch.linspace(-1.0, 2.0, weight.numel()).reshape(1, -1)
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    with torch.no_grad():
        out = module(x)
    for offset in (0.0, 1.0):
        if torch.allclose(out, normed * (offset + weight), atol=1e-6):
            return offset
    return None


def norm_eps(module: Any) -> float | None:
    """A norm's epsilon, under either name HF's norms keep it (Llama's copies: variance_epsilon)."""
    for name in ("eps", "variance_epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, float):
            return value
    return None


def _activation(
    module: Any, config: Any, holder_key: str | None = None
) -> tuple[str | None, str | None]:
    """The HF activation name the module is, and the config key it came from: a key of the
    composite config, or the one the module holding it is built with (``holder_key``: Idefics
    2's ``hidden_act=config.text_config.hidden_act``), where its value is this activation."""
    from transformers.activations import ACT2CLS

    for key in (*_ACTIVATION_KEYS, *([holder_key] if holder_key else [])):
        name = config_value(config, key)
        if isinstance(name, str) and _is_activation(module, ACT2CLS.get(name)):
            return name, key
    names = [n for n, c in ACT2CLS.items() if _is_activation(module, c)]
    if not names and type(module).__name__ == "GELU":  # torch's own (LightOnOCR's projector)
        names = [_TORCH_GELU.get(getattr(module, "approximate", ""), "")]
    if len(names) > 1:  # one class under several names (gelu, gelu_python): what it computes
        names = _computing_the_same(module, names)
    return (names[0], None) if len(names) == 1 and names[0] else (None, None)


def _computing_the_same(module: Any, names: list[str]) -> list[str]:
    """Of ``names``, the first whose activation computes what ``module`` does, if all those that
    do compute the same (GELU's erf form in torch or in Python)."""
    import torch
    from transformers.activations import ACT2FN

    x = torch.linspace(-6.0, 6.0, 97)
    with torch.no_grad():
        out = module(x)
        same = [n for n in names if torch.allclose(ACT2FN[n](x), out, atol=1e-6)]
    return same[:1]


def _holder_key(files: Sequence[SourceFile], projector: Any, leaf: str) -> str | None:
    """The config key of the activation the module holding ``leaf`` is built with, by the
    projector's ``__init__`` (``self.modality_projection = Idefics2MLP(...,
    hidden_act=config.text_config.hidden_act)``: text_config.hidden_act)."""
    holder = leaf.partition(".")[0]
    if holder == leaf:
        return None
    found = init_assignment(files, type(projector).__name__, holder)
    text = (found.keyword("hidden_act") if found else None) or ""
    return text.removeprefix("config.") if re.fullmatch(r"config(\.\w+)+", text) else None


def _gated_unit(
    steps: list[ProjectorStep],
    received_by: dict[str, Any],
    name: str,
    leaf: Any,
    received: Any,
) -> ProjectorStep | None:
    """``activation(gate(x)) * up(x)`` (Idefics 2's modality projection): this linear (up)
    reads the rows the linear before the last activation (gate) read, at the same widths."""
    if len(steps) < 2 or steps[-2].op != "linear" or steps[-1].op != "activation":
        return None
    read = received_by.get(steps[-2].name)
    if read is None or read.shape != received.shape or not read.equal(received):
        return None
    return gate_up_step(steps[-2], steps[-1], name, leaf)


def gate_up_step(
    gate: ProjectorStep, act: ProjectorStep, up: str, leaf: Any
) -> ProjectorStep | None:
    """The gated unit of the linear ``gate``, its activation ``act`` and the linear ``up``
    (``leaf``) that read the same input; None when the two linears' widths differ."""
    if (leaf.in_features, leaf.out_features, leaf.bias is not None) != (
        gate.in_features,
        gate.out_features,
        gate.bias,
    ):
        return None
    return ProjectorStep(
        "gate_up",
        gate.name,
        gate.in_features,
        gate.out_features,
        gate.bias,
        activation=act.activation,
        up=up,
    )


def _is_activation(module: Any, entry: Any) -> bool:
    cls = entry[0] if isinstance(entry, tuple) else entry
    return cls is not None and type(module) is cls


def _keyword_key(files: Sequence[SourceFile], cls: str, attribute: str) -> str | None:
    found = init_assignment(files, cls, attribute)
    return found.config_key("bias") if found else None


def _refused(projector: Any, what: str) -> ProjectorReading:
    where = source_location(type(projector).forward) or type(projector).__name__
    return ProjectorReading(
        None,
        (),
        (
            Delta(
                f"projector {type(projector).__name__} holds {what}",
                where,
                "onboard reads projectors made of linears, layer norms and activations so far",
            ),
        ),
    )
