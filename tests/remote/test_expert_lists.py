"""brook keeps its experts as a ModuleList of per-expert MLPs ``w2(silu(w1(x)) * w3(x))``, a shared
expert of the same class and a bare-linear gate routed in the block's forward (2024 MoE remote
code): read as stacked experts, their roles told by values, checked, generated for mobius and
proved; a list of MLPs that are neither gated nor plain is named, with why."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from onboard.analysis.expert_lists import (
    MLPRoles,
    StackedExperts,
    StackedGatedExperts,
    block_routing,
    mlp_roles,
    stack_expert_lists,
)
from tests.remote.runs import trusted_new
from tests.test_cli import onboard

BROOK = Path(__file__).parents[1] / "fixtures" / "remote" / "brook-tiny"
W1_W3_W2 = (("gate", "w1"), ("up", "w3"), ("down", "w2"))


@pytest.fixture(scope="module")
def brook():
    """brook analysed with its own classes registered for this module's tests, then unregistered
    (tests/remote/test_fixture_files.py loads brook through transformers' own remote-code path)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    from onboard.analysis import analyse
    from onboard.remote_code import register_remote_classes
    from onboard.source import load_source

    source = load_source(str(BROOK))
    model_class = register_remote_classes(source.config, source.remote_files)
    try:
        yield analyse(source, run_remote_code=True)
    finally:
        CONFIG_MAPPING._extra_content.pop("brook", None)
        MODEL_FOR_CAUSAL_LM_MAPPING._extra_content.pop(model_class.config_class, None)


def _tiny_model(analysis, *, stacked: bool = True):
    """The analysis' tiny brook, perturbed as the spec check sees it, and its HF config."""
    from onboard.hf_config import make_hf_config
    from onboard.tiny_model import build_tiny_model, perturb

    hf_config = make_hf_config(analysis.tiny.config)
    model = build_tiny_model(hf_config)
    return perturb(stack_expert_lists(model) if stacked else model), hf_config


def _moe_blocks(model):
    return [layer.mlp for layer in model.model.layers if hasattr(layer.mlp, "experts")]


def test_the_spec_reads_the_experts_roles(brook) -> None:
    spec = brook.spec
    assert spec.unresolved == ()
    moe = spec.text.moe
    assert (moe.num_experts, moe.top_k, moe.intermediate_size) == (4, 2, 32)
    assert moe.expert_leaves == W1_W3_W2 and moe.activation == "silu" and not moe.plain
    assert moe.dense_rule == "first_k_dense_replace"
    router = moe.router
    assert (router.scoring, router.order, router.renormalize) == ("softmax", "softmax_topk", True)
    assert moe.shared.projections == W1_W3_W2
    assert (moe.shared.intermediate_size, moe.shared.gated, moe.shared.name) == (
        48,
        False,
        "shared_expert",
    )
    experts = [e.detail for e in dict(spec.evidence)["text.moe.experts"]]
    assert "4 x BrookMLP: w2(silu(w1) * w3), read as stacked" in experts
    routed = dict(spec.evidence)["text.moe.router"][0]
    assert "routed in the block's forward (modeling_brook.py:135)" in routed.detail


def test_the_checkpoint_keeps_its_names(brook) -> None:
    """The stacked layout is computed; nothing is renamed in the checkpoint saved."""
    names = {name for name, _ in brook.probe.disk_tensors}
    assert "model.layers.1.mlp.experts.3.w2.weight" in names
    assert "model.layers.1.mlp.shared_expert.w1.weight" in names
    assert not any("gate_up_proj" in name or "down_proj" in name for name in names)


def test_the_stacked_view_follows_its_children(brook) -> None:
    model, _ = _tiny_model(brook)
    experts = _moe_blocks(model)[0].experts
    assert isinstance(experts, StackedGatedExperts)
    width = experts[0].w1.out_features
    assert experts.gate_up_proj.shape == (4, 2 * width, experts[0].w1.in_features)
    with torch.no_grad():
        experts[2].w3.weight.add_(1.0)
    assert torch.equal(experts.gate_up_proj[2, width:], experts[2].w3.weight)
    assert torch.equal(experts.down_proj[1], experts[1].w2.weight)


def test_the_spec_check_passes_only_with_the_right_roles(brook) -> None:
    from onboard.analysis.spec_check import find_mismatches

    model, hf_config = _tiny_model(brook)
    text = brook.spec.text
    assert find_mismatches(text, model, hf_config) == []

    for block in _moe_blocks(model):  # gate and up swapped in the view
        experts = block.experts
        block.experts = StackedGatedExperts(list(experts), MLPRoles("w3", "w1", "w2", "silu"))
    assert find_mismatches(text, model, hf_config)
    for block in _moe_blocks(model):
        block.experts = StackedGatedExperts(list(block.experts), MLPRoles("w1", "w3", "w2", "silu"))
    assert find_mismatches(text, model, hf_config) == []


@pytest.mark.parametrize(
    "shared",
    [
        {"projections": (("gate", "w3"), ("up", "w1"), ("down", "w2"))},
        None,
    ],
    ids=["shared-gate-and-up-swapped", "shared-expert-dropped"],
)
def test_the_spec_check_fails_without_the_shared_expert_as_read(brook, shared) -> None:
    from onboard.analysis.spec_check import find_mismatches

    model, hf_config = _tiny_model(brook)
    text = brook.spec.text
    moe = text.moe
    wrong = dataclasses.replace(moe.shared, **shared) if shared else None
    found = find_mismatches(
        dataclasses.replace(text, moe=dataclasses.replace(moe, shared=wrong)), model, hf_config
    )
    assert found  # runs, and differs
    assert "model.layers.1.mlp" in {m.module for m in found}  # the tiny model's MoE layer


def test_without_the_stacked_view_the_spec_cannot_hold(brook) -> None:
    from onboard.analysis.spec_check import find_mismatches

    model, hf_config = _tiny_model(brook, stacked=False)
    assert find_mismatches(brook.spec.text, model, hf_config) != []


def test_the_block_routing_is_the_gates_softmax_top_k(brook) -> None:
    model, _ = _tiny_model(brook)
    block = _moe_blocks(model)[0]
    hidden = torch.randn(16, block.gate.in_features, generator=torch.Generator().manual_seed(5))
    weights, indices = block_routing(block, hidden, 2)
    probs = torch.softmax(block.gate(hidden), dim=-1)
    top, chosen = probs.topk(2, dim=-1)
    assert torch.equal(indices, chosen)
    assert torch.allclose(weights, top / top.sum(-1, keepdim=True), atol=1e-6)
    assert all(type(e).__name__ == "BrookMLP" for e in block.experts)  # put back


class _Gated(torch.nn.Module):
    def __init__(self, gate: str, up: str, down: str, *, plus: bool = False, bias: bool = False):
        super().__init__()
        self.names, self.plus = (gate, up, down), plus
        setattr(self, gate, torch.nn.Linear(8, 6, bias=bias))
        setattr(self, up, torch.nn.Linear(8, 6, bias=False))
        setattr(self, down, torch.nn.Linear(6, 8, bias=False))

    def forward(self, x):
        gate, up, down = (getattr(self, n) for n in self.names)
        act = torch.nn.functional.gelu(gate(x))
        return down(act + up(x) if self.plus else act * up(x))


class _Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc_in, self.fc_out = (
            torch.nn.Linear(8, 6, bias=False),
            torch.nn.Linear(6, 8, bias=False),
        )

    def forward(self, x):
        return self.fc_out(torch.relu(self.fc_in(x)))


def test_roles_are_told_by_values_not_names() -> None:
    assert mlp_roles(_Gated("w1", "w3", "w2")) == MLPRoles("w1", "w3", "w2", "gelu")
    assert mlp_roles(_Gated("w3", "w1", "w2")) == MLPRoles("w3", "w1", "w2", "gelu")
    assert mlp_roles(_Plain()) == MLPRoles(None, "fc_in", "fc_out", "relu")


def test_an_mlp_that_is_neither_gated_nor_plain_is_not_read() -> None:
    why = mlp_roles(_Gated("w1", "w3", "w2", plus=True))
    assert isinstance(why, str) and why.startswith("computes no down(act(gate) * up)")
    assert "w1 (6, 8), w3 (6, 8), w2 (8, 6)" in why
    assert mlp_roles(_Gated("w1", "w3", "w2", bias=True)) == (
        "learns more than bias-free linear weights (w1.bias)"
    )
    holder = torch.nn.Module()
    holder.experts = torch.nn.ModuleList([_Gated("w1", "w3", "w2", plus=True) for _ in range(2)])
    stack_expert_lists(holder)
    assert type(holder.experts) is torch.nn.ModuleList  # left as it is, for the reader to name


@pytest.mark.slow
def test_brook_passes_into_mobius_with_zero_hand_edits(cli_env, tmp_path) -> None:
    folder = tmp_path / "brook-tiny"
    shutil.copytree(BROOK, folder, ignore=shutil.ignore_patterns("FEATURES.md"))
    report = trusted_new(folder, tmp_path / "out", cli_env)
    assert report["classification"]["kind"] == "moe"
    parity = report["parity"]
    assert parity["passed"]
    default = {c["name"]: c for c in parity["checks"] if c["provider"] == "default"}
    assert {default[n]["status"] for n in ("weights", "prefill", "decode")} == {"pass"}
    assert default["weights"]["detail"] == "34 checkpoint tensors -> 34 parameters"
    model = next((tmp_path / "out").rglob("brook.py")).read_text()
    for old, new in (("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj")):
        assert f'(".shared_expert.{old}.", ".shared_expert.{new}.")' in model
        assert f'(".{old}.", ".{new}.")' in model


_ODD = '''

class BrookOddMLP(BrookMLP):
    """An expert that adds its up projection instead of multiplying by it."""

    def forward(self, x):
        return self.w2(self.act_fn(self.w1(x)) + self.w3(x))
'''


def test_experts_neither_gated_nor_plain_are_named_with_why(cli_env, tmp_path) -> None:
    """Run in a subprocess: the tampered classes are never registered in this one."""
    folder = tmp_path / "brook-tiny"
    shutil.copytree(BROOK, folder, ignore=shutil.ignore_patterns("FEATURES.md"))
    modeling = folder / "modeling_brook.py"
    source = modeling.read_text()
    anchor = "class BrookSparseMoeBlock(nn.Module):"
    source = source.replace(anchor, _ODD.lstrip("\n") + "\n\n" + anchor)
    source = source.replace(
        "[BrookMLP(config, config.moe_intermediate_size)",
        "[BrookOddMLP(config, config.moe_intermediate_size)",
    )
    modeling.write_text(source)
    lines = source.splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith("class BrookOddMLP"))
    line = lines.index("    def forward(self, x):", start) + 1
    run = onboard("inspect", str(folder), "--trust-remote-code", "--json", env=cli_env)
    assert run.returncode == 0, run.stderr
    unresolved = json.loads(run.stdout)["spec"]["unresolved"]
    found = [d for d in unresolved if d["what"].startswith("experts kept as a ModuleList")]
    assert len(found) == 1
    assert found[0]["where"] == f"modeling_brook.py:{line}"
    assert "neither gated (down(act(gate) * up)) nor plain (down(act(up)))" in found[0]["what"]
    assert "computes no down(act(gate) * up) of its linears (w1 (" in found[0]["what"]
    assert found[0]["detail"] == "model.layers.1.mlp.experts: 4 x BrookOddMLP(w1, w3, w2)"


