"""The parity scenarios of a vision-language model, shared by every target.

A batch of two rows, each with its own image between different text, so a candidate that gives
the second row the first row's features fails; the checks compare the image features, the merged
embeddings, the prefill logits, three decode steps (text only, feeding the reference's argmax
and the caches back) and a prompt with no image at all.

A model whose mask reads ``token_type_ids`` (``MergeSpec.token_blocks``) gets them as its
processor makes them: the placeholders typed 1 (Gemma 3's image blocks), or a prefix typed 0 and
a suffix typed 1 whose lengths differ from row to row (PaliGemma's), the text-only prompt
included. Decode steps type their token 1, as HF's ``generate`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from onboard.parity.harness import (
    DECODE_STEPS,
    error_text,
    logits_check,
    state_diffs,
    states_check,
)
from onboard.parity.reference import cache_states
from onboard.parity.report import Check, Metrics, Status
from onboard.tiny_model import image_tokens, pixels_keyword, takes_image_rows, takes_image_sizes
from onboard.tiny_tiles import pinpoints_key
from onboard.tiny_vision import dynamic_image_sizes, square_side

IMAGES = 2  # one per row
TEXT_BEFORE = (3, 6)  # text tokens before each row's placeholders; the rest come after
ROW_TEXT = 8  # text tokens per row
# Images per row for a VLM that takes rows of images (Idefics 3): two, one, and a text-only row
# whose pixels are all padding, so a candidate that mixes up rows or keeps padding fails
IMAGES_PER_ROW = (2, 1, 0)
# The suffix typed 1 at the end of each row under a prefix rule (PaliGemma): the rest, the image
# and the prompt around it, is the prefix typed 0; the text-only prompt takes the first
SUFFIX = (4, 2)


@dataclass(frozen=True)
class VisionBatch:
    pixel_values: np.ndarray | None  # [images, channels, height, width]; None: text only
    input_ids: np.ndarray  # [B, S] int64
    attention_mask: np.ndarray  # [B, past + S] int64
    position_ids: np.ndarray  # [B, S] int64; [3, B, S] for M-RoPE (Qwen-VL)
    # [images, 2] each image's pixel height and width inside pixel_values, for a tower of
    # dynamic size (Pixtral); None: every image fills pixel_values
    image_sizes: np.ndarray | None = None
    # Qwen-VL: pixel_values are flattened patches [patches, C*T*P*P], image_grid_thw [images, 3]
    # their grids; rope_deltas [B] where each row's decode steps continue (M-RoPE)
    image_grid_thw: np.ndarray | None = None
    rope_deltas: np.ndarray | None = None
    # pixel_values is [rows, images, channels, height, width]: row r holds the first
    # images_per_row[r] images, the rest are all-zero padding; None: one image per row
    images_per_row: tuple[int, ...] | None = None
    # [B, S] int64 as the processor returns them, for a model whose mask reads them
    token_type_ids: np.ndarray | None = None
    # Tiles (LLaVA-NeXT): pixel_values is [images, tiles, channels, size, size], image i's first
    # tiles[i] real (base tile first), the rest zero padding; image_sizes the original sizes
    tiles: tuple[int, ...] | None = None
    # A VLM with no tower (Fuyu): [patches, P * P * C], every image's patches flattened and
    # concatenated as its processor makes them; pixel_values None
    image_patches: np.ndarray | None = None

    @property
    def images(self) -> list[np.ndarray]:
        """Each image alone, ``[1, channels, height, width]``, cropped to its size; for rows of
        images, the real ones in reading order (as HF drops the padding)."""
        assert self.pixel_values is not None
        if self.tiles is not None:  # each image's tiles, without the padding
            return [
                image[:count] for image, count in zip(self.pixel_values, self.tiles, strict=True)
            ]
        if self.images_per_row is not None:
            return [
                row[i][None]
                for row, count in zip(self.pixel_values, self.images_per_row, strict=True)
                for i in range(count)
            ]
        if self.image_sizes is None:
            return [image[None] for image in self.pixel_values]
        return [
            image[None, :, :height, :width]
            for image, (height, width) in zip(self.pixel_values, self.image_sizes, strict=True)
        ]


@dataclass(frozen=True)
class VisionStep:
    logits: np.ndarray  # [B, S, vocab]
    features: np.ndarray | None = None  # [image tokens, hidden], prefill with images only
    embeddings: np.ndarray | None = None  # [B, S, hidden], what the text model received
    state: Any = None  # what the runner needs to continue decoding
    # a hybrid text model's states per layer, in mobius' layout (harness.Step.states)
    states: tuple[Any, ...] = ()


class VisionRunner(Protocol):
    provider: str

    def prefill(self, batch: VisionBatch) -> VisionStep: ...

    def decode(self, previous: VisionStep, batch: VisionBatch) -> VisionStep: ...


def image_batch(
    vocab_size: int,
    image_token: int,
    per_image: Sequence[int],
    channels: int,
    sizes: Sequence[tuple[int, int]],
    *,
    dynamic: bool = False,
    seed: int = 3,
) -> VisionBatch:
    """Row r holds image r (``per_image[r]`` placeholders) between text. ``sizes``: each
    image's pixel height and width; ``dynamic``: the images are padded into one pixel tensor
    and ``image_sizes`` says each one's size (rows of fewer placeholders get more text)."""
    rng = np.random.default_rng(seed)
    height, width = max(h for h, _ in sizes), max(w for _, w in sizes)
    pixels = rng.standard_normal((IMAGES, channels, height, width)).astype(np.float32)
    longest = max(per_image)
    rows = []
    for before, count in zip(TEXT_BEFORE, per_image, strict=True):
        text = _text(rng, vocab_size, image_token, ROW_TEXT + longest - count)
        rows.append([*text[:before], *[image_token] * count, *text[before:]])
    ids = np.array(rows, dtype=np.int64)
    image_sizes = np.array(sizes, dtype=np.int64) if dynamic else None
    return VisionBatch(pixels, ids, np.ones_like(ids), _positions(ids.shape, 0), image_sizes)


