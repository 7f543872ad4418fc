"""The class profiles' bug claims, checked against the installed mobius by parity."""

from __future__ import annotations

import pytest

from onboard.parity.report import Status
from onboard.targets.mobius import TARGET
from onboard.targets.mobius.profiles import PROFILES
from onboard.targets.mobius.propose import propose
from onboard.targets.mobius.registry import open_library
from tests.analyses import analysis_of


def _existing_class_report(repo_id: str):
    analysis = analysis_of(repo_id)
    library = open_library(None)
    proposal = propose(analysis.spec, library, treat_as_new=False)
    assert proposal.already_supported is not None
    return TARGET.parity(analysis, proposal, None, library)


def _bugs_by_provider(report) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for check in report.checks:
        if check.status is Status.XFAIL:
            found.setdefault(check.provider, set()).update(check.bug.split("+"))
    return found


def test_qwen3_class_passes() -> None:
    report = _existing_class_report("Qwen/Qwen3-0.6B")
    assert report.passed and not report.bugs
    assert all(c.status in (Status.PASS, Status.SKIP) for c in report.checks)


def test_causallm_class_ignores_sliding_window_on_default_ep() -> None:
    report = _existing_class_report("mistralai/Mistral-7B-v0.1")
    assert _bugs_by_provider(report) == {"default": {"T9"}}
    assert all(c.status is not Status.XFAIL for c in report.checks if c.provider == "cpu")


@pytest.mark.parametrize("provider,bugs", [("default", {"M1", "M2"}), ("cpu", {"M1", "M2", "T8"})])
def test_gemma3_class_bugs(provider: str, bugs: set[str]) -> None:
    report = _existing_class_report("google/gemma-3-1b-it")
    assert _bugs_by_provider(report)[provider] == bugs


def test_every_field_a_base_init_reads_has_a_tiny_test_value() -> None:
    """The test entry builds the config class directly: each field a base class's __init__
    needs gets a tiny literal (mobius' build tests fail on None otherwise)."""
    from onboard.targets.mobius.plan import TINY_INIT_NEEDS

    needed = {name for profile in PROFILES.values() for name, _ in profile.init_needs}
    assert needed and needed <= set(TINY_INIT_NEEDS)


@pytest.mark.parametrize("profile", PROFILES.values(), ids=lambda p: p.class_name)
def test_splits_fused_experts_claims_what_the_class_does(profile) -> None:
    """The generated module leaves the split of fused experts to a base class that claims it:
    its preprocess_weights must put [E, 2I, H] gate-then-up and [E, H, I] experts where the
    generated MoE layers read them (one module per expert), or leave them fused if it claims
    nothing."""
    import importlib

    import torch
    from mobius._configs import CausalLMConfig

    cls = getattr(importlib.import_module(profile.module), profile.class_name)
    model = cls.__new__(cls)
    model.config = CausalLMConfig(vocab_size=8, hidden_size=4, intermediate_size=8)
    experts, width, hidden = 2, 3, 4
    gate_up = torch.arange(experts * 2 * width * hidden, dtype=torch.float32)
    gate_up = gate_up.reshape(experts, 2 * width, hidden)
    down = torch.ones(experts, hidden, width)
    prefix = "model.layers.0.mlp.experts"
    weights = {f"{prefix}.gate_up_proj": gate_up, f"{prefix}.down_proj": down}
    result = cls.preprocess_weights(model, dict(weights))
    under = f"model.layers.0.{profile.moe_weights_under}.experts"
    split = f"{under}.1.up_proj.weight" in result
    assert split is profile.splits_fused_experts, sorted(result)
    if split:
        assert torch.equal(result[f"{under}.1.gate_proj.weight"], gate_up[1, :width])
        assert torch.equal(result[f"{under}.1.up_proj.weight"], gate_up[1, width:])
        assert torch.equal(result[f"{under}.0.down_proj.weight"], down[0])
