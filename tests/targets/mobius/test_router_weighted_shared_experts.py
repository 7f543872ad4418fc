"""Shared experts the router weighs (Inkling): the router's last rows score the shared experts,
their sigmoid joins the chosen experts' in the renormalisation, every weight is scaled by
config.route_scale and a learned global_scale, and each shared expert's output by its weight.

Read from inkling_text (refused for its other features, none of them MoE), proven end to end in
a GLM-4-MoE decoder built with Inkling's MoE block (tests/inkling_moe.py). Generated code that
adds the shared experts unweighted, or leaves the learned scale out, fails parity; AutoModel
refuses the router by name.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.source import load_source
from onboard.spec import ArchitectureSpec
from onboard.targets.mobius.plan import STYLE
from onboard.tiny_model import build_tiny_model, perturb
from tests.inkling_moe import glm4_moe_with_inkling_moe
from tests.new_types import default_config_dir
from tests.targets.mobius.sabotage import config_classes, parity_with

WEIGHTED_SHARE = "result = op.Add(result, op.Mul(expert(op, hidden_states), share))"
UNWEIGHTED_SHARE = "result = op.Add(result, expert(op, hidden_states))"
LEARNED_SCALE = "weights = op.Mul(weights, self.global_scale)\n"


def test_inkling_router_and_shared_experts_are_read_with_their_evidence(tmp_path: Path) -> None:
    spec = analyse(load_source(str(default_config_dir("inkling_text", tmp_path)))).spec
    moe = spec.text.moe
    router = moe.router
    assert (router.scoring, router.order, router.renormalize) == ("sigmoid", "softmax_topk", True)
    assert router.correction_bias and router.routed_scaling_factor == 8.0
    assert router.scale_key == "route_scale"
    assert (router.shared_logits, router.shared_logits_key) == (2, "n_shared_experts")
    assert router.learned_scale == "global_scale"
    assert moe.shared is not None and moe.shared.stacked and moe.shared.name == "shared_experts"
    assert moe.shared.width_expr == "moe_intermediate_size"
    assert ArchitectureSpec.from_json(spec.to_json()).text.moe == moe
    evidence = dict(spec.evidence)
    assert any("InklingTopkRouter" in e.where for e in evidence["text.moe.router"])
    # inkling_text stays refused, for its attention and embedding, no longer for its MoE block
    unresolved = " ".join(f"{d.what} {d.where} {d.detail}" for d in spec.unresolved)
    assert "short" in unresolved or "sconv" in unresolved
    assert "shared_experts" not in unresolved and "router" not in unresolved


def test_router_weighted_shared_experts_generate_into_mobius_with_zero_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = glm4_moe_with_inkling_moe(monkeypatch, tmp_path / "hub")
    result = onboard_new(NewOptions(model=str(model), treat_as_new=True, out=tmp_path / "out"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = {c.name: c for c in report.checks if c.provider == "default"}
    assert all(c.status is Status.PASS for c in default.values())
    assert all(c.metrics.max_abs < 1e-5 for c in default.values() if c.metrics is not None)
    assert report.weights.ok and not report.weights.problems
    shared = [row for row in report.weights.rows if row.group.endswith("shared experts")]
    assert [(row.checkpoint, row.placed) for row in shared] == [(3, 3)]  # gate, up, down
    text = (result.root / result.plan.model_file).read_text()
    assert "self.global_scale = nn.Parameter([1])" in text
    assert "self.routed_scaling_factor = config.routed_scaling_factor" in text
    assert "routed_scaling_factor=config.route_scale" in config_classes(result)
    assert lint_python(text, filename=Path(result.plan.model_file).name, style=STYLE) == ""
    # the shared experts added unweighted, as an ordinary shared expert would be
    unweighted = parity_with(result, WEIGHTED_SHARE, UNWEIGHTED_SHARE)
    checks = {c.name: c.status for c in unweighted.checks if c.provider == "default"}
    assert checks["weights"] is Status.PASS and checks["prefill"] is Status.FAIL
    # every weight no longer scaled by the learned global_scale
    result.root.joinpath(result.plan.model_file).write_text(text)
    unscaled = parity_with(result, LEARNED_SCALE, "")
    assert not unscaled.passed
    assert any("global_scale" in p for p in unscaled.weights.problems), unscaled.weights.problems


def test_spec_check_rejects_the_router_without_its_shared_experts_or_scale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = glm4_moe_with_inkling_moe(monkeypatch, tmp_path / "hub")
    analysis = analyse(load_source(str(model)))
    text = analysis.spec.text
    config = make_hf_config(analysis.tiny.config)
    hf = perturb(build_tiny_model(config))
    assert check_spec(text, hf, config) == ()
    router = text.moe.router
    for wrong in (
        dataclasses.replace(router, learned_scale=None),
        dataclasses.replace(router, routed_scaling_factor=1.0),
        dataclasses.replace(router, renormalize=False),
    ):
        moe = dataclasses.replace(text.moe, router=wrong)
        deltas = check_spec(dataclasses.replace(text, moe=moe), hf, config)
        assert [d.what for d in deltas] == [
            "InklingMoE computes something the spec does not describe"
        ]
        assert re.match(r"modeling_inkling\.py:\d+$", deltas[0].where), deltas[0].where


def test_automodel_refuses_router_weighted_shared_experts_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = glm4_moe_with_inkling_moe(monkeypatch, tmp_path / "hub")
    options = NewOptions(
        model=str(model), treat_as_new=True, out=tmp_path / "out", target="automodel"
    )
    with pytest.raises(UnsupportedFeatureError) as raised:
        onboard_new(options)
    items = raised.value.items
    assert any("shared experts weighted by the router" in item for item in items), items
    assert any("learned scale of the routing weights (global_scale)" in item for item in items)
    assert not (tmp_path / "out").exists()
