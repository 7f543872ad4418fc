"""HF's base model kept whole: a dense type whose module tree is not Llama's (GPT-2's
``transformer.h.*``) gets a causal LM around HF's ``GPT2Model``; an MoE one keeps the refusal.

The sabotage tests break what the generated code owns (the tie, the head's bias, the adapter)
and show the generated tests or the parity run fail.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.codegen import render_template
from onboard.parity.report import Status
from onboard.source import load_source
from onboard.targets.automodel import TARGET
from onboard.targets.automodel.kept_base import keeps_base
from tests.new_types import default_config_dir
from tests.targets.automodel.sabotage import (
    assert_generated_tests_catch,
    generate_default,
    parity_with,
    statuses,
)

TIE = "            self.lm_head.weight = self.transformer.wte.weight\n"


@pytest.fixture(scope="module")
def gpt2_analysis(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("gpt2")
    return analyse(load_source(str(default_config_dir("gpt2", root))))


def test_foreign_tree_keeps_hf_base_for_dense_and_refuses_moe(gpt2_analysis) -> None:
    spec = gpt2_analysis.spec
    assert keeps_base(spec)
    proposal = TARGET.propose(spec, TARGET.open_library(None), treat_as_new=True)
    assert proposal.blockers == ()
    design = TARGET.design(gpt2_analysis, proposal)
    base = design.kept_base
    assert (base.attribute, base.hf_class, base.head, base.embeddings) == (
        "transformer",
        "GPT2Model",
        "lm_head",
        "wte",
    )
    assert design.layout.embeddings_weight == "transformer.wte.weight"
    assert design.ties and not design.lm_head_bias
    # the same tree in an MoE model: its generated layers would own the experts, refused
    moe = replace(spec, kind="moe")
    assert not keeps_base(moe)
    blockers = TARGET.propose(moe, TARGET.open_library(None), treat_as_new=True).blockers
    assert any(b.startswith("HF's module tree under other names") for b in blockers), blockers


def test_kept_base_head_applies_a_logits_multiplier(gpt2_analysis) -> None:
    """No foreign-tree type onboarded so far scales its logits; the head is the Llama shape's,
    shared, so a design with a multiplier renders it after the head, as there."""
    proposal = TARGET.propose(gpt2_analysis.spec, TARGET.open_library(None), treat_as_new=True)
    design = replace(TARGET.design(gpt2_analysis, proposal), logits_multiplier="self.config.scale")
    text = render_template("automodel/model_kept_base.py.j2", d=design, header="test")
    head = text.index("self.lm_head, outputs.last_hidden_state, logits_to_keep")
    assert text.index("        logits = logits * self.config.scale\n") > head


def test_generated_head_that_ignores_the_tie_fails(tmp_path: Path) -> None:
    out, result = generate_default("gpt2", tmp_path)
    model = result.root / result.plan.model_file
    assert_generated_tests_catch(
        out, model, TIE, "            pass\n", "tie_word_embeddings and not untied"
    )


@pytest.mark.slow
def test_generated_head_without_hf_bias_fails(tmp_path: Path) -> None:
    """CodeGen's head has a bias: a head built without it leaves a checkpoint tensor unplaced."""
    _, result = generate_default("codegen", tmp_path)
    broken = statuses(
        parity_with(result, "model.py", "vocab_size, bias=True)", "vocab_size, bias=False)")
    )
    assert broken["weights"] is Status.FAIL, broken


@pytest.mark.slow
def test_adapter_that_drops_a_tensor_fails(tmp_path: Path) -> None:
    _, result = generate_default("gpt2", tmp_path)
    dropping = "        native = {k: v for k, v in hf_state_dict.items() if 'ln_f.bias' not in k}\n"
    broken = parity_with(
        result, "state_dict_adapter.py", "        native = dict(hf_state_dict)\n", dropping
    )
    assert statuses(broken)["weights"] is Status.FAIL, statuses(broken)
