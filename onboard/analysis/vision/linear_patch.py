"""A VLM with no vision encoder: one linear over each flattened patch (Fuyu).

FuyuModel has no tower, no selection and no projector. Its processor cuts each image into a grid
of ``patch_size``-square patches and flattens each patch into one row of ``image_patches
[patches, patch_size * patch_size * num_channels]``, every image's patches one after another
(FuyuProcessor concatenates them; the model takes them so or as ``[batch, patches, ...]``);
``get_image_features`` runs one ``nn.Linear`` over those rows, straight into the text's width,
and the rows replace the image placeholders of the prompt in reading order (``masked_scatter``).
The image-newline token the processor puts after each row of patches is an ordinary text token.

What is read, from the tiny model: the one child of the base model that is neither the language
model nor anything without weights (``find_parts``), which must be a linear whose output on the
patches is what ``get_image_features`` returns; its sizes, through the composite config keys its
constructor reads; its bias; and how a patch's values are ordered, from the image processor's
own ``patchify_image`` run on an image whose every value is its index. ``check_linear_patch``
proves the layout against the processor, the features against ``get_image_features``, the merge
against what the language model receives, and the chain from the pixels.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from onboard.analysis.vision.parts import VLMParts, disk_prefixes, find_parts
from onboard.analysis.vision.steps import stage_deltas
from onboard.analysis.vision.trace import same_values, scaled_before_merge
from onboard.checkpoint import tensors
from onboard.source import transformers_source_files
from onboard.spec import Delta, Evidence
from onboard.tiny_model import image_features_method, image_features_of
from onboard.tiny_vision import image_token_key
from onboard.vision import (
    FeatureSelectSpec,
    LinearPatchTowerSpec,
    MergeSpec,
    ProjectorSpec,
    VisionSpec,
    VisionTowers,
)

Layout = Literal["hwc", "chw"]
LAYOUTS: tuple[Layout, ...] = ("hwc", "chw")
# Patch rows and columns of the two test images: sizes differ from image to image (the processor
# crops each to whole patches of its own size), and rows from columns
TEST_GRIDS = ((2, 3), (3, 2))
TEXT_AROUND = (3, 5)  # text tokens before the first row's placeholders (the rest after)
ROW_TEXT = 8  # text tokens per prompt row
NEWLINE = 5  # the text token standing for the processor's image-newline token
TOLERANCE = 1e-5  # fp32; the right spec matches to ~1e-7


@dataclass(frozen=True)
class PatchTrace:
    """The tiny VLM run once on two images' patches and a prompt with their placeholders."""

    pixels: tuple[Any, ...]  # each image [1, channels, height, width]
    image_patches: Any  # [patches, P * P * C]: the processor's, image after image
    input_ids: Any  # [rows, seq]: row r holds image r, each row of patches closed by NEWLINE
    features: Any  # get_image_features: [patches, hidden]
    merged: Any  # the embeddings the language model received
    text_embeddings: Any  # the language model's embeddings of input_ids, before the merge

    @property
    def image_inputs(self) -> dict[str, Any]:
        """What the VLM takes beside the prompt."""
        return {"image_patches": self.image_patches}


def image_processor(model_type: str) -> Any | None:
    """The model type's image processor class that flattens patches itself (``patchify_image``;
    its PIL backend first: torchvision is optional), or None."""
    import transformers
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES

    names = IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type)
    if isinstance(names, dict):
        candidates = [names.get("pil"), *names.values()]
    elif isinstance(names, list | tuple):
        candidates = list(names)
    else:
        candidates = [names]
    for name in candidates:
        found = getattr(transformers, name, None) if name else None
        if found is not None and callable(getattr(found, "patchify_image", None)):
            return found
    return None


def processor_patches(processor: Any, pixels: Sequence[Any], patch: int) -> Any:
    """Images ``[1, C, H, W]`` (whole patches a side) as the processor flattens them, every
    image's patches one after another: ``[patches, P * P * C]`` (FuyuProcessor's
    ``torch.cat`` over the images)."""
    import torch
    from transformers.image_processing_utils import SizeDict

    size = SizeDict(height=patch, width=patch)
    flat = [torch.as_tensor(processor().patchify_image(p, patch_size=size)) for p in pixels]
    return torch.cat([f.reshape(-1, f.shape[-1]) for f in flat])


