"""Run the tiny VLM once on two images and a prompt with their placeholders, capturing what each
component received and returned: the readers decide by these values, the check compares with
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.analysis.vision.parts import VLMParts
from onboard.tiny_model import image_tokens

NUM_IMAGES = 2  # one per row: each row's features must land in that row
TEXT_AROUND = 3  # text tokens before and after each row's placeholders


@dataclass(frozen=True)
class VisionTrace:
    pixel_values: Any  # [images, channels, size, size]
    input_ids: Any  # [rows, seq]
    hidden_states: tuple[Any, ...]  # the tower's, index 0 = the encoder's input
    post_normed: Any | None  # the tower's post norm over the last hidden state
    projector_in: Any
    projector_out: Any
    merged: Any  # the embeddings the language model received
    text_embeddings: Any  # the language model's embeddings of input_ids, before the merge


def trace_vlm(model: Any, parts: VLMParts, hf_config: Any, post_norm: str | None) -> VisionTrace:
    import torch

    vision = hf_config.vision_config
    generator = torch.Generator().manual_seed(7)
    size = vision.image_size
    pixel_values = torch.randn(NUM_IMAGES, vision.num_channels, size, size, generator=generator)
    tower = parts.module(model, "tower")
    language_model = parts.module(model, "language_model")
    captured: dict[str, Any] = {}

    def keep_projector(_module: Any, args: tuple[Any, ...], output: Any) -> None:
        captured["projector_in"], captured["projector_out"] = args[0], output

    def keep_merged(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        captured["merged"] = kwargs.get("inputs_embeds")

    with torch.no_grad():
        states = tower(pixel_values, output_hidden_states=True).hidden_states
        post = tower.get_submodule(post_norm)(states[-1]) if post_norm else None
        per_image = image_tokens(model, pixel_values)
        input_ids = _prompt(hf_config, per_image)
        handles = [
            parts.module(model, "projector").register_forward_hook(keep_projector),
            language_model.register_forward_pre_hook(keep_merged, with_kwargs=True),
        ]
        try:
            model(input_ids=input_ids, pixel_values=pixel_values)
        finally:
            for handle in handles:
                handle.remove()
        text_embeddings = language_model.get_input_embeddings()(input_ids)
    return VisionTrace(
        pixel_values,
        input_ids,
        tuple(states),
        post,
        captured["projector_in"],
        captured["projector_out"],
        captured["merged"],
        text_embeddings,
    )


def _prompt(hf_config: Any, per_image: int) -> Any:
    """Row r: text, image r's placeholders, text, with different text in each row."""
    import torch

    image = hf_config.image_token_id
    vocab = hf_config.text_config.vocab_size
    rows = []
    for row in range(NUM_IMAGES):
        before = [(11 + 5 * row + i) % vocab for i in range(TEXT_AROUND)]
        after = [(37 + 3 * row + i) % vocab for i in range(TEXT_AROUND)]
        rows.append(before + [image] * per_image + after)
    return torch.tensor(rows)