def rows_batch(
    vocab_size: int,
    image_token: int,
    tokens: int,
    channels: int,
    size: int,
    per_row: Sequence[int] = IMAGES_PER_ROW,
    *,
    seed: int = 3,
) -> VisionBatch:
    """Rows of ``per_row`` square images (``tokens`` placeholders each) between text, padded
    with all-zero images to the longest row, as Idefics 3's processor pads them."""
    rng = np.random.default_rng(seed)
    most = max(per_row)
    pixels = np.zeros((len(per_row), most, channels, size, size), dtype=np.float32)
    for row, count in enumerate(per_row):
        pixels[row, :count] = rng.standard_normal((count, channels, size, size))
    longest = most * tokens
    rows = []
    for row, count in enumerate(per_row):
        text = _text(rng, vocab_size, image_token, ROW_TEXT + longest - count * tokens)
        before = 2 + 3 * row
        rows.append([*text[:before], *[image_token] * (count * tokens), *text[before:]])
    ids = np.array(rows, dtype=np.int64)
    return VisionBatch(
        pixels, ids, np.ones_like(ids), _positions(ids.shape, 0), images_per_row=tuple(per_row)
    )


def scenario_batches(
    reference: Any, hf_config: Any, token_blocks: str = ""
) -> tuple[VisionBatch, VisionBatch]:
    """The two-row image batch and the text-only prompt for the tiny ``reference`` VLM, with
    the token types ``token_blocks`` reads (``MergeSpec.token_blocks``)."""
    batch, text = _scenario_batches(reference, hf_config)
    image_token = hf_config.image_token_id
    return typed(batch, token_blocks, image_token), typed(text, token_blocks, image_token)