def test_a_stacked_view_runs_its_experts_as_transformers_does(brook) -> None:
    model, _ = _tiny_model(brook)
    experts = _moe_blocks(model)[0].experts
    assert isinstance(experts, StackedExperts)
    hidden = torch.randn(6, experts[0].w1.in_features, generator=torch.Generator().manual_seed(2))
    indices = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]])
    weights = torch.rand(6, 2, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got = experts(hidden, indices, weights)
        want = torch.stack(
            [
                sum(weights[t, s] * experts[int(indices[t, s])](hidden[t]) for s in range(2))
                for t in range(6)
            ]
        )
    assert torch.allclose(got, want, atol=1e-6)


def test_mobius_renames_the_shared_experts_own_names(brook) -> None:
    """A shared expert whose linears are named unlike the routed experts' still loads into the
    generated MLP's gate_proj / up_proj / down_proj; plain experts rename up and down only."""
    from onboard.targets.mobius.design import _renames, renamed

    moe = brook.spec.text.moe
    standard = (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj"))
    spec = dataclasses.replace(
        brook.spec,
        text=dataclasses.replace(
            brook.spec.text, moe=dataclasses.replace(moe, expert_leaves=standard)
        ),
    )
    renames = _renames(spec, None)
    prefix = "model.layers.1.mlp."
    for old, new in (("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj")):
        assert renamed(f"{prefix}shared_expert.{old}.weight", renames) == (
            f"{prefix}shared_expert.{new}.weight"
        )
    assert (
        renamed(f"{prefix}experts.0.up_proj.weight", renames) == f"{prefix}experts.0.up_proj.weight"
    )

    plain = dataclasses.replace(moe, plain=True, expert_leaves=(("up", "fc1"), ("down", "fc2")))
    spec = dataclasses.replace(spec, text=dataclasses.replace(spec.text, moe=plain))
    assert renamed(f"{prefix}experts.3.fc1.weight", _renames(spec, None)) == (
        f"{prefix}experts.3.up_proj.weight"
    )


def test_plain_experts_read_as_stacked_run_as_themselves() -> None:
    from transformers.activations import ACT2FN

    from onboard.analysis.expert_lists import StackedPlainExperts
    from onboard.analysis.moe import _check_experts, expert_layout, routed_output

    holder = torch.nn.Module()
    holder.experts = torch.nn.ModuleList([_Plain() for _ in range(3)])
    experts = stack_expert_lists(holder).experts
    assert isinstance(experts, StackedPlainExperts)
    layout = expert_layout(experts)
    assert (layout.num_experts, layout.width, layout.plain) == (3, 6, True)
    assert getattr(experts, "gate_up_proj", None) is None and experts.up_proj.shape == (3, 6, 8)
    hidden = torch.randn(7, 8, generator=torch.Generator().manual_seed(1))
    indices = torch.tensor([[0, 1], [1, 2], [2, 0], [0, 2], [1, 0], [2, 1], [0, 1]])
    weights = torch.rand(7, 2, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ours = routed_output(experts, hidden, indices, weights, ACT2FN["relu"])
        assert torch.allclose(ours, experts(hidden, indices, weights), atol=1e-6)
    assert _check_experts(experts, layout, "relu", 2, "model.layers.0.mlp") is None
    delta = _check_experts(experts, layout, "silu", 2, "model.layers.0.mlp")  # sabotage
    assert (
        delta is not None and delta.what == "_Plain computes something the spec does not describe"
    )
