"""The static reader on transformers' own modeling files, read as if they were remote code.

The labelled table (tests/analysis/labels.py) is the truth: a read value must equal the label,
or the reader must refuse with a delta; a complete spec with a wrong value fails.
"""

from __future__ import annotations

import pytest

from benchmarks.static_accuracy import static_spec
from onboard.analysis.features import feature_values
from tests.analysis.labels import LABELS, Unresolved, expected_features, source_for

# Types whose every catalogue feature the reader gets from the source alone.
READ_FULLY = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "olmo",
    "olmo2",
    "stablelm",
    "nemotron",
    "starcoder2",
    "granite",
    "hyperclovax",
    "cohere",
    "helium",
    "ernie4_5",
    "glm",
    "glm4",
    "phi3",  # one fused qkv_proj, sliced into q, k, v
)
# Types the reader must refuse (a delta), with a fragment of the reason.
REFUSED = {
    "gemma3_text": "rope_local_base_freq",  # per-kind RoPE base from a legacy key
    "exaone4": "RoPE applied only under a condition",  # NoPE global layers
    "smollm3": "RoPE applied only under a condition",
    "ministral3": "llama_4_scaling_beta",
    "apertus": "activation 'xielu'",
    "diffllama": "lambda_q1",
    "hunyuan_v1_dense": "query_layernorm",
    "minicpm3": "q_a_proj has no role",  # latent attention is not read statically
    "opt": "the layers sit deeper (model.decoder.layers)",  # a nested decoder
    "gpt2": "GPT2Model.wpe has no role in the spec (wpe (Embedding))",  # learned positions
    "gpt_neox": "split after a reshape onboard cannot read",  # per-head rows behind a variable
}


def _entry(model_type: str) -> dict:
    return next(e for e in LABELS if e["type"] == model_type)


@pytest.mark.parametrize("model_type", READ_FULLY)
def test_read_features_equal_the_labels(model_type: str) -> None:
    entry = _entry(model_type)
    spec, deltas = static_spec(source_for(entry))
    found = feature_values(spec)
    for name, label in expected_features(entry).items():
        if name.startswith("moe."):
            continue
        if isinstance(label, Unresolved):
            assert deltas, f"{name}: the labels expect a refusal"
        else:
            assert found[name] == label, name


@pytest.mark.parametrize(("model_type", "reason"), sorted(REFUSED.items()))
def test_what_cannot_be_read_is_refused_with_a_location(model_type: str, reason: str) -> None:
    _, deltas = static_spec(source_for(_entry(model_type)))
    texts = [f"{d.what} {d.where} {d.detail}" for d in deltas]
    assert any(reason in text for text in texts), texts


DENSE_LABELLED = sorted(e["type"] for e in LABELS if e.get("moe.router", "none") == "none")


@pytest.mark.parametrize("model_type", DENSE_LABELLED)
def test_every_labelled_dense_type_is_read_right_or_refused(model_type: str) -> None:
    """Never a crash, never a complete spec with a wrong value (HunYuan MoE's MLP, which the
    reader does not understand, once raised a KeyError)."""
    entry = _entry(model_type)
    spec, deltas = static_spec(source_for(entry))
    if deltas:
        return
    found = feature_values(spec)
    wrong = {
        name: (found[name], label)
        for name, label in expected_features(entry).items()
        if not name.startswith("moe.") and not isinstance(label, Unresolved)
        if found[name] != label
    }
    assert not wrong
