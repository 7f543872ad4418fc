"""A VLM whose patches enter through one linear, no encoder (Fuyu), for mobius: what the
generated vision encoder and its task need from ``LinearPatchTowerSpec``, and what they cannot
follow.

mobius registers ``fuyu`` to its generic ``LLaVAModel`` with the ``vision-language`` task
(``vision_bugs.linear_patch_defects``): a CLIP tower over ``pixel_values [batch, 3, S, S]`` and
a projector, where HF's model has neither and takes ``image_patches``. The generated module
keeps mobius' three graphs and replaces what goes into them: a ``vision_encoder`` that is the
patch linear alone over ``image_patches [patches, P * P * C]`` as the processor makes them (its
task class declares that input), the embedding that fills the placeholders over the whole batch,
and the text model on embeddings.
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.spec import ArchitectureSpec
from onboard.targets.mobius.settings import why
from onboard.vision import LinearPatchTowerSpec, VisionSpec

# What the generated docstring says of each layout
LAYOUT_WORDS = {
    "hwc": "row by row within the patch, then column, then channel (channel-last: value "
    "(row * patch_size + column) * channels + channel)",
    "chw": "channel by channel, then row, then column (channel-first: value "
    "(channel * patch_size + row) * patch_size + column)",
}


@dataclass(frozen=True)
class LinearPatchNames:
    """What the generated vision encoder keeps and says."""

    patch: str  # HF's attribute of the linear on the base model (vision_embed_tokens)
    bias: bool
    layout: str  # LAYOUT_WORDS' phrase for the spec's layout
    processor: str  # the image processor whose flattening that is
    width_key: str  # the composite key HF sizes the output by; "": the text's width


def linear_patch_names(vision: VisionSpec) -> LinearPatchNames | None:
    tower = vision.tower
    if not isinstance(tower, LinearPatchTowerSpec):
        return None
    return LinearPatchNames(
        patch=tower.name_of("patch"),
        bias=tower.patch_bias,
        layout=LAYOUT_WORDS[tower.layout],
        processor=tower.processor,
        width_key=dict(tower.keys).get("hidden_size", ""),
    )


def linear_patch_blockers(spec: ArchitectureSpec) -> list[str]:
    """What the generated encoder and task cannot follow around a linear patch embedding."""
    vision = spec.vision
    assert vision is not None
    tower = vision.tower
    assert isinstance(tower, LinearPatchTowerSpec)
    found = []
    if "." in tower.name_of("patch"):
        found.append(
            f"a patch linear nested in its base model ({tower.name_of('patch')}; "
            "vision.tower.names): the generated encoder holds it under one attribute"
        )
    if tower.hidden_size != spec.text.hidden_size:
        found.append(
            f"a patch linear {tower.hidden_size} wide into a text model {spec.text.hidden_size} "
            "wide (vision.tower.hidden_size): the features must fill the text's embeddings"
        )
    if vision.merge.token_blocks or vision.tiles or vision.image_rows or vision.deepstack:
        found.append(
            "a linear patch embedding beside token-type blocks, tiles, rows of images or "
            "DeepStack (vision): the generated task takes flattened patches and nothing else"
        )
    return found


def linear_patch_fields(vision: VisionSpec) -> list[tuple[str, str, str, str, str, bool]]:
    """The config fields the generated encoder reads: (name, annotation, default, expression,
    why, declared). mobius' ArchitectureConfig has ``patch_size`` and ``num_channels`` already
    (from the text config, which has neither): they are set from the composite config, not
    declared again."""
    tower = vision.tower
    assert isinstance(tower, LinearPatchTowerSpec)
    keys = dict(tower.keys)
    return [
        (
            "patch_size",
            "int",
            str(tower.patch_size),
            f"top.{keys['patch_size']}",
            "the side of the square patches the processor flattens",
            False,
        ),
        (
            "num_channels",
            "int",
            str(tower.num_channels),
            f"top.{keys['num_channels']}",
            "the channels of each flattened patch",
            False,
        ),
    ]


def linear_patch_changes(spec: ArchitectureSpec) -> tuple[str, ...]:
    vision = spec.vision
    assert vision is not None
    tower = vision.tower
    assert isinstance(tower, LinearPatchTowerSpec)
    names = linear_patch_names(vision)
    assert names is not None
    return (
        why(
            f"vision encoder: no tower, HF's {names.patch} alone, one linear "
            f"({'with' if tower.patch_bias else 'without'} bias) from each flattened patch "
            "straight into the text's width",
            spec,
            "vision.tower.names",
        ),
        why(
            f"images as image_patches [patches, patch_size x patch_size x channels], as "
            f"{names.processor} makes them: the patches of each image in reading order, image "
            f"after image, each patch's values {names.layout}",
            spec,
            "vision.tower.layout",
        ),
        "image features fill the placeholder tokens in reading order over the whole batch; the "
        "processor's image-newline tokens are text",
    )
