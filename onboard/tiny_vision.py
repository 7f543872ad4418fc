"""Shrink a vision-language config: the text side as ``tiny.shrink_config`` shrinks it, the tower
to a narrow one that keeps its depth, its patch size and its structure.

The tower keeps every layer: the feature layer (``vision_feature_layer = -2``) indexes them, and
a shallower tower would select a different one. Narrow layers of a 16-patch image cost little.
A VLM with no tower (Fuyu: one linear over flattened patches, no ``vision_config``) keeps its
patch as it is; the composite keys that restate the text's take the tiny text's values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from onboard.errors import InvalidConfigError, UnsupportedFeatureError
from onboard.tiny import is_negative_id
from onboard.tiny_generation import shrink_generation_configs
from onboard.tiny_tiles import pinpoints_key, shrink_pinpoints

TINY_VISION_HIDDEN = 32
TINY_VISION_HEADS = 4
TINY_VISION_INTERMEDIATE = 64
TINY_PATCHES_PER_SIDE = 4  # 16 patches: 16 image tokens per image
# The tiny tower keeps every real layer, so a tower deeper than any published one is refused
MAX_TOWER_LAYERS = 64
# Image tokens per image, where the projector pools patches down to a count (Gemma 3): a 2 x 2
# grid pooled from the 4 x 4 patches
TOKENS_PER_IMAGE_KEYS = ("mm_tokens_per_image",)
TINY_TOKENS_PER_IMAGE = 4
# Config keys of a projector's space-to-depth factor (Idefics 3's and Aya Vision's pixel
# shuffle): the tiny patch grid is two blocks a side, so the shuffle keeps 2 x 2 tokens
PIXEL_SHUFFLE_KEYS = ("scale_factor", "downsample_factor")
# Keys that give the same factor as its inverse (InternVL's downsample_ratio 0.5: 2 x 2 blocks)
PIXEL_SHUFFLE_RATIO_KEYS = ("downsample_ratio",)
# Tower widths that are the text's width (PaliGemma projects to vision_config.projection_dim)
_TEXT_WIDTH_KEYS = ("projection_dim", "out_hidden_size")
# A perceiver resampler's sub-config (Idefics 2's connector) and its tiny sizes: latents other
# than the tiny patch count, grouped-query heads (2 queries a key/value head) whose head width is
# not the hidden size over the heads, so each size shows where it is read from; the depth stays
# the real one (a few layers, cheap)
PERCEIVER_KEY = "perceiver_config"
TINY_PERCEIVER = {
    "resampler_n_latents": 5,
    "resampler_n_heads": 4,
    "num_key_value_heads": 2,
    "resampler_head_dim": 12,
}


def shrink_vlm_config(
    config: Mapping[str, Any], tiny_text: Mapping[str, Any], hf_config: Any
) -> dict[str, Any]:
    """A tiny config.json dict for the VLM ``config`` whose text side is ``tiny_text``.

    The image token moves into the tiny vocabulary, on an id no other special token uses.
    """
    _check_qwen_vl_tower(hf_config)
    tiny = copy.deepcopy(dict(config))
    if "text_config" not in config:  # a flat config (Qwen2.5-VL's): its text keys are the text's
        tiny.update({k: v for k, v in tiny_text.items() if k in config and k != "model_type"})
    tiny["text_config"] = dict(tiny_text)
    if is_linear_patch_config(hf_config):
        if "text_config" in config:
            _restate_text_keys(tiny, config, tiny_text)
    else:
        _shrink_tower(tiny, config, tiny_text, hf_config)
    vocab = int(tiny_text["vocab_size"])
    if "vocab_size" in tiny:
        tiny["vocab_size"] = vocab
    taken = {v for k, v in tiny_text.items() if k.endswith("token_id") and isinstance(v, int)}
    if isinstance(tiny.get("pad_token_id"), int) and tiny["pad_token_id"] >= vocab:
        tiny["pad_token_id"] = tiny_text.get("pad_token_id", 0)
    for key in [k for k, v in tiny.items() if k.endswith("token_id") and is_negative_id(v)]:
        del tiny[key]  # none, as in tiny.py: transformers will not save a model holding one
    key = image_token_key(hf_config)
    tiny[key] = next(i for i in range(vocab - 1, 0, -1) if i not in taken)
    shrink_generation_configs(tiny, hf_config, tiny_text)
    return tiny


def _shrink_tower(
    tiny: dict[str, Any], config: Mapping[str, Any], tiny_text: Mapping[str, Any], hf_config: Any
) -> None:
    """The tiny tower (``vision_config``) and the composite keys sized by it, in place."""
    tiny["vision_config"] = shrink_vision_config(config.get("vision_config") or {}, hf_config)
    if getattr(hf_config, PERCEIVER_KEY, None) is not None:
        tiny[PERCEIVER_KEY] = _shrink_perceiver(getattr(hf_config, PERCEIVER_KEY), tiny_text)
    if "embed_dim" in tiny["vision_config"] and is_qwen_vl_tower(hf_config.vision_config):
        # Qwen2-VL's vision hidden_size is the merger's output: the text's width
        tiny["vision_config"]["hidden_size"] = tiny_text["hidden_size"]
    text_width = hf_config.text_config.hidden_size
    for key in _TEXT_WIDTH_KEYS:
        if getattr(hf_config.vision_config, key, None) == text_width:
            tiny["vision_config"][key] = tiny_text["hidden_size"]
        if key in tiny and tiny[key] == text_width:  # PaliGemma restates it at the top
            tiny[key] = tiny_text["hidden_size"]
    for key in TOKENS_PER_IMAGE_KEYS:
        if getattr(hf_config, key, None):
            tiny[key] = TINY_TOKENS_PER_IMAGE
    factor = pixel_shuffle_factor(hf_config)
    if factor:  # two blocks of the pixel shuffle a side
        side = square_side(hf_config.vision_config.patch_size, "patch_size") * 2 * factor
        tiny["vision_config"]["image_size"] = _sized_as(hf_config.vision_config.image_size, side)
    if pinpoints_key(hf_config):  # tiles of any resolution: the grids in the tiny tiles
        shrink_pinpoints(tiny, hf_config, tiny["vision_config"]["image_size"])
    if getattr(hf_config, "spatial_merge_size", None):  # images of any size up to image_size
        sides = [side for size in dynamic_image_sizes(hf_config) for side in size]
        tiny["vision_config"]["image_size"] = max(sides)


# The composite config's own keys of a VLM whose patches enter through one linear, with no
# vision_config (Fuyu's): the patch side and the channels of a flattened patch
LINEAR_PATCH_KEYS = ("patch_size", "num_channels")


def is_linear_patch_config(hf_config: Any) -> bool:
    """A VLM config without ``vision_config`` whose patch size and channels are the composite's
    own keys (Fuyu's): its images may enter as flattened patches through no encoder (the
    reader decides by what ``get_image_features`` runs)."""
    return (
        getattr(hf_config, "vision_config", None) is None
        and getattr(hf_config, "text_config", None) is not None
        and all(isinstance(getattr(hf_config, k, None), int) for k in LINEAR_PATCH_KEYS)
    )


def _restate_text_keys(
    tiny: dict[str, Any], config: Mapping[str, Any], tiny_text: Mapping[str, Any]
) -> None:
    """Composite keys that restate the text config's value take the tiny text's (Fuyu's config
    repeats the text keys at its top, and its patch linear writes the composite's
    ``hidden_size``); the patch keys stay real: a patch is a handful of values wide."""
    text = config["text_config"]
    for key, value in tiny_text.items():
        if key != "model_type" and key in config and config[key] == text.get(key):
            tiny[key] = value


def _shrink_perceiver(perceiver: Any, tiny_text: Mapping[str, Any]) -> dict[str, Any]:
    """The perceiver as HF built it from the real config (a perceiver of another width than the
    text's is reset to the text's width and epsilon, with a warning, before the tiny one is
    read) at the tiny text's width and ``TINY_PERCEIVER``'s sizes."""
    return {**perceiver.to_dict(), **TINY_PERCEIVER, "hidden_size": tiny_text["hidden_size"]}


_VIT_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "patch_size", "image_size")


def shrink_vision_config(vision: Mapping[str, Any], hf_config: Any) -> dict[str, Any]:
    tiny = dict(vision)
    real = hf_config.vision_config
    if is_qwen_vl_tower(real):
        return _shrink_qwen_vl(tiny, hf_config)
    missing = [
        k
        for k in _VIT_KEYS
        if not isinstance(getattr(real, k, None), int) and not _square_pair(getattr(real, k, None))
    ]
    if not missing and not 0 < real.num_hidden_layers <= MAX_TOWER_LAYERS:
        raise UnsupportedFeatureError(
            f"{hf_config.model_type}'s vision tower has {real.num_hidden_layers} layers: the tiny "
            f"model keeps every tower layer, and onboard reads towers of 1 to "
            f"{MAX_TOWER_LAYERS} layers"
        )
    if missing:
        raise UnsupportedFeatureError(
            f"{hf_config.model_type}'s vision tower config {type(real).__name__} has no "
            f"{', '.join(missing)}: onboard reads ViT towers sized by "
            f"{', '.join(_VIT_KEYS)} so far"
        )
    patch_grid_side(real)  # square images and patches only
    if hasattr(real, "intermediate_size"):  # else a ratio of the width (Janus' mlp_ratio)
        tiny["intermediate_size"] = TINY_VISION_INTERMEDIATE
    tiny.update(
        hidden_size=TINY_VISION_HIDDEN,
        num_attention_heads=TINY_VISION_HEADS,
        image_size=_sized_as(
            real.image_size, square_side(real.patch_size, "patch_size") * TINY_PATCHES_PER_SIDE
        ),
        num_hidden_layers=real.num_hidden_layers,
    )
    if "head_dim" in tiny:  # Pixtral's RoPE reads it; its attention splits hidden_size
        tiny["head_dim"] = TINY_VISION_HIDDEN // TINY_VISION_HEADS
    if "model_type" not in tiny:
        tiny["model_type"] = real.model_type
    return tiny


def _square_pair(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int) for v in value)
    )


def square_side(value: Any, key: str) -> int:
    """A tower size given as one integer or as a (height, width) pair (InternVL's): a square's
    side. Non-square images are refused: the tiny model and the generated tower are square."""
    if isinstance(value, int):
        return value
    if _square_pair(value) and value[0] == value[1]:
        return int(value[0])
    raise UnsupportedFeatureError(
        f"vision_config.{key} {value!r:.40} is not square: onboard reads towers of square "
        "images and patches, sized by one integer or a (height, width) pair of equal sides"
    )


def patch_grid_side(vision: Any) -> int:
    """Patches a side of the tower's (square) image."""
    return square_side(vision.image_size, "image_size") // square_side(
        vision.patch_size, "patch_size"
    )