def typed(batch: VisionBatch, token_blocks: str, image_token: int) -> VisionBatch:
    """``batch`` with the ``token_type_ids`` a processor gives under ``token_blocks``: the
    placeholders typed 1 ("images"), or each row's last ``SUFFIX`` tokens typed 1 and the rest,
    the prefix, 0 ("prefix"); none for a causal model."""
    ids = batch.input_ids
    if token_blocks == "images":
        types = (ids == image_token).astype(np.int64)
    elif token_blocks == "prefix":
        types = np.zeros_like(ids)
        for row in range(ids.shape[0]):
            types[row, ids.shape[1] - SUFFIX[row % len(SUFFIX)] :] = 1
    else:
        return batch
    return replace(batch, token_type_ids=types)


def _scenario_batches(reference: Any, hf_config: Any) -> tuple[VisionBatch, VisionBatch]:
    """The two-row image batch and the text-only prompt for the tiny ``reference`` VLM: square
    images of the tower's size, or two of different sizes for a tower that takes any size; for
    a VLM that takes rows of images, rows of two, one and no image."""
    if getattr(hf_config, "vision_config", None) is None:  # no tower: flattened patches
        from onboard.parity.vision_patches import patch_batch

        text = hf_config.text_config
        return patch_batch(hf_config), text_batch(text.vocab_size, hf_config.image_token_id)
    vision, text = hf_config.vision_config, hf_config.text_config
    side = square_side(vision.image_size, "image_size")
    if takes_image_rows(reference, vision.num_channels, side):
        square = [(side, side)]
        (tokens,) = image_tokens(reference, square, vision.num_channels, rows=True)
        batch = rows_batch(
            text.vocab_size,
            hf_config.image_token_id,
            tokens,
            vision.num_channels,
            side,
        )
        return batch, text_batch(text.vocab_size, hf_config.image_token_id)
    if pinpoints_key(hf_config) and takes_image_sizes(reference):  # tiles of any resolution
        from onboard.parity.vision_tiles import tile_batch

        return tile_batch(reference, hf_config), text_batch(
            text.vocab_size, hf_config.image_token_id
        )
    dynamic = takes_image_sizes(reference)
    sizes = dynamic_image_sizes(hf_config) if dynamic else [(side, side)] * IMAGES
    per_image = image_tokens(reference, sizes, vision.num_channels, dynamic=dynamic)
    batch = image_batch(
        text.vocab_size,
        hf_config.image_token_id,
        per_image,
        vision.num_channels,
        sizes,
        dynamic=dynamic,
    )
    return batch, text_batch(text.vocab_size, hf_config.image_token_id)


def text_batch(vocab_size: int, image_token: int, seed: int = 4) -> VisionBatch:
    ids = np.array([_text(np.random.default_rng(seed), vocab_size, image_token, 9)])
    return VisionBatch(None, ids, np.ones_like(ids), _positions(ids.shape, 0))


def next_batch(previous: VisionBatch, logits: np.ndarray) -> VisionBatch:
    """One decode step: the reference's argmax, one position on (typed 1, a generated token,
    where the prompt was typed)."""
    tokens = logits[:, -1].argmax(-1)[:, None].astype(np.int64)
    past = previous.attention_mask.shape[1]
    mask = np.ones((tokens.shape[0], past + 1), dtype=np.int64)
    types = None if previous.token_type_ids is None else np.ones_like(tokens)
    if previous.rope_deltas is not None:  # M-RoPE: the cache length plus each row's delta
        from onboard.parity.mrope import text_positions

        positions = text_positions(tokens.shape, past + previous.rope_deltas)
        return VisionBatch(None, tokens, mask, positions, rope_deltas=previous.rope_deltas)
    return VisionBatch(None, tokens, mask, _positions(tokens.shape, past), token_type_ids=types)


