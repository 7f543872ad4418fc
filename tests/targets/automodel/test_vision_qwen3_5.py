"""Qwen3.5's VLM generated into AutoModel with zero hand edits: HF's Qwen3.5 VLM class (the
Qwen3-VL tower without DeepStack) over the hybrid text model the generator writes for
``qwen3_5_text`` (HF's gated DeltaNet layers among full attention).

The text model rotates the first quarter of each head (``partial_rotary_factor`` 0.25) by
interleaved M-RoPE, so the M-RoPE table is as wide as that quarter. Parity prefills three rows
past HF's DeltaNet chunk (64 tokens) and compares the DeltaNet's conv and recurrent states, with
the attention layers' keys and values, after the prefill and every decode step. The configs are
transformers' defaults with what the published checkpoints set (``tests/published_vlms.py``).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding

from onboard.codegen import lint_python
from onboard.errors import UnsupportedFeatureError
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.automodel.plan import STYLE
from onboard.targets.automodel.vision_qwen import defined_at
from tests.published_vlms import published_vlm_dir
from tests.targets.automodel.sabotage import parity_with, statuses
from tests.targets.automodel.test_vision_qwen_vl import SCENARIOS, VISION_TESTS

PACKAGE = "nemo_automodel/components/models/qwen3_5"
# the tiny model's checkpoint: tower, merger, one attention and one DeltaNet text layer, head
TENSORS = 85
PARTIAL = 'dim = int(dim * config.rope_parameters.get("partial_rotary_factor", 1.0))'


def _new(model_type: str, tmp_path: Path, **options):
    source = published_vlm_dir(model_type, tmp_path / "hub")
    return onboard_new(
        NewOptions(
            model=str(source),
            out=tmp_path / "out",
            target="automodel",
            treat_as_new=True,
            **options,
        )
    )


def test_qwen3_5_vl_generates_into_automodel_with_zero_edits(tmp_path: Path) -> None:
    result = _new("qwen3_5", tmp_path)
    report = result.parity
    assert report is not None
    failures = [(c.name, c.detail) for c in report.checks if c.status is not Status.PASS]
    assert report.passed and not failures, failures
    names = {c.name.split("(")[0] for c in report.checks}
    assert names >= SCENARIOS | VISION_TESTS | {"states", "test_mixer_matches_hf"}
    assert "test_deepstack_matches_hf" not in names
    for check in report.checks:
        if check.metrics is not None:
            assert check.metrics.max_abs == 0.0, (check.name, check.metrics)
    prefill = next(c for c in report.checks if c.name == "prefill")
    assert prefill.detail.startswith("three rows of 73 tokens")  # past the DeltaNet's chunk
    states = next(c for c in report.checks if c.name == "states")
    assert "conv_state" in states.detail and "recurrent_state" in states.detail
    proof = report.weights
    assert proof is not None and proof.ok
    assert proof.checkpoint_tensors == proof.parameters == TENSORS
    assert result.plan.model_class == "Qwen3_5ForConditionalGeneration"
    for change in result.plan.changes:
        if change.path.endswith(".py"):
            text = (result.root / change.path).read_text()
            assert lint_python(text, filename=Path(change.path).name, style=STYLE) == ""
    model_py = (result.root / PACKAGE / "model.py").read_text()
    assert (
        "class Qwen3_5ForConditionalGeneration(HFCheckpointingMixin, "
        "HFQwen3_5ForConditionalGeneration):" in model_py
    )
    assert "self.model.language_model = Qwen3_5TextModel(" in model_py
    assert "linear_attention layers keep HF's Qwen3_5GatedDeltaNet" in model_py
    assert "deepstack" not in model_py.lower()  # Qwen3.5's tower merges the last layer only
    mrope = (result.root / PACKAGE / "mrope.py").read_text()
    assert 'LAYOUT = "interleaved"' in mrope and PARTIAL in mrope
    # the layout is read at the text model's rotary, not at the tower's of the same name (the
    # code names the file; the line stays out of library code)
    text_rotary = inspect.getsourcelines(Qwen3_5TextRotaryEmbedding.recomposition_frequencies)
    module = inspect.getmodule(Qwen3_5TextRotaryEmbedding)
    assert (
        defined_at(module, "recomposition_frequencies") == f"modeling_qwen3_5.py:{text_rotary[1]}"
    )
    assert "modeling_qwen3_5.py)" in mrope and "modeling_qwen3_5.py:" not in mrope


def _broken(tmp_path: Path, file: str, old: str, new: str) -> dict[str, Status]:
    """Parity of the generated Qwen3.5 package with one line of ``file`` broken."""
    return statuses(parity_with(_new("qwen3_5", tmp_path, parity=False), file, old, new))


def test_mrope_in_chunks_fails_parity(tmp_path: Path) -> None:
    """Image positions differ by axis, text positions do not: the prefill with images fails,
    and so do the attention keys it caches, the text-only prompt passes. (The tiny head rotates
    two frequencies, one of them by the row, so the decode steps' logits stay within tolerance.)"""
    checks = _broken(tmp_path, "mrope.py", 'LAYOUT = "interleaved"', 'LAYOUT = "chunks"')
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.PASS  # the tower is HF's: only the text differs
    failing = {"prefill", "states", "test_mrope_table_matches_hf"}
    assert {name for name in failing if checks[name] is not Status.PASS} == failing
    assert checks["text-only"] is Status.PASS


@pytest.mark.slow
def test_rope_over_the_whole_head_fails_parity(tmp_path: Path) -> None:
    """The table as wide as the head (partial_rotary_factor not read): every position is
    rotated wrong, text-only included."""
    checks = _broken(tmp_path, "mrope.py", PARTIAL, "dim = int(dim)")
    assert checks["weights"] is Status.PASS
    failing = {
        "prefill",
        "decode",
        "text-only",
        "test_mrope_table_matches_hf",
        "test_text_only_logits_match_hf",
    }
    assert {name for name in failing if checks[name] is not Status.PASS} == failing


def test_a_moe_text_backbone_stays_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFeatureError) as raised:
        _new("qwen3_5_moe", tmp_path, parity=False)
    assert any("qwen3_5_moe_text text backbone with experts" in item for item in raised.value.items)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_deltanet_state_not_carried_fails_decode(tmp_path: Path) -> None:
    """The DeltaNet layers get no cache: the prefill leaves no conv or recurrent state and every
    decode step starts from zeros, while the prefill itself is unchanged."""
    checks = _broken(
        tmp_path,
        "model.py",
        "                past_key_values=past_key_values,\n"
        "                position_embeddings=position_embeddings,",
        "                past_key_values=(\n"
        "                    None if decoder_layer.attention_type == 'linear_attention'\n"
        "                    else past_key_values\n"
        "                ),\n"
        "                position_embeddings=position_embeddings,",
    )
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is Status.PASS and checks["merged-embeddings"] is Status.PASS
    assert checks["text-only"] is Status.PASS  # a prefill: it starts from no state either way
    failing = {"decode", "states", "test_decode_steps_match_hf"}
    assert {name for name in failing if checks[name] is not Status.PASS} == failing
