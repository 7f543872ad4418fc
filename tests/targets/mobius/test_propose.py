from __future__ import annotations

import dataclasses

import pytest

from onboard.targets.mobius.propose import propose
from onboard.targets.mobius.registry import open_library
from tests.analyses import analysis_of


@pytest.fixture(scope="module")
def library():
    return open_library(None)


def test_registered_model_is_already_supported(library) -> None:
    proposal = propose(analysis_of("Qwen/Qwen3-0.6B").spec, library, treat_as_new=False)
    assert proposal.already_supported.class_name == "Qwen3CausalLMModel"
    assert proposal.hidden == ()


def test_treat_as_new_hides_the_class_and_its_aliases(library) -> None:
    spec = analysis_of("meta-llama/Llama-3.2-1B").spec
    proposal = propose(spec, library, treat_as_new=True)
    assert proposal.already_supported is None
    assert {"llama", "mistral", "qwen2", "yi"} <= set(proposal.hidden)
    assert all(c.variant.class_name != "CausalLMModel" for c in proposal.candidates)
    assert proposal.chosen.deltas == ()


def test_qwen3_builds_on_the_generic_class_with_no_structural_delta(library) -> None:
    proposal = propose(analysis_of("Qwen/Qwen3-0.6B").spec, library, treat_as_new=True)
    assert proposal.hidden == ("qwen3",)
    assert proposal.chosen.variant.class_name == "CausalLMModel"
    assert proposal.chosen.variant.key == "llama"
    assert proposal.chosen.deltas == ()


def test_mistral_needs_a_window_on_the_default_ep(library) -> None:
    proposal = propose(analysis_of("mistralai/Mistral-7B-v0.1").spec, library, treat_as_new=True)
    assert [(d.feature, d.wanted) for d in proposal.chosen.deltas] == [
        ("sliding_window", "uniform")
    ]


def test_gemma3_closest_is_gemma2_and_its_bugs_are_routed_around(library) -> None:
    proposal = propose(analysis_of("google/gemma-3-1b-it").spec, library, treat_as_new=True)
    chosen = proposal.chosen
    assert chosen.variant.class_name == "Gemma2CausalLMModel"
    assert {d.feature for d in chosen.deltas} == {
        "embedding_scale",
        "layer_dispatch",
        "sliding_window",
        "per_kind_rope",
    }
    assert any("T7" in n for n in chosen.notes) and any("M2" in n for n in chosen.notes)


def test_blockers_name_what_cannot_be_expressed(library) -> None:
    spec = analysis_of("Qwen/Qwen2.5-0.5B").spec
    attention = dataclasses.replace(spec.text.attention, k_bias=False)
    mlp = dataclasses.replace(spec.text.mlp, kind="plain", projections=("fc1", "fc2", "fc3"))
    broken = dataclasses.replace(
        spec, text=dataclasses.replace(spec.text, attention=attention, mlp=mlp)
    )
    blockers = propose(broken, library, treat_as_new=True).blockers
    assert any("q/k/v projections differ in bias" in b for b in blockers)
    assert any("non-gated MLP (fc1, fc2, fc3)" in b for b in blockers)