def pixel_shuffle_factor(hf_config: Any) -> int | None:
    """The side of the patch blocks a projector's pixel shuffle folds, from a factor key or the
    inverse of a ratio key; None where the config has neither."""
    for key in PIXEL_SHUFFLE_KEYS:
        factor = getattr(hf_config, key, None)
        if isinstance(factor, int) and factor > 0:
            return factor
    for key in PIXEL_SHUFFLE_RATIO_KEYS:
        ratio = getattr(hf_config, key, None)
        if isinstance(ratio, float | int) and 0 < ratio < 1 and (1 / ratio).is_integer():
            return int(1 / ratio)
    return None


def _sized_as(real: Any, side: int) -> Any:
    """``side`` in the form the real config gives that size: an integer or a pair."""
    return [side, side] if isinstance(real, list | tuple) else side


def dynamic_image_sizes(hf_config: Any) -> list[tuple[int, int]]:
    """Two images of different sizes for a tower of dynamic size (Pixtral), in pixels: a wide
    one and a square one, each side a whole number of merged blocks (``spatial_merge_size``
    patches), so a merge that mixes up rows and columns shows."""
    vision = hf_config.vision_config
    block = vision.patch_size * int(getattr(hf_config, "spatial_merge_size", 1) or 1)
    return [(2 * block, 3 * block), (2 * block, 2 * block)]


