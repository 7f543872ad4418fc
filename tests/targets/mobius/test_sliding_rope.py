"""Sliding layers that rotate differently from full layers (another theta, rope type, scaling or
rotated share, from ``rope_parameters`` keyed by layer kind): read per kind into the spec, proved
by the spec check, and generated for mobius as a table of their own (and their attention's
rotated width), where mobius' config keeps one RoPE."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.source import load_source
from onboard.targets.mobius import TARGET
from onboard.targets.mobius import plan as mobius_plan
from onboard.targets.mobius.plan import STYLE
from onboard.targets.mobius.profiles import requirements
from onboard.targets.mobius.rope import (
    SlidingRope,
    rope_blockers,
    sliding_rope,
    sliding_rope_blockers,
)
from onboard.tiny_model import build_tiny_model, perturb
from tests.hub_cache import fixture_config
from tests.new_types import default_config_dir
from tests.sliding_rope import LAGUNA_ROPE, SCALED_ROPE, laguna_rotation, mellum_dir
from tests.targets.mobius.checks import assert_default_checks_pass, built_from_test_entry, statuses
from tests.targets.mobius.sabotage import config_classes, parity_with

LOCAL_TABLE = '"sliding_attention": self.rotary_emb_local(op, position_ids),'
FULL_TABLE = '"sliding_attention": self.rotary_emb(op, position_ids),'
LOCAL_WIDTH = 'if kind == "sliding_attention":\n                attention = layer.self_attn'
NO_WIDTH = 'if kind == "no_layer_kind":\n                attention = layer.self_attn'
LOCAL_THETA = "rope_theta=config.rope_local_base_freq,"


def _model(tmp_path: Path, rope: dict, monkeypatch: pytest.MonkeyPatch) -> Path:
    if rope is LAGUNA_ROPE:
        laguna_rotation(monkeypatch, tmp_path / "site")
    return mellum_dir(tmp_path / "mellum", rope)


def test_laguna_rope_is_read_per_kind(tmp_path: Path) -> None:
    """Laguna's own config with sliding layers: full layers rotate half of each head with theta
    5e5, sliding layers all of it with theta 1e4; nothing about its RoPE is refused (its gated
    attention output is another feature)."""
    kinds = ["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(40)]
    folder = default_config_dir("laguna", tmp_path / "models", layer_types=kinds)
    spec = analyse(load_source(str(folder))).spec
    rope = dict(spec.text.rope)
    full, sliding = rope["full_attention"], rope["sliding_attention"]
    assert (full.theta, full.partial_rotary_factor) == (500000.0, 0.5)
    assert (sliding.theta, sliding.partial_rotary_factor) == (10000.0, 1.0)
    evidence = dict(spec.evidence)["text.rope.sliding_attention"]
    assert any(e.where == "config.json:rope_parameters" for e in evidence), evidence
    assert sliding_rope(spec) == SlidingRope(scaled=False, partial=True)
    assert sliding_rope_blockers(spec) == []


def test_one_scaled_rope_for_every_kind_is_not_refused(tmp_path: Path) -> None:
    """CWM: sliding and full layers share one llama3-scaled RoPE, so no table of their own."""
    spec = analyse(load_source(str(default_config_dir("cwm", tmp_path / "models")))).spec
    rope = dict(spec.text.rope)
    assert rope["sliding_attention"] == rope["full_attention"]
    assert rope["full_attention"].rope_type == "llama3"
    assert sliding_rope(spec) is None and sliding_rope_blockers(spec) == []


def _untruncated_yarn_llama(folder: Path) -> Path:
    """Llama 3.2 with GPT-OSS's YaRN (truncate=False)."""
    config = json.loads(fixture_config("meta-llama/Llama-3.2-1B").read_text())
    config.pop("rope_scaling", None)
    config["rope_parameters"] = {
        "rope_type": "yarn",
        "rope_theta": 150000.0,
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "truncate": False,
    }
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_untruncated_yarn_is_generated_and_refused_only_per_kind(tmp_path: Path) -> None:
    """GPT-OSS's YaRN (the same on both kinds, so no longer refused as per-kind RoPE) keeps
    transformers' correction range unrounded, which mobius' YarnRope always rounds: the
    generated text model builds HF's table. transformers reads truncate from the top of
    rope_parameters only, so a kind's own truncate is refused."""
    spec = analyse(load_source(str(_untruncated_yarn_llama(tmp_path / "yarn")))).spec
    assert requirements(spec)["yarn_range"] == "unrounded"
    assert rope_blockers(spec) == []
    ((_, rope),) = spec.text.rope
    other = dataclasses.replace(rope, theta=10000.0)
    kinds = (("full_attention", rope), ("sliding_attention", other))
    text = dataclasses.replace(spec.text, rope=kinds)
    (blocker,) = rope_blockers(dataclasses.replace(spec, text=text))
    assert blocker.startswith("YaRN RoPE with truncate=False in a layer kind's own")