def flatten_patches(pixels: Sequence[Any], patch: int, layout: str) -> Any:
    """The spec's flattening of images ``[1, C, H, W]``: ``[patches, P * P * C]``, each image's
    patches in reading order over its grid, image after image, each patch's values ordered by
    ``layout``."""
    import torch

    flat = []
    for image in pixels:
        _, channels, height, width = image.shape
        rows, columns = height // patch, width // patch
        grid = image.reshape(channels, rows, patch, columns, patch)
        order = (1, 3, 2, 4, 0) if layout == "hwc" else (1, 3, 0, 2, 4)
        flat.append(grid.permute(*order).reshape(rows * columns, -1))
    return torch.cat(flat)


def read_layout(processor: Any, patch: int, channels: int) -> Layout | None:
    """How the processor orders a patch's values, told by an image whose values are their
    indices; None when no layout gives its patches."""
    import torch

    rows, columns = TEST_GRIDS[0]
    shape = (1, channels, rows * patch, columns * patch)
    image = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32).reshape(shape)
    made = processor_patches(processor, [image], patch)
    for layout in LAYOUTS:
        if torch.equal(flatten_patches([image], patch, layout), made):
            return layout
    return None


def prompt_rows(
    grids: Sequence[tuple[int, int]], image_token: int, text: Callable[[int, int], list[int]]
) -> list[list[int]]:
    """Row r: text, image r's placeholders as the processor lays them out (a row of its patch
    grid's columns, each row closed by the ``NEWLINE`` text token), text; ``text(row, count)``
    gives a row's text tokens. Every row is as long as the longest."""
    images = [[*[image_token] * columns, NEWLINE] * rows for rows, columns in grids]
    longest = max(len(image) for image in images)
    prompt = []
    for row, image in enumerate(images):
        words = text(row, ROW_TEXT + longest - len(image))
        before = TEXT_AROUND[row % len(TEXT_AROUND)]
        prompt.append([*words[:before], *image, *words[before:]])
    return prompt


def sample_images(channels: int, patch: int, generator: Any) -> tuple[Any, ...]:
    """The two test images, ``[1, C, H, W]`` each, of ``TEST_GRIDS`` whole patches."""
    import torch

    return tuple(
        torch.randn(1, channels, rows * patch, columns * patch, generator=generator)
        for rows, columns in TEST_GRIDS
    )


