"""How HF widens a VLM's causal mask when the prompt comes with ``token_type_ids``.

transformers turns the types into ``block_sequence_ids``: tokens of one block (an id >= 0) see
each other both ways, the rest stay causal. Two rules are read:

- ``images``: each run of tokens typed 1 (an image's placeholders) is a block of its own (Gemma 3's
  ``get_block_sequence_ids_for_mask``);
- ``prefix``: every token typed 0 is one block (PaliGemma: the image and the prompt form a
  bidirectional prefix, the suffix typed 1 is causal).

The tiny VLM runs on the trace's prompt under token types of both processors' shapes (the
placeholders typed 1; a prefix typed 0 that ends inside the text after the image), and the mask
its language model receives is compared with each rule's, entry for entry; the rule that gives
HF's mask under every pattern is the one read. The evidence is the line where HF builds the
blocks from the types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from onboard.source import transformers_source_files
from onboard.spec import Delta, Evidence

TokenBlocks = Literal["", "images", "prefix"]
RULES: tuple[TokenBlocks, ...] = ("images", "prefix")
# Where HF assigns the blocks it builds from the types (Gemma 3: the call of its helper)
BLOCKS_LINE = r"block_sequence_ids\"?\]? = .*token_type_ids"


@dataclass(frozen=True)
class TokenBlocksRead:
    rule: TokenBlocks
    evidence: tuple[Evidence, ...] = ()
    delta: Delta | None = None


def block_ids(types: Any, rule: TokenBlocks) -> Any:
    """``[rows, seq]`` block ids under ``rule`` (-1: causal), as HF builds them."""
    import torch

    if rule == "prefix":
        return torch.where(types == 0, 0, -1)
    marked = types == 1
    previous = torch.nn.functional.pad(marked, (1, 0), value=False)[:, :-1]
    starts = marked & ~previous
    return torch.where(marked, torch.cumsum(starts.long(), dim=1) - 1, -1)


def rule_mask(types: Any, rule: TokenBlocks) -> Any:
    """``[rows, seq, seq]``: whether query q may see key k (causal, or the same block)."""
    import torch

    length = types.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()[None]
    if not rule:
        return causal.expand(types.shape[0], -1, -1)
    blocks = block_ids(types, rule)
    same = (blocks[:, :, None] == blocks[:, None, :]) & (blocks[:, :, None] >= 0)
    return causal | same


def type_patterns(input_ids: Any, image_token_id: int) -> tuple[Any, ...]:
    """Token types of both processors' shapes for the trace's prompt: the placeholders typed 1
    (Gemma 3), and a prefix typed 0 through the image and part of the text after it, with the
    rest typed 1 (PaliGemma with a suffix): row r's prefix ends 1 + r text tokens past its image."""
    import torch

    rows, length = input_ids.shape
    marked = (input_ids == image_token_id).long()
    positions = torch.arange(length)
    last = torch.where(marked.bool(), positions, -1).amax(dim=1)
    ends = torch.clamp(last + 2 + torch.arange(rows), max=length - 1)
    return marked, (positions[None] >= ends[:, None]).long()


def read_token_blocks(model: Any, language_model: Any, config: Any, trace: Any) -> TokenBlocksRead:
    """The rule (``""``: the types change nothing) with its evidence, or a delta when the types
    change what the model computes in a way neither rule gives."""
    import torch

    inputs = {"input_ids": trace.input_ids, **trace.image_inputs}
    patterns = type_patterns(trace.input_ids, config.image_token_id)
    captured: list[Any] = []

    def keep(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        captured.append(kwargs.get("attention_mask"))

    handle = language_model.register_forward_pre_hook(keep, with_kwargs=True)
    try:
        with torch.no_grad():
            plain = model(**inputs).logits
            typed = []
            for types in patterns:
                try:
                    typed.append(model(**inputs, token_type_ids=types).logits)
                except (TypeError, ValueError):  # the model takes no token types
                    return TokenBlocksRead("")
    finally:
        handle.remove()
    if all(torch.allclose(t, plain, atol=1e-6) for t in typed):
        return TokenBlocksRead("")
    masks = [_allowed(m) for m in captured[1:]]
    where = _blocks_line(config)
    rule = _matching_rule(patterns, masks)
    if rule:
        detail = {
            "images": "each run of tokens typed 1 (an image's placeholders) sees itself both "
            "ways; the rest stays causal",
            "prefix": "every token typed 0 (the image and the prompt) sees the others both "
            "ways; the tokens typed 1 (the suffix) stay causal",
        }[rule]
        probe = Evidence("probe", "token_type_ids", f"HF's mask under both patterns: {detail}")
        return TokenBlocksRead(rule, (where, probe) if where else (probe,))
    from onboard.analysis.probe import source_location

    forward = type(model.base_model).forward
    return TokenBlocksRead(
        "",
        delta=Delta(
            "token_type_ids change the mask in a way onboard does not read (neither each image's "
            "placeholders nor a prefix typed 0 as one bidirectional block)",
            where.where if where else source_location(forward) or type(model.base_model).__name__,
            "onboard generates image blocks (Gemma 3) and a bidirectional prefix (PaliGemma)",
        ),
    )


def _blocks_line(config: Any) -> Evidence | None:
    from onboard.analysis.source_lines import find_line

    return find_line(transformers_source_files(config.model_type), BLOCKS_LINE)


def _allowed(mask: Any) -> Any:
    """``[rows, seq, seq]`` booleans of the (full-attention) mask the language model received;
    None when it received no 4-D mask (it builds its own)."""
    if isinstance(mask, dict):
        mask = mask.get("full_attention", next(iter(mask.values()), None))
    if mask is None or getattr(mask, "ndim", 0) != 4:
        return None
    import torch

    mask = mask[:, 0]
    return mask if mask.dtype == torch.bool else mask == 0


def _matching_rule(patterns: tuple[Any, ...], masks: list[Any]) -> TokenBlocks:
    """The rule whose mask equals HF's under every pattern, if HF's masks were read."""
    import torch

    if any(m is None for m in masks):
        return ""
    for rule in RULES:
        if all(torch.equal(rule_mask(t, rule), m) for t, m in zip(patterns, masks, strict=True)):
            return rule
    return ""
