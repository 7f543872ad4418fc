"""BERT's module tree read as a decoder (BertGeneration's causal LM, from the backlog: mobius
0.1.0 lacks bert-generation). Its layers sit under ``bert.encoder.layer``, its embeddings add
learned positions and normalise them in one module, each layer's attention and MLP are split
across ``attention.self`` / ``attention.output`` and ``intermediate`` / ``output``, whose modules
add the residual and normalise the sum, and its head wraps the vocabulary linear with a tied bias.
The split-layer table (analysis/split_layers.py) joins the parts; the spec check proves the
reading; generated mobius code passes parity with zero edits and fails it with the embedding
norm left out, with the norms moved before the residual add, or with a norm's rename dropped.

The config is transformers' default BertGeneration config (is_decoder False, which onboard's
tiny config sets: the causal LM attends causally only with it). The generated code is causal
and so refuses is_decoder False, which HF runs as an encoder attending both ways.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from onboard.analysis.layout import llama_view
from onboard.analysis.spec_check import check_spec
from onboard.analysis.split_layers import BERT_TREE, split_renames
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius import _import_file
from onboard.tiny_model import build_tiny_model, perturb
from tests.targets.mobius.checks import assert_default_checks_pass, onboarded_from_backlog, statuses
from tests.targets.mobius.sabotage import parity_with

EMBED_NORM = "hidden_states = self.embed_norm(op, hidden_states)"
ATTN_ADD = (
    "hidden_states = op.Add(residual, attn_output)\n"
    "        hidden_states = self.attn_norm(op, hidden_states)\n"
)
# the norm of the attention's output, before the add: a post-norm layer, not BERT's
ATTN_PRE_ADD = "hidden_states = op.Add(residual, self.attn_norm(op, attn_output))\n"
MLP_NORM_RENAME = '(".output.LayerNorm.", ".mlp_norm."),'


@pytest.fixture(scope="module")
def bert_generation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("bert-generation", tmp_path_factory.mktemp("hub"))


def test_split_renames_apply_the_longer_path_first() -> None:
    """``output.dense`` ends ``attention.output.dense``: applied first, it would rename the
    attention's output projection as the MLP's."""
    renames = split_renames(BERT_TREE)
    order = [old for old, _ in renames]
    assert order.index(".attention.output.dense.") < order.index(".output.dense.")
    assert order.index(".attention.output.LayerNorm.") < order.index(".output.LayerNorm.")
    assert dict(renames)[".attention.self."] == ".self_attn."


def test_tied_aliases_are_left_out_of_the_in_memory_layout() -> None:
    """transformers saves a tied tensor once (lm_head.bias, not lm_head.decoder.bias): the
    in-memory state a conversion is compared on holds it once too; other names stay."""
    import torch

    from onboard.targets.mobius.parity import without_tied_aliases

    bias, other = torch.zeros(4), torch.ones(4)
    state = {"lm_head.bias": bias, "lm_head.decoder.bias": bias, "mlp.experts": other}
    kept = without_tied_aliases(state, {"lm_head.bias": bias})
    assert sorted(kept) == ["lm_head.bias", "mlp.experts"]


def test_spec_check_proves_the_bert_tree(bert_generation: Path) -> None:
    """Read with no delta: learned positions, a norm of the embeddings, norms of the residual
    sums, no final norm, a head bias; the interpreter names the view's blocks when the embedding
    norm is left out or the norms are placed before the residual add."""
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(bert_generation)))
    assert analysis.spec.unresolved == ()
    assert analysis.tiny.config["is_decoder"] is True
    text = analysis.spec.text
    assert text.norm.placement == "post_residual"
    assert dict(text.norm.names) == {"attn_add": "attn_norm", "mlp_add": "mlp_norm"}
    assert text.embedding_norm and text.positions is not None and text.positions.kind == "learned"
    assert (text.final_norm, text.lm_head_bias) == (False, True)
    renames = dict(analysis.spec.weights.renames)
    assert renames["bert.encoder.layer."] == "model.layers."
    assert renames["bert.embeddings.LayerNorm."] == "model.embed_norm."
    assert renames["bert.embeddings.position_embeddings."] == "model.embed_positions."
    assert renames["lm_head.decoder."] == "lm_head."
    config = make_hf_config(analysis.tiny.config)
    model = llama_view(perturb(build_tiny_model(config))).model
    assert check_spec(text, model, config) == ()
    pre_residual = (("attn_out", "attn_norm"), ("mlp_out", "mlp_norm"))  # norms of each block
    for wrong in (
        {"embedding_norm": False},
        {"norm": dataclasses.replace(text.norm, placement="post", names=pre_residual)},
    ):
        deltas = check_spec(dataclasses.replace(text, **wrong), model, config)
        assert deltas, wrong


def test_generated_code_refuses_the_encoder_use(bert_generation: Path, tmp_path: Path) -> None:
    """is_decoder False (the default config's, and BERT encoder checkpoints'): HF's causal LM
    then attends both ways, the generated one never does. Its config refuses it with a
    message, onboard says so, and is_decoder True, what parity proves, builds."""
    from transformers import BertGenerationConfig

    options = NewOptions(model=str(bert_generation), out=tmp_path / "out", parity=False)
    result = onboard_new(options)
    module = _import_file(result.root / result.plan.model_file)
    config_class = getattr(module, result.plan.model_class).config_class
    with pytest.raises(ValueError, match="is_decoder=True only: without it HF's model attends"):
        config_class.from_transformers(BertGenerationConfig(is_decoder=False))
    decoder = config_class.from_transformers(BertGenerationConfig(is_decoder=True))
    assert decoder.hidden_size == BertGenerationConfig().hidden_size
    # the spec records the value parity proves, with the HF line that reads it
    guard = next(f for f in result.analysis.spec.flags if f.key == "is_decoder")
    assert (guard.value, guard.understood) == (True, False)
    assert guard.evidence and guard.evidence[0].where.startswith("modeling_bert_generation.py:")
    assert any("sets is_decoder=False" in notice for notice in result.source.notices)


@pytest.mark.slow
def test_bert_generation_generates_into_mobius_with_zero_edits(
    bert_generation: Path, tmp_path: Path
) -> None:
    result = onboarded_from_backlog(bert_generation, tmp_path / "out")
    assert_default_checks_pass(result.parity)
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert "self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=True)" in text
    # the embeddings left unnormalised: every weight placed but embed_norm's, the logits wrong
    dropped = parity_with(result, EMBED_NORM, "hidden_states = hidden_states")
    checks = statuses(dropped)
    assert checks["prefill"] is Status.FAIL, checks
    # the attention's norm before the residual add (post-norm, not BERT's norm of the sum)
    module.write_text(text)
    moved = parity_with(result, ATTN_ADD, ATTN_PRE_ADD)
    checks = statuses(moved)
    assert checks["weights"] is Status.PASS, checks
    assert checks["prefill"] is Status.FAIL, checks
    # the MLP norm's rename dropped: its checkpoint tensors fill nothing
    module.write_text(text)
    unmapped = parity_with(result, MLP_NORM_RENAME, "")
    assert statuses(unmapped)["weights"] is Status.FAIL
    assert any("LayerNorm" in p for p in unmapped.weights.problems), unmapped.weights.problems