def trace_patches(model: Any, parts: VLMParts, config: Any, processor: Any) -> PatchTrace:
    """Two random images of different patch grids, flattened by the processor, through the tiny
    VLM: its features, and what its language model received for a prompt holding them."""
    import torch

    generator = torch.Generator().manual_seed(7)
    pixels = sample_images(config.num_channels, config.patch_size, generator)
    patches = processor_patches(processor, pixels, config.patch_size)
    vocab = config.text_config.vocab_size

    def text(row: int, count: int) -> list[int]:
        return [(11 + 7 * row + 3 * i) % (vocab - 2) + 1 for i in range(count)]

    input_ids = torch.tensor(prompt_rows(TEST_GRIDS, config.image_token_id, text))
    language_model = parts.module(model, "language_model")
    captured: dict[str, Any] = {}

    def keep(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        captured["merged"] = kwargs.get("inputs_embeds")

    with torch.no_grad():
        features = image_features_of(image_features_method(model)(pixel_values=patches))
        handle = language_model.register_forward_pre_hook(keep, with_kwargs=True)
        try:
            model(input_ids=input_ids, image_patches=patches)
        finally:
            handle.remove()
        text_embeddings = language_model.get_input_embeddings()(input_ids)
    return PatchTrace(pixels, patches, input_ids, features, captured["merged"], text_embeddings)


Read = tuple[VisionSpec | None, tuple[tuple[str, tuple[Evidence, ...]], ...], tuple[Delta, ...]]


def read_linear_patch_vision(model: Any, config: Any) -> Read:
    """The vision spec of a tiny VLM whose patches enter through one linear (tiny sizes: the
    check runs it on that model), with its evidence, or None and the deltas that say what is
    not read."""
    import torch

    from onboard.analysis.probe import source_location
    from onboard.analysis.vision.token_blocks import read_token_blocks

    parts = find_parts(model, config)
    base = model.base_model
    embed = parts.module(model, "tower")
    at = source_location(type(base).get_image_features) or f"{type(base).__name__}"
    width = config.patch_size**2 * config.num_channels
    if not isinstance(embed, torch.nn.Linear) or embed.in_features != width:
        return None, (), (_not_one_linear(base, parts.tower, embed, width, at),)
    processor = image_processor(config.model_type)
    layout = read_layout(processor, config.patch_size, config.num_channels) if processor else None
    if layout is None:
        return None, (), (_layout_unread(config.model_type, processor),)
    try:
        trace = trace_patches(model, parts, config, processor)
    except Exception as exc:  # the model wants inputs flattened patches do not give
        return None, (), (_did_not_run(base, at, exc),)
    with torch.no_grad():
        alone = embed(trace.image_patches)
    if not same_values(alone, trace.features):
        return None, (), (_not_one_linear(base, parts.tower, embed, width, at),)
    files = transformers_source_files(config.model_type)
    built, keys = _constructor_keys(files, type(base).__name__, parts.tower, config, embed)
    language_model = parts.module(model, "language_model")
    blocks = read_token_blocks(model, language_model, config, trace)
    key = image_token_key(config)
    spec = LinearPatchTowerSpec(
        hidden_size=embed.out_features,
        patch_size=config.patch_size,
        num_channels=config.num_channels,
        patch_bias=embed.bias is not None,
        layout=layout,
        names=(("patch", parts.tower),),
        keys=keys,
        processor=processor.__name__,
    )
    saved = tensors(model)
    prefixes = disk_prefixes(model, parts, saved)
    tower_prefix = dict(prefixes)["tower"]
    vision = VisionSpec(
        towers=VisionTowers(linear_patch=spec),
        select=FeatureSelectSpec(layers=(0,), drop_class_token=False, post_norm=False),
        projector=ProjectorSpec(name="", steps=()),
        merge=MergeSpec(
            image_token_id=config.image_token_id,
            image_token_key=key,
            scaled_before_merge=scaled_before_merge(language_model, trace),
            token_blocks=blocks.rule,
        ),
        prefixes=prefixes,
        text_model_type=config.text_config.model_type,
        tensors=tuple(
            sorted((n, tuple(t.shape)) for n, t in saved.items() if n.startswith(tower_prefix))
        ),
    )
    patchify = source_location(processor.patchify_image) or f"{processor.__name__}.patchify_image"
    order = {
        "hwc": "row, column, channel (channel-last)",
        "chw": "channel, row, column (channel-first)",
    }[layout]
    evidence = (
        (
            "vision.tower.names",
            (
                *((built,) if built else ()),
                Evidence(
                    "probe",
                    at,
                    f"get_image_features is {parts.tower} alone: image_patches [patches, {width}] "
                    f"-> [patches, {embed.out_features}], no encoder",
                ),
            ),
        ),
        (
            "vision.tower.layout",
            (
                Evidence(
                    "probe",
                    patchify,
                    f"{processor.__name__}.patchify_image flattens each patch {order}, the "
                    "patches in reading order over the image's grid",
                ),
            ),
        ),
        (
            "vision.merge.image_token_id",
            (Evidence("config", f"config.json:{key}", "image placeholder token"),),
        ),
        (
            "vision.merge.token_blocks",
            blocks.evidence or (Evidence("probe", "token_type_ids", "the mask stays causal"),),
        ),
    )
    deltas = (blocks.delta,) if blocks.delta else ()
    checked = check_linear_patch(vision, model, parts, trace, processor)
    return vision, evidence, deltas + checked


_CONFIG_ATTR = re.compile(r"config\.(\w+)")


def _constructor_keys(
    files: Any, owner: str, attribute: str, config: Any, embed: Any
) -> tuple[Evidence | None, tuple[tuple[str, str], ...]]:
    """The composite config keys of the linear's sizes: the patch's (whose product the reader
    has matched to its input width) and the output width's, as its constructor reads it
    (``nn.Linear(..., config.hidden_size)``) where the tiny config's value is the width built,
    else ``hidden_size`` where that is the width, else "" (the text's width)."""
    import ast

    from onboard.analysis.source_lines import init_assignment

    found = init_assignment(files, owner, attribute)
    call = found.value if found is not None else None
    args = [ast.unparse(a) for a in call.args] if isinstance(call, ast.Call) else []
    out = _CONFIG_ATTR.fullmatch(args[1].strip()) if len(args) >= 2 else None
    width = out.group(1) if out else "hidden_size"
    if getattr(config, width, None) != embed.out_features:
        width = ""
    keys = (("patch_size", "patch_size"), ("num_channels", "num_channels"), ("hidden_size", width))
    return (found.evidence if found else None), keys


def linear_patch_at_real_sizes(vision: VisionSpec, real: Any) -> VisionSpec:
    """The spec at the real config's sizes: the width through the key the constructor reads
    (the text's when none), the patch through its keys, the real placeholder."""
    tower = vision.towers.linear_patch
    assert tower is not None
    keys = dict(tower.keys)
    width = getattr(real, keys["hidden_size"]) if keys["hidden_size"] else None
    tower = dataclasses.replace(
        tower,
        hidden_size=int(width or real.text_config.hidden_size),
        patch_size=int(getattr(real, keys["patch_size"])),
        num_channels=int(getattr(real, keys["num_channels"])),
    )
    return dataclasses.replace(
        vision,
        towers=VisionTowers(linear_patch=tower),
        merge=dataclasses.replace(vision.merge, image_token_id=int(real.image_token_id)),
    )


@dataclass(frozen=True)
class _Stage:
    what: str  # the part HF computes it with
    where: str  # its source line
    compute: Callable[[], Any]
    expected: Any
    detail: str


def check_linear_patch(
    vision: VisionSpec, model: Any, parts: VLMParts, trace: PatchTrace, processor: Any
) -> tuple[Delta, ...]:
    """The spec against the tiny model, stage by stage: the processor's flattening, the
    features, the merge, and the chain from the pixels."""
    import torch.nn.functional as F

    from onboard.analysis.probe import source_location
    from onboard.analysis.vision.check import merge

    tower = vision.towers.linear_patch
    assert tower is not None
    weights = dict(parts.module(model, "tower").named_parameters())
    base = type(model.base_model)

    def flatten(pixels: Any) -> Any:
        return flatten_patches(pixels, tower.patch_size, tower.layout)

    def embed(patches: Any) -> Any:
        return F.linear(patches, weights["weight"], weights["bias"] if tower.patch_bias else None)

    def merged(features: Any) -> Any:
        return merge(vision, trace.text_embeddings, trace.input_ids, features)

    def line(function: Any, fallback: str) -> str:
        return source_location(function) or fallback

    stages = (
        _Stage(
            f"{processor.__name__}.patchify_image",
            line(processor.patchify_image, processor.__name__),
            lambda: flatten(trace.pixels),
            trace.image_patches,
            "the patch layout (vision.tower.layout)",
        ),
        _Stage(
            f"{base.__name__}.{parts.tower}",
            line(base.get_image_features, base.__name__),
            lambda: embed(trace.image_patches),
            trace.features,
            "the image features",
        ),
        _Stage(
            f"{base.__name__}'s merge",
            line(base.get_placeholder_mask, base.__name__),
            lambda: merged(trace.features),
            trace.merged,
            "the merged embeddings",
        ),
        _Stage(
            f"{base.__name__}, from the pixels",
            line(base.forward, base.__name__),
            lambda: merged(embed(flatten(trace.pixels))),
            trace.merged,
            "the merged embeddings from the pixels, through the processor's flattening",
        ),
    )
    return stage_deltas(
        stages,
        _difference,
        lambda stage, detail: Delta(
            f"{stage.what} computes something the vision spec does not describe",
            stage.where,
            f"{stage.detail}: {detail}",
        ),
    )


def _difference(got: Any, expected: Any) -> str | None:
    if got.shape != expected.shape:
        return f"shape {tuple(got.shape)} against HF's {tuple(expected.shape)}"
    worst = float((got - expected).abs().max())
    return f"max abs {worst:.2g}" if worst > TOLERANCE else None


def _not_one_linear(base: Any, attribute: str, embed: Any, width: int, at: str) -> Delta:
    return Delta(
        f"{type(base).__name__} has no vision_config and its {attribute} "
        f"({type(embed).__name__}) is not one linear over flattened patches of {width} values "
        "whose output get_image_features returns",
        at,
        "onboard reads VLMs without vision_config whose patches enter through one nn.Linear "
        "(Fuyu) so far",
    )


def _layout_unread(model_type: str, processor: Any) -> Delta:
    name = processor.__name__ if processor is not None else "no image processor"
    return Delta(
        f"the order of a flattened patch's values is not read ({name})",
        f"{model_type}'s image processor",
        "onboard reads the patch layout from the processor's own patchify_image, channel-last "
        "(row, column, channel) or channel-first",
    )


def _did_not_run(base: Any, at: str, exc: Exception) -> Delta:
    return Delta(
        f"{type(base).__name__} does not run on image_patches [patches, values] with their "
        "placeholders in the prompt",
        at,
        f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
    )