def run_vision_scenarios(
    reference: VisionRunner, candidate: VisionRunner, batch: VisionBatch, text: VisionBatch
) -> tuple[Check, ...]:
    provider = candidate.provider
    try:
        ref, got = reference.prefill(batch), candidate.prefill(batch)
    except Exception as exc:  # the candidate cannot run: one failed check says why
        return (Check("prefill", provider, Status.FAIL, detail=error_text(exc)),)
    checks = [
        _tensor_check("image-features", provider, ref.features, got.features),
        _tensor_check("merged-embeddings", provider, ref.embeddings, got.embeddings),
        logits_check("prefill", provider, ref.logits, got.logits, _rows_text(batch)),
    ]
    checks += _decode_checks(reference, candidate, batch, ref, got)
    try:
        ref_text, got_text = reference.prefill(text), candidate.prefill(text)
        checks.append(logits_check("text-only", provider, ref_text.logits, got_text.logits))
    except Exception as exc:
        checks.append(Check("text-only", provider, Status.FAIL, detail=error_text(exc)))
    return tuple(checks)


def _rows_text(batch: VisionBatch) -> str:
    if batch.image_grid_thw is not None:
        return f"three rows of {batch.input_ids.shape[1]} tokens: one image, two images, text only"
    if batch.images_per_row is not None:
        return "rows of " + ", ".join(str(n) for n in batch.images_per_row) + " images"
    if batch.token_type_ids is not None:
        suffix = [int(row.sum()) for row in batch.token_type_ids[:, ::-1].cumprod(axis=1)]
        if any(suffix):
            return "two rows, an image each, suffixes of " + ", ".join(map(str, suffix))
    return "two rows, an image each"


def _decode_checks(
    reference: VisionRunner,
    candidate: VisionRunner,
    batch: VisionBatch,
    ref: VisionStep,
    got: VisionStep,
) -> list[Check]:
    """Text-only decode steps on the prefill's caches, feeding the reference's argmax; a hybrid
    text model's states are compared after the prefill and every step as well."""
    provider = candidate.provider
    compare_states = bool(ref.states)
    diffs = list(state_diffs("the prefill", ref, got))
    metrics: list[Metrics] = []
    for step in range(DECODE_STEPS):
        batch = next_batch(batch, ref.logits)
        try:
            ref, got = reference.decode(ref, batch), candidate.decode(got, batch)
            metrics.append(Metrics.compare(ref.logits, got.logits))
        except Exception as exc:  # a candidate that cannot decode fails the check
            detail = f"step {step + 1}: {error_text(exc)}"
            return [Check("decode", provider, Status.FAIL, detail=detail)]
        diffs += state_diffs(f"decode {step + 1}", ref, got)
    worst = max(metrics, key=lambda m: m.max_abs)
    status = Status.PASS if all(m.passes() for m in metrics) else Status.FAIL
    checks = [Check("decode", provider, status, worst, f"{DECODE_STEPS} steps after the images")]
    if compare_states:  # a candidate that reports none fails: no states compared
        checks.append(states_check(provider, diffs, len(metrics)))
    return checks


def _tensor_check(name: str, provider: str, ref: Any, got: Any) -> Check:
    if ref is None or got is None:
        return Check(name, provider, Status.FAIL, detail="not produced")
    try:
        metrics = Metrics.compare(ref, got)
    except ValueError as exc:
        return Check(name, provider, Status.FAIL, detail=str(exc))
    status = Status.PASS if metrics.passes(logits=False) else Status.FAIL
    return Check(name, provider, status, metrics)


def _text(rng: np.random.Generator, vocab_size: int, image_token: int, count: int) -> list[int]:
    high = max(2, min(vocab_size - 1, 200))
    tokens = rng.integers(1, high, size=count * 2)
    return [int(t) for t in tokens if t != image_token][:count]


def _positions(shape: tuple[int, ...], start: int) -> np.ndarray:
    return np.broadcast_to(np.arange(start, start + shape[1], dtype=np.int64), shape).copy()