@pytest.mark.slow
def test_untruncated_yarn_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    """Measured: 8e-7 in the prefill logits; rounded as mobius' YarnRope does, 1.7e-3."""
    folder = _untruncated_yarn_llama(tmp_path / "yarn")
    result = onboard_new(NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    module = result.root / result.plan.model_file
    assert lint_python(module.read_text(), filename=module.name, style=STYLE) == ""
    rounded = parity_with(result, 'if scaling.get("truncate", True):', "if True:")
    prefill = next(c for c in rounded.checks if c.provider == "default" and c.name == "prefill")
    assert prefill.status is Status.FAIL and prefill.metrics.max_abs > 1e-4


@pytest.mark.parametrize("rope", [LAGUNA_ROPE, SCALED_ROPE], ids=["partial", "scaled"])
def test_spec_check_proves_the_sliding_rope(
    rope: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interpreter is what proves the per-kind RoPE: with the full layers' RoPE on every
    layer it names the attention that computes something else."""
    analysis = analyse(load_source(str(_model(tmp_path, rope, monkeypatch))))
    assert analysis.spec.unresolved == ()
    text = analysis.spec.text
    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    assert check_spec(text, model, config) == ()
    full = text.rope_for("full_attention")
    one = tuple((kind, full) for kind, _ in text.rope)
    deltas = check_spec(dataclasses.replace(text, rope=one), model, config)
    assert any("MellumAttention computes something" in d.what for d in deltas), deltas


def test_the_library_tests_build_the_sliding_layers_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated config reads each kind's entry of rope_parameters, and the entry of
    mobius' tests/_test_configs.py sets the sliding fields, so its tests build that path."""
    folder = _model(tmp_path, LAGUNA_ROPE, monkeypatch)
    result = onboard_new(NewOptions(model=str(folder), out=tmp_path / "out", parity=False))
    assert 'local_partial_rotary_factor=config.rope_parameters["sliding_attention"]' in (
        config_classes(result)
    )
    design = TARGET.design(result.analysis.spec, result.proposal)
    entry = mobius_plan.test_config_entry(design, result.analysis.spec)
    assert '"partial_rotary_factor": 0.5,' in entry
    assert '"local_partial_rotary_factor": 1.0,' in entry
    _, config, built = built_from_test_entry(result, entry)
    widths = [layer.self_attn.rotary_embedding_dim for layer in built.model.layers]
    assert widths == [8 if kind == "full_attention" else 0 for kind in config.layer_types]


@pytest.mark.slow
@pytest.mark.parametrize("rope", [LAGUNA_ROPE, SCALED_ROPE], ids=["partial", "scaled"])
def test_sliding_rope_generates_into_mobius_with_zero_edits(
    rope: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _model(tmp_path, rope, monkeypatch)
    result = onboard_new(NewOptions(model=str(folder), out=tmp_path / "out"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert_default_checks_pass(report)
    # the cpu EP's GroupQueryAttention keeps the first layer's tables (T8), confirmed
    cpu = {c.status for c in report.checks if c.provider == "cpu"}
    assert cpu <= {Status.PASS, Status.XFAIL, Status.SKIP}
    assert {b.id for b in report.bugs} == {"T8"}
    module = result.root / result.plan.model_file
    text = module.read_text()
    # the full layers' RoPE on every layer
    wrong = parity_with(result, LOCAL_TABLE, FULL_TABLE)
    assert statuses(wrong)["weights"] is Status.PASS
    assert statuses(wrong)["prefill"] is Status.FAIL
    if rope is LAGUNA_ROPE:  # sliding layers' tables, but the full layers' rotated width
        module.write_text(text)
        narrow = parity_with(result, LOCAL_WIDTH, NO_WIDTH)
        assert statuses(narrow)["prefill"] is Status.FAIL
        # their own width, but the full layers' theta: the numbers differ (0.22 measured)
        module.write_text(text)
        theta = parity_with(result, LOCAL_THETA, "rope_theta=config.rope_theta,")
        prefill = next(c for c in theta.checks if c.provider == "default" and c.name == "prefill")
        assert prefill.status is Status.FAIL and prefill.metrics.max_abs > 1e-2


def test_rope_fixture_is_laguna_default() -> None:
    """The laguna-like fixture carries Laguna's own default per-kind RoPE."""
    from transformers import LagunaConfig

    assert LagunaConfig().rope_parameters == json.loads(json.dumps(LAGUNA_ROPE))
