"""HF's attention kept whole in generated AutoModel code, for the attention features the generated
forward does not write (Ministral 3's position-dependent query scale, DiffLlama's differential
attention, Doge's dynamic mask, ...): they select HF's module and rotary tables instead of
blocking, while a feature the model itself must compute still blocks by name.

The generated tests pass on that code and fail on the same model generated with NeMo's plain
forward in place of HF's (the feature left out), or with the causal mask Doge's attention adds
to left unbuilt under SDPA."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from onboard.targets.automodel import design
from onboard.targets.automodel.kept_attention import attention_features
from onboard.targets.automodel.propose import propose
from onboard.targets.automodel.registry import open_library
from tests.analyses import analysis_of
from tests.targets.automodel.sabotage import (
    assert_generated_tests_catch,
    generate_default,
    run_generated_tests,
)

ACROSS_LAYERS = "test_attention_matches_hf or test_logits_match_hf"


def _qwen3_with(attention_change: dict, **text_change):
    spec = analysis_of("Qwen/Qwen3-0.6B").spec
    attention = dataclasses.replace(spec.text.attention, **attention_change)
    text = dataclasses.replace(spec.text, attention=attention, **text_change)
    return dataclasses.replace(spec, text=text)


def test_attention_features_keep_hf_attention_while_model_features_block() -> None:
    library = open_library(None)
    spec = _qwen3_with({"position_scale": True}, embedding_norm=True)
    proposal = propose(spec, library, treat_as_new=True)
    # the query scale lives in the attention: HF's module computes it, nothing blocks on it
    assert [r.text for r in attention_features(spec)] == ["a position-dependent query scale"]
    # the embedding norm is the model's to compute: still refused by name
    assert proposal.blockers == (
        "a norm of the embeddings (model.embed_norm): the generated model has none",
    )
    plain = _qwen3_with({})
    assert attention_features(plain) == ()
    assert propose(plain, library, treat_as_new=True).blockers == ()


def test_kept_attention_beside_ropes_per_layer_kind_is_refused() -> None:
    """HF's attention kept whole reads the one table of HF's rotary embedding."""
    spec = analysis_of("google/gemma-3-1b-it").spec
    attention = dataclasses.replace(spec.text.attention, position_scale=True)
    spec = dataclasses.replace(spec, text=dataclasses.replace(spec.text, attention=attention))
    (blocker,) = propose(spec, open_library(None), treat_as_new=True).blockers
    assert blocker.startswith("HF's attention kept whole (a position-dependent query scale")
    assert "beside 2 RoPEs (full_attention, sliding_attention)" in blocker


def test_kept_attention_subclasses_hf_attention_and_rotary(tmp_path: Path) -> None:
    out, result = generate_default("ministral3", tmp_path)
    model = (out / result.plan.model_file).read_text()
    assert "class Ministral3Attention(HFMinistral3Attention):" in model
    assert "HF's attention, kept whole, for what a generated forward would not compute:" in model
    assert "    - a position-dependent query scale\n" in model
    assert "self.rotary_emb = HFMinistral3RotaryEmbedding(config=config)" in model
    assert "LlamaRotaryEmbedding" not in model and "apply_rotary_pos_emb" not in model
    assert "return super().forward(" in model
    onboard_md = (out / "ONBOARD.md").read_text()
    assert "keeps HF's `Ministral3Attention` whole" in onboard_md
    assert "  - a position-dependent query scale (" in onboard_md


def _generated_with_nemo_forward(model_type: str, tmp_path: Path, monkeypatch) -> Path:
    """``model_type`` generated as if its attention features did not exist: NeMo's forward."""
    with monkeypatch.context() as patch:
        patch.setattr(design, "kept_attention", lambda *_: None)
        out, result = generate_default(model_type, tmp_path / "nemo_forward")
    assert "return super().forward(" not in (out / result.plan.model_file).read_text()
    return out


@pytest.mark.parametrize(
    "model_type",
    [
        "ministral3",  # the query scaled by position, after RoPE
        pytest.param("diffllama", marks=pytest.mark.slow),  # two softmax maps per head
    ],
)
def test_generated_tests_catch_nemo_forward_in_place_of_kept_attention(
    tmp_path: Path, monkeypatch, model_type: str
) -> None:
    out, _ = generate_default(model_type, tmp_path / "kept")
    clean = run_generated_tests(out, ACROSS_LAYERS)
    assert clean.returncode == 0 and "passed" in clean.stdout, clean.stdout[-3000:]
    broken = run_generated_tests(
        _generated_with_nemo_forward(model_type, tmp_path, monkeypatch), ACROSS_LAYERS
    )
    summary = broken.stdout.strip().splitlines()[-1]  # every selected test fails
    assert broken.returncode == 1 and "failed" in summary and "passed" not in summary, summary
    assert "AssertionError: max abs diff" in broken.stdout  # numbers differ: nothing crashed


@pytest.mark.slow
def test_generated_tests_catch_dynamic_mask_without_causal_mask(tmp_path: Path) -> None:
    """Doge adds its dynamic mask onto the causal mask: SDPA's is-causal shortcut (no mask
    built) would let every token see the future."""
    out, result = generate_default("doge", tmp_path)
    path = out / result.plan.model_file
    assert "class DogeAttention(HFDogeAttention):" in path.read_text()
    old = '                "allow_is_causal_skip": False,\n'
    assert_generated_tests_catch(out, path, old, "", "test_logits_match_hf and sdpa")
