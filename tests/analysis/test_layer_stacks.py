"""HRM, from the backlog: its checkpoint's fused tensors are read as transformers cuts them, and
its two stacks of layers run in a recurrence are read from the forward (StackRecurrenceSpec),
proved by the spec check, and the spec check fails when any part of the recurrence is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.analysis.layer_stacks import layer_stacks, read_recurrence, stack_calls
from onboard.analysis.load_splits import read_load_splits
from onboard.checkpoint import tensor_shapes
from onboard.errors import UnsupportedFeatureError
from onboard.source import SourceFile


def _hrm():
    from transformers import HrmTextConfig, HrmTextForCausalLM

    config = HrmTextConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
        num_attention_heads=2, head_dim=16, H_cycles=2, L_cycles=2,
    )  # fmt: skip
    return HrmTextForCausalLM(config)


def _modeling() -> SourceFile:
    import transformers.models.hrm_text.modeling_hrm_text as modeling

    return SourceFile.read(Path(modeling.__file__))


def test_hrm_fused_tensors_are_cut_gate_first() -> None:
    """transformers cuts attn.gqkv_proj into the output gate, q, k, v (in that order) and
    mlp.gate_up_proj into gate, up: proved by value on the saved tensors."""
    model = _hrm()
    splits = read_load_splits(model, tensor_shapes(model))
    assert {s.fused: s.parts for s in splits} == {
        "mlp.gate_up_proj.weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
        "attn.gqkv_proj.weight": (
            "self_attn.gate_proj.weight",
            "self_attn.q_proj.weight",
            "self_attn.k_proj.weight",
            "self_attn.v_proj.weight",
        ),
    }
    assert all(s.where.startswith("conversion_mapping.py:") for s in splits)


def test_hrm_stacks_and_their_calls_in_cycles_are_found() -> None:
    model = _hrm()
    assert layer_stacks(model) == ("model.L_module.layers", "model.H_module.layers")
    calls = stack_calls([_modeling()], "HrmTextModel", ("L_module", "H_module"))
    assert [(c.stack, c.loops) for c in calls] == [
        ("L_module", ("range(self.config.H_cycles)", "range(self.config.L_cycles)")),
        ("H_module", ("range(self.config.H_cycles)",)),
    ]
    source = _modeling().text.splitlines()
    for call in calls:
        line = int(call.where.rpartition(":")[2])
        assert f"self.{call.stack}(" in source[line - 1]


def test_hrm_recurrence_is_read_with_its_evidence() -> None:
    found = read_recurrence(_hrm(), [_modeling()])
    assert found is not None
    spec = found.spec
    assert spec.stacks == ("L_module", "H_module")
    assert (spec.outer_key, spec.inner_key) == ("H_cycles", "L_cycles")
    assert (spec.layers_key, spec.initial, spec.stack_norm) == (
        "num_layers_per_stack",
        "z_L_init",
        "final_norm",
    )
    assert all(e.where for e in found.evidence)
    assert any(e.where.startswith("modeling_hrm_text.py:") for e in found.evidence)
    # modeling_hrm_text.py:516/529: slot = (h * (L_cycles + 1) + c) * num_layers_per_stack
    assert spec.calls(2, 2) == ((0, 0), (0, 1), (1, 2), (0, 3), (0, 4), (1, 5))


def test_other_stacks_in_cycles_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two stacks whose calls are not HRM's shape (here: found nowhere) stay refused."""
    import onboard.analysis.layer_stacks as stacks

    monkeypatch.setattr(stacks, "stack_calls", lambda *_: ())
    with pytest.raises(UnsupportedFeatureError, match=r"HrmTextModel runs 2 stacks"):
        read_recurrence(_hrm(), [_modeling()])


def test_one_stack_is_not_refused() -> None:
    from tests.analysis.test_day0_regressions import _llama

    model = _llama("OnboardTestOneStackForCausalLM", [])
    assert layer_stacks(model) == ("model.layers",)
    assert read_recurrence(model, []) is None


