"""Build tiny HF models: randomly initialised, eager attention, every parameter perturbed.

Shared by the analysis (probe, spec check) and the parity reference. HF initialises norm weights
to 1 (0 for ``1 + w`` norms) and biases to 0, which hides a missing offset, a swapped norm or an
unmapped bias; perturbing every parameter makes such differences visible.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from onboard.errors import InvalidConfigError, UnsupportedFeatureError
from onboard.remote_idioms import build_remote, is_remote

PERTURB_STD = 0.05
# Tiny models hold well under a million values; this many means a size no shrink reached (a key
# onboard does not know, or a value it cannot lower), which would fill memory before any check.
TINY_VALUE_LIMIT = 50_000_000
# transformers warns when a recurrent mixer runs its PyTorch reference instead of a CUDA kernel
# (causal_conv1d, mamba_ssm, fla): on the tiny CPU models that reference is what onboard wants.
_KERNEL_FALLBACK_LOGGER = "transformers.integrations.hub_kernels"


def build_tiny_model(
    hf_config: Any, *, seed: int = 0, auto_class: str = "AutoModelForCausalLM"
) -> Any:
    """A float32, eager-attention HF model for ``hf_config`` (HF's own random init): a causal
    LM, or the model of another ``auto_class`` (AutoModelForImageTextToText for a VLM)."""
    import torch
    import transformers

    hf_config._attn_implementation = "eager"
    logging.getLogger(_KERNEL_FALLBACK_LOGGER).setLevel(logging.ERROR)
    from onboard.analysis.vision.backbone import causal_lm_from_config

    def build() -> Any:
        if auto_class == "AutoModelForCausalLM":
            return causal_lm_from_config(hf_config, attn_implementation="eager")
        return getattr(transformers, auto_class).from_config(hf_config, attn_implementation="eager")

    refuse_oversized(hf_config, build)
    torch.manual_seed(seed)  # after the meta build, so the weights are those of the seed alone
    if is_remote(hf_config):  # the checkpoint's own classes: 2024 habits repaired and noted
        return build_remote(build, hf_config).float().eval()
    try:
        model = build()
    except Exception as exc:  # transformers raises many types for inconsistent configs
        raise InvalidConfigError(
            f"transformers cannot build a tiny {hf_config.model_type} model from this config "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
        ) from None
    return model.float().eval()


def refuse_oversized(hf_config: Any, build: Callable[[], Any]) -> None:
    """Build on the meta device first (no memory) and refuse a tiny model that is not tiny,
    naming its largest tensor, rather than let it exhaust the machine."""
    import torch

    try:
        with torch.device("meta"):
            model = build()
    except Exception:  # a model that cannot be built on meta is sized by the real build
        return
    tensors = [*model.named_parameters(), *model.named_buffers()]
    total = sum(t.numel() for _, t in tensors)
    if total <= TINY_VALUE_LIMIT:
        return
    name, largest = max(tensors, key=lambda item: item[1].numel())
    raise UnsupportedFeatureError(
        f"the tiny {hf_config.model_type} model would hold {total:,} values (largest: {name} "
        f"{tuple(largest.shape)}): a size in config.json that onboard does not shrink"
    )


def image_tokens(
    model: Any,
    sizes: Sequence[tuple[int, int]],
    channels: int,
    *,
    dynamic: bool = False,
    rows: bool = False,
) -> list[int]:
    """How many placeholder tokens each image of ``sizes`` (pixel height, width) fills in a
    tiny VLM; ``dynamic``: the model takes ``image_sizes`` (Pixtral); ``rows``: it takes
    ``[rows, images, channels, height, width]`` and drops all-zero images (Idefics 3), so the
    probe image is ones."""
    import torch

    counts = []
    for height, width in sizes:
        shape = (1, channels, height, width)
        images = torch.ones(1, *shape) if rows else torch.zeros(*shape)
        sized = {"image_sizes": torch.tensor([[height, width]])} if dynamic else {}
        with torch.no_grad():
            features = image_features_method(model)(pixel_values=images, **sized).pooler_output
        counts.append(int(features[0].reshape(-1, features[0].shape[-1]).shape[0]))
    return counts


def image_features_method(model: Any) -> Any:
    """HF's ``get_image_features`` of a VLM (on the generation class, else on its base model,
    where DeepSeek-VL defines it only), called with ``pixel_values=`` whatever its keyword."""
    method = getattr(model, "get_image_features", None)
    method = method if method is not None else model.base_model.get_image_features
    keyword = pixels_keyword(model)
    if keyword == "pixel_values":
        return method
    return lambda pixel_values, **kwargs: method(**{keyword: pixel_values}, **kwargs)


def pixels_keyword(model: Any) -> str:
    """The keyword a VLM takes its images under: ``pixel_values``, or Video-LLaVA's
    ``pixel_values_images`` beside its videos'."""
    import inspect

    params = inspect.signature(model.forward).parameters
    if "pixel_values" in params:
        return "pixel_values"
    return next((name for name in params if name.startswith("pixel_values_image")), "pixel_values")


def image_features_of(output: Any) -> Any:
    """The image features in what ``get_image_features`` returns: its ``pooler_output`` (LLaVA's
    projected features), or its ``last_hidden_state`` where it sets no pooler output (Fuyu's
    patch embeddings, which are the features)."""
    pooled = getattr(output, "pooler_output", None)
    return pooled if pooled is not None else output.last_hidden_state


def takes_image_rows(model: Any, channels: int, size: int) -> bool:
    """Whether the VLM reads ``pixel_values`` as ``[rows, images per row, channels, height,
    width]`` (Idefics 3's ``get_image_features`` unpacks five dimensions): it fails on one image
    of four dimensions and runs on the same image as a row of one."""
    import torch

    image = torch.ones(1, channels, size, size)
    with torch.no_grad():
        try:
            image_features_method(model)(pixel_values=image)
        except (ValueError, RuntimeError, TypeError):
            pass
        else:
            return False
        try:
            image_features_method(model)(pixel_values=image[None])
        except (ValueError, RuntimeError, TypeError):
            return False
    return True


def takes_image_sizes(model: Any) -> bool:
    """Whether the VLM needs each image's size beside the pixels (Mistral 3's
    ``get_image_features(pixel_values, image_sizes)``)."""
    import inspect

    parameter = inspect.signature(image_features_method(model)).parameters.get("image_sizes")
    return parameter is not None and parameter.default is inspect.Parameter.empty


def perturb(model: Any, *, seed: int = 1) -> Any:
    """Add N(0, PERTURB_STD) noise to every parameter and every saved buffer, deterministically.

    Saved buffers include router correction biases (DeepSeek-V3's ``e_score_correction_bias``),
    which HF initialises to zero; RoPE tables are not saved and stay exact. A layout view's
    model's parameters outside the view come after (HRM's second stack and ``z_L_init``).
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    saved = set(model.state_dict())
    own = list(model.parameters())
    hidden = getattr(model, "hf", None)
    seen = {id(p) for p in own}
    outside = [p for p in hidden.parameters() if id(p) not in seen] if hidden is not None else []
    with torch.no_grad():
        for param in own + outside:
            param.add_(torch.randn(param.shape, generator=generator) * PERTURB_STD)
        for name, buffer in model.named_buffers():
            if name in saved and buffer.is_floating_point():
                buffer.add_(torch.randn(buffer.shape, generator=generator) * PERTURB_STD * 10)
    return model
