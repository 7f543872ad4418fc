"""Layers that are one residual block each (NemotronH), as the generated mobius layers hold them.

HF names every layer's block ``mixer``; mobius names a layer's block for what it is
(``self_attn``, ``mamba``, ``mlp``), as its own NemotronH does, and its build tests look for
those names. The generated ``preprocess_weights`` renames each layer's ``mixer`` by the layer's
kind in ``config.layer_types``.
"""

from __future__ import annotations

from collections.abc import Sequence

from onboard.spec import TextDecoderSpec

# onboard's kind -> the attribute the generated layer of that kind gives its block
BLOCK_ATTRIBUTES = {
    "full_attention": "self_attn",
    "sliding_attention": "self_attn",
    "mamba": "mamba",
    "mamba2": "mamba",
    "short_conv": "conv",
    "mlp": "mlp",
    "moe": "moe",
}


def block_names(text: TextDecoderSpec, words: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """(mobius' word, block attribute) for each layer kind in use; ``words`` maps onboard's
    kinds to mobius' words where they differ."""
    if text.blocks is None:
        return ()
    return tuple(
        (words.get(kind, kind), BLOCK_ATTRIBUTES[kind]) for kind in text.distinct_layer_types
    )


def named_block(key: str, block: str, attributes: Sequence[str]) -> str:
    """``key`` with layer N's ``block`` (HF's name) renamed to ``attributes[N]``, as the
    generated ``_name_blocks`` does."""
    parts = key.split(".")
    if parts[:2] == ["model", "layers"] and len(parts) > 3 and parts[3] == block:
        parts[3] = attributes[int(parts[2])]
    return ".".join(parts)
