"""HF's dropouts in train mode in generated AutoModel code: placed from HF's source, dropped
where HF drops, refused where the generated code has no such dropout, and caught by the
generated train-mode test when the code leaves one out."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import CONFIG_MAPPING

from onboard.targets.automodel import dropout as dropout_module
from onboard.targets.automodel.dropout import Dropouts, Written, dropouts
from tests.targets.automodel.sabotage import (
    assert_generated_tests_catch,
    generate_default,
    run_generated_tests,
)


def _placed(model_type: str, prefix: str, written: bool = True) -> Dropouts:
    """The dropouts of HF's ``model_type`` causal LM, its attention and base model written by
    the generated code (as for a Llama-shaped type) when ``written``."""
    classes = ("ForCausalLM", "Model", "DecoderLayer", "Attention", "MLP")
    modules = {f"m{i}": f"{prefix}{c}" for i, c in enumerate(classes)}
    tiny = CONFIG_MAPPING[model_type]().to_dict()
    place = Written(
        attention=f"{prefix}Attention" if written else "",
        attention_key="attention_dropout",
        base_model=f"{prefix}Model" if written else "",
        replaced=((f"{prefix}ForCausalLM", "the generated causal LM"),),
    )
    module = f"transformers.models.{model_type}.modeling_{model_type}"
    return dropouts(module, f"modeling_{model_type}.py", modules, tiny, place)


def _sites(found: Dropouts) -> set[tuple[str, str, str]]:
    return {(r.key, r.reader, r.site) for r in found.reads}


def test_starcoder2_drops_output_and_embeddings() -> None:
    found = _placed("starcoder2", "Starcoder2")
    assert _sites(found) == {
        ("embedding_dropout", "Starcoder2Model", "embeddings"),
        ("attention_dropout", "Starcoder2Attention", "attention"),
        ("residual_dropout", "Starcoder2Attention", "attention_output"),
        ("residual_dropout", "Starcoder2MLP", "kept"),
    }
    assert found.attention_output == "residual_dropout"
    assert found.embeddings == "embedding_dropout"
    assert found.honoured == ("embedding_dropout", "attention_dropout", "residual_dropout")
    assert all(r.where.startswith("modeling_starcoder2.py:") for r in found.reads)


def test_phi_embeddings_through_its_dropout_module() -> None:
    found = _placed("phi", "Phi")
    assert found.embeddings == "embd_pdrop" and not found.attention_output
    assert set(found.honoured) == {"embd_pdrop", "resid_pdrop", "attention_dropout"}


def test_a_read_in_a_written_forward_not_recognised_is_refused() -> None:
    """Written forwards whose dropouts the form here does not recognise: not honoured."""
    kept = _placed("starcoder2", "Starcoder2", written=False)  # HF's forwards: all drop
    assert {r.site for r in kept.reads} == {"kept"} and len(kept.honoured) == 3
    found = dropouts(
        "transformers.models.starcoder2.modeling_starcoder2",
        "modeling_starcoder2.py",
        {"m": "Starcoder2Model", "a": "Starcoder2Attention"},
        CONFIG_MAPPING["starcoder2"]().to_dict(),
        Written(attention="Starcoder2Attention", base_model="Starcoder2Model"),
    )
    # a written attention that passes no attention_dropout: refused, where the recognised
    # output and embeddings' dropouts are written
    assert found.not_honoured == ("attention_dropout",)
    assert set(found.honoured) == {"embedding_dropout", "residual_dropout"}


def test_a_key_hf_refuses_is_left_out() -> None:
    """DiffLlama's attention raises for attention_dropout > 0: nothing to match in training."""
    found = _placed("diffllama", "DiffLlama")
    assert found.hf_refuses == ("attention_dropout",)
    assert not found.honoured and not found.not_honoured


# What each dropout's generated test must catch: (model type, edit of the generated model, the
# tests selected). The clean generated tests pass first.
SABOTAGE = {
    "qwen3-attention": (
        "qwen3",
        "dropout=self.attention_dropout if self.training else 0.0,",
        "dropout=0.0,",
        "test_dropout_matches_hf_in_training",
    ),
    "qwen3_moe-attention": (
        "qwen3_moe",
        "dropout=self.attention_dropout if self.training else 0.0,",
        "dropout=0.0,",
        "test_dropout_matches_hf_in_training",
    ),
    "starcoder2-output": (
        "starcoder2",
        "p=self.residual_dropout, training=self.training",
        "p=self.attention_dropout, training=self.training",
        "test_dropout_matches_hf_in_training and residual_dropout",
    ),
    "starcoder2-embeddings": (
        "starcoder2",
        "p=self.config.embedding_dropout, training=self.training",
        "p=0.0, training=self.training",
        "test_dropout_matches_hf_in_training and embedding_dropout",
    ),
    "phi-embeddings": (
        "phi",
        "p=self.config.embd_pdrop, training=self.training",
        "p=self.config.embd_pdrop, training=False",
        "test_dropout_matches_hf_in_training and embd_pdrop",
    ),
}


@pytest.mark.parametrize(
    "how",
    [
        "qwen3-attention",
        pytest.param("qwen3_moe-attention", marks=pytest.mark.slow),
        pytest.param("starcoder2-output", marks=pytest.mark.slow),
        pytest.param("starcoder2-embeddings", marks=pytest.mark.slow),
        pytest.param("phi-embeddings", marks=pytest.mark.slow),
    ],
)
def test_generated_tests_catch_a_dropout_left_out(tmp_path: Path, how: str) -> None:
    """The train-mode test passes on the generated code and fails once it drops with another
    probability than HF's (0, or another key's) at one site."""
    model_type, old, new, keyword = SABOTAGE[how]
    out, result = generate_default(model_type, tmp_path)
    assert_generated_tests_catch(out, out / result.plan.model_file, old, new, keyword)


@pytest.mark.slow
def test_a_dropout_not_dropped_is_refused(tmp_path: Path, monkeypatch) -> None:
    """Starcoder2 with its embeddings' dropout unrecognised: the generated model does not drop
    there, so it refuses the key non-zero (its generated test says so) and the train-mode test
    leaves it out; the other dropouts still match HF's."""
    monkeypatch.setattr(dropout_module, "_embedding_key", lambda module, base_model: None)
    out, result = generate_default("starcoder2", tmp_path)
    model = (out / result.plan.model_file).read_text()
    assert "UNSUPPORTED_SWITCHES = ('embedding_dropout',)" in model.replace('"', "'")
    assert "config.embedding_dropout" not in model.split("UNSUPPORTED_SWITCHES")[-1]
    ran = run_generated_tests(
        out, "test_dropout_matches_hf_in_training or test_not_dropped_is_refused"
    )
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "4 passed" in ran.stdout.splitlines()[-1]  # 3 train-mode cases, 1 refusal
