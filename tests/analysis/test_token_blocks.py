"""The two rules by which token types widen a VLM's causal mask, against transformers' own."""

from __future__ import annotations

import pytest

from onboard.analysis.vision.token_blocks import block_ids, rule_mask, type_patterns


def _types(seed: int):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (3, 11), generator=generator)


@pytest.mark.parametrize("seed", range(4))
def test_the_rules_build_hf_s_blocks(seed: int) -> None:
    import torch
    from transformers.models.gemma3.modeling_gemma3 import get_block_sequence_ids_for_mask

    types = _types(seed)
    assert torch.equal(block_ids(types, "images"), get_block_sequence_ids_for_mask(types))
    # PaliGemma's modeling_paligemma.py: torch.where(token_type_ids == 0, 0, -1)
    assert torch.equal(block_ids(types, "prefix"), torch.where(types == 0, 0, -1))


def test_the_probe_patterns_tell_the_rules_apart() -> None:
    """Under each pattern one rule unmasks what the other keeps causal: a prefix typed 0 that
    ends past the image, one token later in each row."""
    import torch

    image = 9
    ids = torch.tensor([[1, 2, image, image, 3, 4, 5], [1, image, image, 2, 3, 4, 5]])
    marked, prefix = type_patterns(ids, image)
    assert marked.tolist() == [[0, 0, 1, 1, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0]]
    assert prefix.tolist() == [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 1, 1]]
    for types in (marked, prefix):
        assert not torch.equal(rule_mask(types, "images"), rule_mask(types, "prefix"))
    # text before the image sees the rest of the prefix only under the prefix rule
    assert rule_mask(prefix, "prefix")[0, 0, 4] and not rule_mask(prefix, "images")[0, 0, 4]