def image_token_key(hf_config: Any) -> str:
    """The config.json key of the image placeholder token: HF code reads ``image_token_id``,
    which LLaVA's config class aliases to ``image_token_index``."""
    return dict(getattr(type(hf_config), "attribute_map", {})).get(
        "image_token_id", "image_token_id"
    )


# Qwen-VL towers: sized by depth and num_heads, images of any size given by image_grid_thw
_QWEN_VL_KEYS = ("depth", "num_heads", "patch_size", "temporal_patch_size", "spatial_merge_size")
TINY_QWEN_VL_DEPTH = 4
TINY_WINDOW_BLOCKS = 2  # merge blocks per window side: the test images span several windows


def _check_qwen_vl_tower(hf_config: Any) -> None:
    """A Qwen-VL tower's sizes are positive, and its merger writes its image features into the
    text's embeddings, so its output width is the text's width: the tiny tower is shrunk on
    both assumptions."""
    real = getattr(hf_config, "vision_config", None)
    if not is_qwen_vl_tower(real):
        return
    for size in _QWEN_VL_KEYS:  # the tiny tower cuts its images by these
        if getattr(real, size) <= 0:
            raise InvalidConfigError(
                f"config.json: vision_config.{size} must be positive, got {getattr(real, size)}"
            )
    key = "out_hidden_size" if hasattr(real, "out_hidden_size") else "hidden_size"
    width, text_width = getattr(real, key, None), hf_config.text_config.hidden_size
    if width != text_width:
        raise InvalidConfigError(
            f"config.json: vision_config.{key} ({width!r:.40}) is not the text's hidden_size "
            f"({text_width}): the vision merger's features would not fit the text embeddings"
        )


