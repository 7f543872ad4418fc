"""The vision parity scenarios of a Qwen-VL model (flattened patches with ``image_grid_thw``,
M-RoPE positions), shared by every target.

The image batch has three rows: one image, two images of other grids, and text only, each row's
text different, so features landing in the wrong row or the wrong image fail. The candidate is
fed ``position_ids [3, B, S]`` computed by the host rule (``parity/mrope.py``); HF computes its
own from ``mm_token_type_ids`` and the grids (``get_rope_index``), so the two rules are compared
too. Decode steps continue at the cache length plus each row's delta: the candidate's from the
host rule, HF's from the ``rope_deltas`` its prefill kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onboard.parity.mrope import mrope_positions, text_positions
from onboard.parity.reference import cache_states
from onboard.parity.vision import (
    TorchVisionRunner,
    VisionBatch,
    VisionStep,
    _numpy,
)

TEXT = 4  # text tokens before, between and after images


def qwen_vl_grids(hf_config: Any) -> list[tuple[int, int, int]]:
    from onboard.analysis.vision.qwen_vl import check_grids

    vision = hf_config.vision_config
    return check_grids(vision.spatial_merge_size, vision.patch_size)


def qwen_vl_batches(
    hf_config: Any, seed: int = 3, length: int = 0
) -> tuple[VisionBatch, VisionBatch]:
    """Rows: image 0; images 1 and 2; text only. Then a text-only prompt of one row.
    ``length``: the least row length, text after the images (longer than the chunks a hybrid's
    prefill scans in, so its chunked prefill must agree with the step-by-step recurrence)."""
    vision, text = hf_config.vision_config, hf_config.text_config
    rng = np.random.default_rng(seed)
    grids = np.array(qwen_vl_grids(hf_config), dtype=np.int64)
    width = vision.in_channels * vision.temporal_patch_size * vision.patch_size**2
    pixels = rng.standard_normal((int(grids.prod(-1).sum()), width)).astype(np.float32)
    merge = vision.spatial_merge_size
    counts = [int(g.prod()) // merge**2 for g in grids]
    image = hf_config.image_token_id
    rows = [_row(rng, text.vocab_size, image, c) for c in ([counts[0]], counts[1:], [])]
    longest = max(length, *(len(r) for r in rows))
    rows = [r + _text(rng, text.vocab_size, image, longest - len(r)) for r in rows]
    ids = np.array(rows, dtype=np.int64)
    positions, deltas = mrope_positions(ids, image, grids.tolist(), merge)
    batch = VisionBatch(
        pixels, ids, np.ones_like(ids), positions, image_grid_thw=grids, rope_deltas=deltas
    )
    prompt_ids = np.array([_text(np.random.default_rng(seed + 1), text.vocab_size, image, 9)])
    prompt = VisionBatch(
        None,
        prompt_ids,
        np.ones_like(prompt_ids),
        text_positions(prompt_ids.shape, 0),
        rope_deltas=np.zeros(1, dtype=np.int64),
    )
    return batch, prompt


def _row(rng: np.random.Generator, vocab: int, image: int, counts: list[int]) -> list[int]:
    row = _text(rng, vocab, image, TEXT)
    for count in counts:
        row += [image] * count + _text(rng, vocab, image, TEXT)
    return row


def _text(rng: np.random.Generator, vocab: int, image: int, count: int) -> list[int]:
    high = max(2, min(vocab - 1, 200))
    tokens = rng.integers(1, high, size=count * 2 + 2)
    return [int(t) for t in tokens if t != image][:count]


def qwen_prefill(
    runner: TorchVisionRunner, batch: VisionBatch, **inputs: Any
) -> tuple[Any, Any, Any]:
    """A Qwen-VL class's prefill on ``batch`` (its patches with their grids, when it has
    images) and ``inputs``: the output, the image features (per image, concatenated) and the
    embeddings its language model received."""
    import torch

    from onboard.tiny_model import image_features_method

    captured: dict[str, Any] = {}

    def keep(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        captured["embeddings"] = kwargs.get("inputs_embeds")

    images: dict[str, Any] = {}
    features = None
    handle = runner.language_model().register_forward_pre_hook(keep, with_kwargs=True)
    try:
        with torch.no_grad():
            if batch.pixel_values is not None:
                images = {
                    "pixel_values": runner._tensor(batch.pixel_values),
                    "image_grid_thw": runner._tensor(batch.image_grid_thw),
                }
                per_image = image_features_method(runner.model)(**images).pooler_output
                features = _numpy(torch.cat(list(per_image)))
            out = runner.model(
                input_ids=runner._tensor(batch.input_ids),
                attention_mask=runner._tensor(batch.attention_mask),
                use_cache=True,
                **inputs,
                **images,
            )
    finally:
        handle.remove()
    return out, features, _numpy(captured["embeddings"])


class QwenHFVisionRunner(TorchVisionRunner):
    """The tiny HF Qwen-VL: it computes its own M-RoPE positions (``get_rope_index`` from
    ``mm_token_type_ids`` and the grids) at prefill, and decodes from the deltas it kept."""

    def language_model(self) -> Any:
        return self.model.base_model.language_model

    def prefill(self, batch: VisionBatch) -> VisionStep:
        import torch

        input_ids = self._tensor(batch.input_ids)
        self.model.base_model.rope_deltas = None
        out, features, embeddings = qwen_prefill(
            self,
            batch,
            mm_token_type_ids=(input_ids == self.model.config.image_token_id).int(),
        )
        deltas = self.model.base_model.rope_deltas
        deltas = torch.zeros(input_ids.shape[0], 1, dtype=torch.long) if deltas is None else deltas
        return VisionStep(
            _numpy(out.logits),
            features,
            embeddings,
            (out.past_key_values, deltas),
            cache_states(self.model.config, out.past_key_values),
        )

    def decode(self, previous: VisionStep, batch: VisionBatch) -> VisionStep:
        import torch

        cache, deltas = previous.state
        past = cache.get_seq_length()
        length = batch.input_ids.shape[1]
        positions = torch.arange(past, past + length)[None] + deltas.to(torch.long)
        with torch.no_grad():
            out = self.model(
                input_ids=self._tensor(batch.input_ids),
                attention_mask=self._tensor(batch.attention_mask),
                position_ids=positions[None].expand(3, -1, -1),
                past_key_values=cache,
                use_cache=True,
            )
        states = cache_states(self.model.config, out.past_key_values)
        return VisionStep(_numpy(out.logits), state=(out.past_key_values, deltas), states=states)
