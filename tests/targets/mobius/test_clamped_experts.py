"""MiniMax-M3's experts (modeling_minimax_m3_vl.py MiniMaxM3VLExperts._apply_gate, and its shared
expert's forward): a clamped sigmoid GLU over one fused gate_up projection, gate the first half,
``(up.clamp(+-L) + 1) * g * sigmoid(alpha * g)``, ``g = gate.clamp(max=L)``, L and alpha from
``config.swiglu_limit`` / ``config.swiglu_alpha``. The tiny config's limit is shrunk so the
perturbed model's gate and up values cross it. From the backlog (mobius 0.1.0 lacks
minimax_m3_vl_text) it generates with zero edits; a spec without the clamp, the + 1 or with
interleaved rows fails the spec check, and generated experts computing a plain SwiGLU, no clamp,
no + 1 or an interleaved split fail parity. Dense layers (config.mlp_layer_types) compute the
same GLU at config.dense_intermediate_size. AutoModel refuses the experts by name."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.spec import ClampedGluSpec
from onboard.targets.automodel.propose import blockers as automodel_blockers
from onboard.targets.mobius.plan import STYLE
from onboard.tiny_model import build_tiny_model, perturb
from tests.new_types import default_config_dir
from tests.targets.mobius.checks import onboarded_from_backlog
from tests.targets.mobius.sabotage import parity_with

HALVES = "        gate, up = op.Split(gate_up, axis=-1, num_outputs=2, _outputs=2)\n"
INTERLEAVED = (
    "        pairs = op.Reshape(gate_up, op.Concat(op.Shape(gate_up, end=-1), [-1, 2], axis=0))\n"
    "        gate, up = op.Split(pairs, axis=-1, num_outputs=2, _outputs=2)\n"
    "        gate, up = op.Squeeze(gate, [-1]), op.Squeeze(up, [-1])\n"
)
CLAMPS = (
    "        gate = op.Min(gate, self.limit)\n        up = op.Clip(up, -self.limit, self.limit)\n"
)
GLU = (
    "        glu = op.Mul(gate, op.Sigmoid(op.Mul(gate, self.alpha)))\n"
    "        return self.down_proj(op, op.Mul(op.Add(up, 1.0), glu))\n"
)
SWIGLU = "        return self.down_proj(op, op.Mul(op.Mul(gate, op.Sigmoid(gate)), up))\n"


@pytest.fixture(scope="module")
def minimax(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return default_config_dir("minimax_m3_vl_text", tmp_path_factory.mktemp("hub"))


def _crossing(model: Any, limit: float) -> dict[str, tuple[float, float]]:
    """Per experts module of the perturbed tiny model on a prompt: the share of gate values
    above the limit and of up values outside it."""
    import torch

    from onboard.analysis.moe import expert_matrices

    inputs: dict[str, Any] = {}
    hooks = [
        module.register_forward_hook(lambda m, args, out, n=name: inputs.setdefault(n, args[0]))
        for name, module in model.named_modules()
        if name.endswith((".experts", ".shared_experts"))
    ]
    ids = torch.randint(
        0, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        model(ids)
    for hook in hooks:
        hook.remove()
    shares = {}
    for name, x in inputs.items():
        module = model.get_submodule(name)
        if name.endswith(".shared_experts"):
            fused = [module.gate_up_proj(x)]
        else:
            fused = [x @ expert_matrices(module, e)[0].T for e in range(module.num_experts)]
        gate, up = torch.cat(fused).chunk(2, dim=-1)
        shares[name] = (
            (gate > limit).float().mean().item(),
            (up.abs() > limit).float().mean().item(),
        )
    return shares


def test_clamped_experts_are_read_and_proved(minimax: Path) -> None:
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(minimax)))
    spec = analysis.spec
    assert spec.unresolved == ()
    glu = ClampedGluSpec(7.0, 1.702, 1.0, "halves", "swiglu_limit", "swiglu_alpha")
    assert spec.text.moe.glu == glu
    assert spec.text.moe.shared.glu == glu
    assert spec.text.moe.shared.projections == (("gate_up", "gate_up_proj"), ("down", "down_proj"))
    assert spec.text.moe.router.routed_scaling_factor == 2.0  # the block scales the routed sum
    evidence = spec.evidence_for("text.moe.glu")
    assert any(re.fullmatch(r"modeling_minimax_m3_vl\.py:\d+", e.where) for e in evidence)
    assert evidence[0].detail.startswith("MiniMaxM3VLExperts: ")
    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    # the clamp bites: some gate and up values of every experts module lie past the tiny limit,
    # most within it
    limit = config.swiglu_limit
    assert limit < 1.0
    for name, (gate, up) in _crossing(model, limit).items():
        assert 0.02 < gate < 0.5 and 0.02 < up < 0.8, (name, gate, up)
    text = spec.text
    assert check_spec(text, model, config) == ()
    for wrong in (
        dataclasses.replace(glu, limit=math.inf, limit_key=None),  # no clamp
        dataclasses.replace(glu, up_offset=0.0),  # no + 1 on up
        dataclasses.replace(glu, layout="interleaved"),
    ):
        shared = dataclasses.replace(text.moe.shared, glu=wrong)
        broken = dataclasses.replace(
            text, moe=dataclasses.replace(text.moe, glu=wrong, shared=shared)
        )
        deltas = check_spec(broken, model, config)
        assert any("computes something" in d.what for d in deltas), (wrong, deltas)
    # AutoModel's experts compute act(gate) * up: refused by name, with the HF line
    wanted = re.compile(r"clamped GLU .*\(MiniMaxM3VLExperts at modeling_minimax_m3_vl\.py:\d+\)")
    assert any(wanted.search(b) for b in automodel_blockers(spec)), automodel_blockers(spec)


@pytest.mark.slow
def test_clamped_experts_generate_and_fail_when_computed_otherwise(
    minimax: Path, tmp_path: Path
) -> None:
    result = onboarded_from_backlog(minimax, tmp_path / "out")
    assert {c.status for c in result.parity.checks} <= {Status.PASS, Status.SKIP}
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename="minimax_m3_vl_text.py", style=STYLE) == ""
    assert HALVES + CLAMPS + GLU in text
    for old, new in (
        (CLAMPS + GLU, SWIGLU),  # a plain SwiGLU
        (CLAMPS, ""),  # no clamp
        (GLU, GLU.replace("op.Add(up, 1.0)", "up")),  # no + 1 on up
        (HALVES, INTERLEAVED),  # gate and up from alternate rows
    ):
        module.write_text(text)
        broken = parity_with(result, old, new)
        checks = {c.name: c.status for c in broken.checks if c.provider == "default"}
        assert checks["weights"] is Status.PASS, (new, checks)
        assert checks["prefill"] is Status.FAIL, (new, checks)


@pytest.fixture(scope="module")
def minimax_dense(minimax: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default config with its first layer dense, as config.mlp_layer_types says."""
    config = json.loads((minimax / "config.json").read_text())
    count = config["num_hidden_layers"]
    config["mlp_layer_types"] = ["dense"] + ["sparse"] * (count - 1)
    folder = tmp_path_factory.mktemp("dense") / "minimax_m3_vl_text"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.slow
def test_dense_layers_compute_the_clamped_glu(minimax_dense: Path, tmp_path: Path) -> None:
    result = onboarded_from_backlog(minimax_dense, tmp_path / "out")
    mlp = result.analysis.spec.text.mlp
    glu = ClampedGluSpec(7.0, 1.702, 1.0, "halves", "swiglu_limit", "swiglu_alpha")
    assert (mlp.kind, mlp.width_expr, mlp.glu) == (
        "fused_gate_up",
        "config.dense_intermediate_size",
        glu,
    )
    text = (result.root / result.plan.model_file).read_text()
    assert "self.mlp = MiniMaxM3VLClampedGluMLP(config)" in text
    assert "intermediate_size=config.dense_intermediate_size" in text
    config = make_hf_config(result.analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    spec = result.analysis.spec.text
    assert check_spec(spec, model, config) == ()
    plain = dataclasses.replace(spec, mlp=dataclasses.replace(mlp, glu=None))
    deltas = check_spec(plain, model, config)
    assert any("MiniMaxM3VLDenseMLP computes something" in d.what for d in deltas), deltas