@pytest.fixture(scope="module")
def hrm_analysis(tmp_path_factory: pytest.TempPathFactory):
    """transformers' default HRM config, analysed: the spec and its tiny model."""
    from onboard.analysis import analyse
    from onboard.source import load_source
    from tests.new_types import default_config_dir

    folder = default_config_dir("hrm_text", tmp_path_factory.mktemp("hrm"))
    return analyse(load_source(str(folder)))


def _check(analysis, text=None):
    from onboard.analysis.layout import llama_view
    from onboard.analysis.spec_check import find_mismatches
    from onboard.hf_config import make_hf_config
    from onboard.tiny_model import build_tiny_model, perturb

    tiny_config = make_hf_config(analysis.tiny.config)
    model = llama_view(build_tiny_model(tiny_config)).model
    return find_mismatches(text or analysis.spec.text, perturb(model), tiny_config)


@pytest.mark.slow
def test_the_backlog_row_reads_the_recurrence(hrm_analysis) -> None:
    """The default config: the recurrence and the embedding scale read, the spec proved, on a
    tiny config whose per-stack layer count and cycles make the KV-cache slot count."""
    text = hrm_analysis.spec.text
    assert hrm_analysis.spec.unresolved == ()
    assert text.recurrence is not None
    assert text.scale_at("embedding").key == "embedding_scale"
    tiny = hrm_analysis.tiny.config
    assert (tiny["num_layers_per_stack"], tiny["H_cycles"], tiny["L_cycles"]) == (1, 2, 3)
    assert tiny["num_hidden_layers"] == 8
    assert _check(hrm_analysis) == []
    from onboard.analysis.features import features

    found = {f.name: f for f in features(hrm_analysis.spec)}["layers.recurrence"]
    assert found.value == "L_module x L_cycles + H_module, x H_cycles"
    assert any(e.where.startswith("modeling_hrm_text.py:") for e in found.evidence)


@pytest.mark.slow
@pytest.mark.parametrize(
    "sabotage",
    ["no recurrence", "cycle keys swapped", "stacks swapped", "one inner call short"],
)
def test_a_wrong_recurrence_fails_the_spec_check(hrm_analysis, sabotage, monkeypatch) -> None:
    import dataclasses

    from onboard.spec import StackRecurrenceSpec

    text = hrm_analysis.spec.text
    spec = text.recurrence
    wrong = {
        "no recurrence": None,
        "cycle keys swapped": dataclasses.replace(
            spec, outer_key=spec.inner_key, inner_key=spec.outer_key
        ),
        "stacks swapped": dataclasses.replace(spec, stacks=spec.stacks[::-1]),
        "one inner call short": spec,
    }[sabotage]
    if sabotage == "one inner call short":
        calls = StackRecurrenceSpec.calls
        monkeypatch.setattr(StackRecurrenceSpec, "calls", lambda self, o, i: calls(self, o, i - 1))
    mismatches = _check(hrm_analysis, dataclasses.replace(text, recurrence=wrong))
    assert mismatches, sabotage
    assert any(m.max_abs > 1e-3 for m in mismatches)


@pytest.mark.slow
@pytest.mark.parametrize("sabotage", ["input sum left out", "z_L_init ignored"])
def test_a_recurrence_run_wrong_fails_the_spec_check(hrm_analysis, sabotage, monkeypatch) -> None:
    """The interpreter's own run of the recurrence, left without the sum of states or with a
    zero initial state (the tiny model's z_L_init is perturbed away from HF's zeros)."""
    import onboard.analysis.spec_check_stacks as run

    if sabotage == "input sum left out":
        monkeypatch.setattr(run, "stack_input", lambda own, _other: own)
    else:
        monkeypatch.setattr(run, "initial_state", lambda _d, _s, e: e * 0)
    assert _check(hrm_analysis)


@pytest.mark.slow
def test_automodel_refuses_the_recurrence_by_name(hrm_analysis) -> None:
    from onboard.targets.automodel.propose import blockers as automodel_blockers
    from onboard.targets.mobius.propose import blockers as mobius_blockers

    found = [b for b in automodel_blockers(hrm_analysis.spec) if "text.recurrence" in b]
    assert len(found) == 1
    assert "L_cycles" in found[0] and "z_L_init" in found[0]
    assert mobius_blockers(hrm_analysis.spec) == ()  # generated: tests/targets/mobius
