"""The spec interpreter agrees with HF when the spec is right and names the module when not."""

from __future__ import annotations

import dataclasses

import pytest

from onboard.analysis import analyse
from onboard.analysis.spec_check import check_spec
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.source import load_source
from onboard.tiny_model import build_tiny_model, perturb
from tests.analyses import DENSE, analysis_of
from tests.new_types import default_config_dir


def _check(analysis, text):
    config = make_hf_config(analysis.tiny.config)
    return check_spec(text, perturb(build_tiny_model(config)), config)


@pytest.mark.parametrize("repo_id", DENSE)
@pytest.mark.slow
def test_right_spec_reproduces_hf(repo_id: str) -> None:
    analysis = analysis_of(repo_id)
    assert _check(analysis, analysis.spec.text) == ()


def test_wrong_theta_points_at_attention() -> None:
    analysis = analysis_of("meta-llama/Llama-3.2-1B")
    text = analysis.spec.text
    rope = dataclasses.replace(text.rope[0][1], rope_type="default", scaling=())
    deltas = _check(analysis, dataclasses.replace(text, rope=((text.rope[0][0], rope),)))
    assert deltas and "LlamaAttention computes something" in deltas[0].what
    assert deltas[0].where.startswith("modeling_llama.py:")


def test_wrong_norm_offset_points_at_the_norms() -> None:
    analysis = analysis_of("google/gemma-3-1b-it")
    text = analysis.spec.text
    norm = dataclasses.replace(text.norm, weight_offset=0.0)
    deltas = _check(analysis, dataclasses.replace(text, norm=norm))
    assert any("Gemma3RMSNorm" in d.what and "input_layernorm" in d.detail for d in deltas)


def test_missing_embedding_scale_points_at_the_embedding() -> None:
    analysis = analysis_of("google/gemma-3-1b-it")
    deltas = _check(analysis, dataclasses.replace(analysis.spec.text, embedding_scale="none"))
    assert any("Gemma3TextScaledWordEmbedding" in d.what for d in deltas)


def test_unknown_attention_variants_are_refused_with_a_location(tmp_path, monkeypatch) -> None:
    """An attention the spec cannot describe is named with its HF class and line: here onboard
    is made to forget interleaved RoPE, which Cohere rotates without a config key saying so."""
    from onboard.analysis import decoder

    forgetful = tuple(t for t in decoder.TRIALS if t.path != "text.rope.interleaved")
    assert len(forgetful) == len(decoder.TRIALS) - 1
    monkeypatch.setattr(decoder, "TRIALS", forgetful)
    folder = default_config_dir("cohere", tmp_path)
    spec = analyse(load_source(str(folder))).spec
    assert spec.unresolved, "the analysis must not claim to understand this model"
    delta = next(d for d in spec.unresolved if "CohereAttention" in d.what)
    assert delta.where.startswith("modeling_cohere.py:")


def test_unexpressible_experts_block_generation(tmp_path) -> None:
    """GPT-OSS's experts clamp a GLU the spec holds (ClampedGluSpec), but with biases, each
    expert kept (in, out), which mobius' generated clamped-GLU experts do not hold: nothing is
    written, and the module is named with its source line."""
    from onboard.pipeline import NewOptions, onboard_new

    folder = default_config_dir("gpt_oss", tmp_path)
    with pytest.raises(UnsupportedFeatureError) as caught:
        onboard_new(NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out"))
    assert any(
        "GptOssExperts" in item and "modeling_gpt_oss.py:" in item for item in caught.value.items
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("model_type", ["helium", "glm", "ernie4_5"])
def test_interleaved_rope_without_a_config_flag_is_found(tmp_path, model_type) -> None:
    """No config key says so: onboard tries interleaved pairs and keeps them only because every
    attention module then matches HF (the full spec check then passes too)."""
    spec = analyse(load_source(str(default_config_dir(model_type, tmp_path)))).spec
    assert spec.unresolved == ()
    assert all(rope.interleaved for _, rope in spec.text.rope)
    evidence = spec.evidence_for("text.rope.interleaved")
    assert any(e.kind == "probe" and "interleaved pairs" in e.detail for e in evidence)
