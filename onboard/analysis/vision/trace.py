"""Run the tiny VLM once on two images and a prompt with their placeholders, capturing what each
component received and returned: the readers decide by these values, the check compares with
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.analysis.vision.parts import VLMParts
from onboard.tiny_model import image_features_method, pixels_keyword
from onboard.tiny_vision import dynamic_image_sizes, square_side
from onboard.vision import TileGridSpec

NUM_IMAGES = 2  # one per row: each row's features must land in that row
# How close a reading's value must come to a captured one to be the model's own
MATCH = 1e-6
TEXT_AROUND = 3  # text tokens before and after each row's placeholders


@dataclass(frozen=True)
class VisionTrace:
    pixel_values: Any  # [images, channels, height, width]
    input_ids: Any  # [rows, seq]
    hidden_states: tuple[Any, ...]  # the tower's, index 0 = the encoder's input
    post_normed: Any | None  # the tower's post norm over the last hidden state
    projector_in: Any
    projector_out: Any
    merged: Any  # the embeddings the language model received
    text_embeddings: Any  # the language model's embeddings of input_ids, before the merge
    # [images, 2] pixel heights and widths, for towers of dynamic size (Pixtral); None: every
    # image fills pixel_values
    image_sizes: Any = None
    projector_extra: tuple[Any, ...] = ()  # what the projector took after the features
    rows: bool = False  # the VLM takes [rows, images per row, ...]: image r alone in row r
    # Tiles of any resolution (LLaVA-NeXT): pixel_values above are every image's tiles, image
    # after image; the VLM took them as [images, tiles, ...] padded with zero tiles, with
    # image_sizes the original sizes. packed: get_image_features' output, image after image
    tile_pixels: Any = None
    packed: Any = None

    @property
    def image_inputs(self) -> dict[str, Any]:
        """What the VLM takes beside the prompt: the pixels and, if any, the image sizes."""
        pixels = self.pixel_values[:, None] if self.rows else self.pixel_values
        if self.tile_pixels is not None:
            pixels = self.tile_pixels
        found = {"pixel_values": pixels}
        if self.image_sizes is not None:
            found["image_sizes"] = self.image_sizes
        return found


def trace_vlm(
    model: Any,
    parts: VLMParts,
    hf_config: Any,
    post_norm: str | None,
    dynamic: bool = False,
    rows: bool = False,
    tiles: TileGridSpec | None = None,
) -> VisionTrace:
    """``dynamic``: the tower takes images of any size (Pixtral): the two images differ in
    size, padded into one pixel tensor, and ``image_sizes`` says each one's. ``rows``: the VLM
    takes ``[rows, images per row, ...]`` (Idefics 3): each image is a row of its own.
    ``tiles``: the VLM takes tiles of any resolution with the images' original sizes
    (LLaVA-NeXT), laid out as this spec says (``tile_inputs``)."""
    import torch

    vision = hf_config.vision_config
    generator = torch.Generator().manual_seed(7)
    tile_pixels = None
    if tiles is not None:
        tile_pixels, pixel_values, image_sizes = tile_inputs(tiles, vision, generator)
    elif dynamic:
        sizes = dynamic_image_sizes(hf_config)
        height, width = max(h for h, _ in sizes), max(w for _, w in sizes)
        image_sizes = torch.tensor(sizes)
    else:
        height = width = square_side(vision.image_size, "image_size")
        image_sizes = None
    if tiles is None:
        shape = (NUM_IMAGES, vision.num_channels, height, width)
        pixel_values = torch.randn(*shape, generator=generator)
    sized = {} if image_sizes is None else {"image_sizes": image_sizes}
    model_pixels = pixel_values[:, None] if rows else pixel_values
    if tile_pixels is not None:
        model_pixels = tile_pixels
    tower = parts.module(model, "tower")
    language_model = parts.module(model, "language_model")
    captured: dict[str, Any] = {}

    def keep_projector(
        _module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> None:
        captured["projector_in"], captured["projector_out"] = args[0], output
        captured["projector_extra"] = (*args[1:], *kwargs.values())

    def keep_merged(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        captured["merged"] = kwargs.get("inputs_embeds")

    with torch.no_grad():
        tower_sized = {} if tiles is not None else sized  # the tower takes tiles alone
        states = tower(pixel_values, output_hidden_states=True, **tower_sized).hidden_states
        post = tower.get_submodule(post_norm)(states[-1]) if post_norm else None
        features = image_features_method(model)(pixel_values=model_pixels, **sized)
        features = features.pooler_output
        input_ids = _prompt(hf_config, [int(f.reshape(-1, f.shape[-1]).shape[0]) for f in features])
        handles = [
            parts.module(model, "projector").register_forward_hook(
                keep_projector, with_kwargs=True
            ),
            language_model.register_forward_pre_hook(keep_merged, with_kwargs=True),
        ]
        try:
            model(input_ids=input_ids, **{pixels_keyword(model): model_pixels}, **sized)
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
        image_sizes,
        captured["projector_extra"],
        rows,
        tile_pixels,
        torch.cat([f.reshape(-1, f.shape[-1]) for f in features]) if tiles is not None else None,
    )


def scaled_before_merge(language_model: Any, trace: Any) -> bool:
    """Whether the embedding module itself scales token rows (its output for the trace's
    ``input_ids`` is not its table's rows, ``trace.text_embeddings``)."""
    table = language_model.get_input_embeddings().weight
    return not bool((table[trace.input_ids] == trace.text_embeddings).all())


def same_values(a: Any, b: Any) -> bool:
    """Whether a reading's value ``a`` is the captured ``b``: same shape, within ``MATCH``."""
    return a.shape == b.shape and float((a - b).abs().max()) <= MATCH


def tile_inputs(tiles: TileGridSpec, vision: Any, generator: Any) -> tuple[Any, Any, Any]:
    """The two test images as tiles: ``[images, tiles, C, S, S]`` padded with zero tiles as the
    processor pads them, every image's real tiles one after another, and their original sizes
    (``tile_image_sizes``)."""
    import torch

    from onboard.tiny_tiles import tile_test_images

    sizes, counts = tile_test_images(tiles, vision)
    size = vision.image_size
    shape = (NUM_IMAGES, max(counts), vision.num_channels, size, size)
    padded = torch.zeros(shape)
    for image, count in enumerate(counts):
        padded[image, :count] = torch.randn(count, *shape[2:], generator=generator)
    real = torch.cat([padded[image, :count] for image, count in enumerate(counts)])
    return padded, real, torch.tensor(sizes)


def _prompt(hf_config: Any, per_image: list[int]) -> Any:
    """Row r: text, image r's placeholders, text, with different text in each row; rows of
    images of different sizes are padded on the left (the pad is text, unmasked: the merge reads
    placeholders only)."""
    import torch

    image = hf_config.image_token_id
    vocab = hf_config.text_config.vocab_size
    longest = max(per_image)
    rows = []
    for row, count in enumerate(per_image):
        before = [(11 + 5 * row + i) % vocab for i in range(TEXT_AROUND + longest - count)]
        after = [(37 + 3 * row + i) % vocab for i in range(TEXT_AROUND)]
        rows.append(before + [image] * count + after)
    return torch.tensor(rows)
