"""Saved tensors transformers only cuts into equal chunks on load are read as their parts, proved
by value; converters that do more stay refused by name (``load_renames``)."""

from __future__ import annotations

import pytest

from onboard.analysis.load_renames import read_load_renames, renamed
from onboard.analysis.load_splits import read_load_splits, split_shapes, split_tensors
from onboard.checkpoint import parameter_shapes, tensor_shapes, tensors
from onboard.errors import UnsupportedFeatureError
from tests.analysis.test_day0_regressions import _llama


def _fused(class_name: str, operations: list) -> object:
    """Sarvam-MoE's layout: attention saved as .attention. with q, k and v as one tensor."""
    from transformers.core_model_loading import WeightConverter, WeightRenaming

    return _llama(
        class_name,
        [
            WeightRenaming(r"\.attention\.", ".self_attn."),
            WeightConverter(
                source_patterns="query_key_value",
                target_patterns=["q_proj", "k_proj", "v_proj"],
                operations=operations,
            ),
        ],
    )


def test_a_chunked_tensor_is_read_as_its_parts_then_renamed_like_transformers() -> None:
    from transformers.core_model_loading import Chunk

    model = _fused("OnboardTestChunkedQkvForCausalLM", [Chunk(dim=0)])
    saved = tensor_shapes(model)
    splits = read_load_splits(model, saved)
    assert [(s.fused, s.parts, s.dim) for s in splits] == [
        ("query_key_value", ("q_proj", "k_proj", "v_proj"), 0)
    ]
    cut = split_shapes(saved, splits)
    load = read_load_renames(model, model, cut, ())
    assert {renamed(n, load): s for n, s in cut} == {
        **dict(parameter_shapes(model)),
        "lm_head.weight": (64, 32),
    }
    values = {renamed(n, load): t for n, t in split_tensors(tensors(model), splits).items()}
    for name, tensor in model.state_dict().items():
        assert values[name].equal(tensor), name


def test_a_converter_that_does_more_than_chunk_stays_refused() -> None:
    """Interleaved rows need more than a cut: no split is read, the tensor is refused."""
    from transformers.core_model_loading import Chunk, Interleave

    model = _fused("OnboardTestInterleavedQkvForCausalLM", [Interleave(dim=0), Chunk(dim=0)])
    saved = tensor_shapes(model)
    assert read_load_splits(model, saved) == ()
    with pytest.raises(UnsupportedFeatureError, match="is converted on load"):
        read_load_renames(model, model, saved, ())