def is_qwen_vl_tower(vision: Any) -> bool:
    """A tower config in Qwen-VL's vocabulary (depth, num_heads, temporal_patch_size)."""
    return all(isinstance(getattr(vision, k, None), int) for k in _QWEN_VL_KEYS)


def _tiny_deepstack(hf_config: Any, layers: list[int]) -> dict[str, Any]:
    """As many DeepStack layers as the real tower has, every one inside the tiny tower and
    before its last layer (whose output is the main merger's), in the real order: the k-th
    feeds text layer k, so the count is what the tiny model must keep."""
    if (
        sorted(set(layers)) != layers
        or layers[0] < 0
        or layers[-1] >= hf_config.vision_config.depth
    ):
        raise InvalidConfigError(
            f"config.json: vision_config.deepstack_visual_indexes {layers} are not increasing "
            f"tower layers below depth {hf_config.vision_config.depth}"
        )
    depth = max(TINY_QWEN_VL_DEPTH, len(layers) + 1)
    return {
        "depth": depth,
        "deepstack_visual_indexes": list(range(depth - 1 - len(layers), depth - 1)),
    }


def _shrink_qwen_vl(tiny: dict[str, Any], hf_config: Any) -> dict[str, Any]:
    """A narrow Qwen-VL tower that keeps both layer kinds: 4 layers, full attention on a period
    of at most 2 where the real tower has one (every 8th of 32 -> every 2nd of 4), windows of
    2 x 2 merge blocks, so the test images span several windows, some cut short."""
    real = hf_config.vision_config
    full = sorted(int(i) for i in (getattr(real, "fullatt_block_indexes", None) or ()))
    period = real.depth // len(full) if full else 0
    if full and full != [period * (k + 1) - 1 for k in range(len(full))]:
        raise UnsupportedFeatureError(
            f"{hf_config.model_type}'s full-attention tower layers "
            f"(vision_config.fullatt_block_indexes {full}) are not every {period}th of "
            f"{real.depth}: the tiny tower keeps a period, not a list"
        )
    tiny_period = min(period, 2)
    tiny.update(depth=TINY_QWEN_VL_DEPTH, num_heads=TINY_VISION_HEADS)
    if getattr(real, "embed_dim", None):  # Qwen2-VL: embed_dim wide, hidden_size the text's
        tiny["embed_dim"] = TINY_VISION_HIDDEN
    else:
        tiny.update(hidden_size=TINY_VISION_HIDDEN, intermediate_size=TINY_VISION_INTERMEDIATE)
    if "fullatt_block_indexes" in tiny or full:
        tiny["fullatt_block_indexes"] = [
            i for i in range(TINY_QWEN_VL_DEPTH) if tiny_period and (i + 1) % tiny_period == 0
        ]
    if getattr(real, "window_size", None):
        tiny["window_size"] = TINY_WINDOW_BLOCKS * real.spatial_merge_size * real.patch_size
    if isinstance(getattr(real, "image_size", None), int) and "num_position_embeddings" not in tiny:
        # GLM-4V's learned positions: (image_size / patch_size) ** 2, resampled to each grid; a
        # small table makes every test image larger than it, so its border is read too
        tiny["image_size"] = real.patch_size * TINY_PATCHES_PER_SIDE
    deepstack = getattr(real, "deepstack_visual_indexes", None) or ()
    if deepstack:
        tiny.update(_tiny_deepstack(hf_config, list(deepstack)))
    tiny.pop("num_hidden_layers", None)
    if "model_type" not in tiny:
        tiny["model_type"] = real.model_type
    return tiny