class TorchVisionRunner:
    """A torch VLM run on the scenarios: image features, the merged embeddings its language model
    receives (caught on the way in), logits and its cache. Subclasses say where those live."""

    provider = "transformers"

    def __init__(self, model: Any) -> None:
        self.model = model
        self.device = next(model.parameters()).device

    def language_model(self) -> Any:
        raise NotImplementedError

    def image_features(self, pixel_values: Any, **sized: Any) -> Any:
        """``[image tokens, hidden]`` for the batch's images, image after image (``sized``:
        their ``image_sizes`` for a tower of dynamic size)."""
        raise NotImplementedError

    def prefill(self, batch: VisionBatch) -> VisionStep:
        import torch

        captured: dict[str, Any] = {}

        def keep(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
            captured["embeddings"] = kwargs.get("inputs_embeds")

        pixels = None
        if batch.pixel_values is not None:
            pixels = torch.from_numpy(batch.pixel_values).to(self.device)
        # the model's own name for its images: flattened patches (Fuyu) or pixels
        images = {pixels_keyword(self.model): pixels}
        if batch.image_patches is not None:
            pixels = torch.from_numpy(batch.image_patches).to(self.device)
            images = {"image_patches": pixels}
        handle = self.language_model().register_forward_pre_hook(keep, with_kwargs=True)
        try:
            with torch.no_grad():
                sized = {}
                if batch.image_sizes is not None:
                    sized["image_sizes"] = self._tensor(batch.image_sizes)
                features = None
                if pixels is not None:
                    features = _numpy(self.image_features(pixels, **sized))
                # the prompt's token types; decode steps pass none, as generate does for the
                # mask (Gemma 3 drops them, PaliGemma reads them at the first step only)
                types = {}
                if batch.token_type_ids is not None:
                    types["token_type_ids"] = self._tensor(batch.token_type_ids)
                out = self.model(
                    input_ids=self._tensor(batch.input_ids),
                    **images,
                    **sized,
                    attention_mask=self._tensor(batch.attention_mask),
                    position_ids=self._tensor(batch.position_ids),
                    use_cache=True,
                    **types,
                )
        finally:
            handle.remove()
        embeddings = captured.get("embeddings")
        return VisionStep(
            _numpy(out.logits),
            features,
            _numpy(embeddings) if embeddings is not None else None,
            out.past_key_values,
            cache_states(self.model.config, out.past_key_values),
        )

    def decode(self, previous: VisionStep, batch: VisionBatch) -> VisionStep:
        import torch

        with torch.no_grad():
            out = self.model(
                input_ids=self._tensor(batch.input_ids),
                attention_mask=self._tensor(batch.attention_mask),
                position_ids=self._tensor(batch.position_ids),
                past_key_values=previous.state,
                use_cache=True,
            )
        states = cache_states(self.model.config, out.past_key_values)
        return VisionStep(_numpy(out.logits), state=out.past_key_values, states=states)

    def _tensor(self, array: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(array).to(self.device)


class HFVisionRunner(TorchVisionRunner):
    """The tiny HF VLM: features from ``get_image_features``, its base model's language model."""

    def language_model(self) -> Any:
        """The base model's child built from ``text_config`` (language_model; Idefics 3's
        text_model)."""
        from onboard.analysis.vision.parts import find_parts

        return find_parts(self.model, self.model.config).module(self.model, "language_model")

    def image_features(self, pixel_values: Any, **sized: Any) -> Any:
        import torch

        from onboard.tiny_model import image_features_method, image_features_of

        per_image = image_features_of(
            image_features_method(self.model)(pixel_values=pixel_values, **sized)
        )
        return torch.cat([f.reshape(-1, f.shape[-1]) for f in per_image])


def _numpy(tensor: Any) -> np.ndarray:
    return tensor.detach().float().cpu().numpy()
