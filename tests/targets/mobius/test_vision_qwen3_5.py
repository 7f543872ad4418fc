"""Qwen3.5's vision-language models generated into mobius: the Qwen3-VL tower (learned
positions, its merger, no DeepStack) over the hybrid text model (gated DeltaNet layers among
full attention), mobius' own entries hidden by --treat-as-new.

The decoder graph is mobius' hybrid-qwen-vl task's: each DeltaNet layer takes and returns its
conv and recurrent states beside the attention layers' KV cache, and parity carries them from
the prefill with images through the decode steps. transformers' default configs cannot run as
they are (below); the tests set what the published checkpoints set.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.published_vlms import published_vlm_dir
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

# states: the DeltaNet layers' conv and recurrent states and the attention layers' keys and
# values against HF's cache, after the prefill with images and every decode step
CHECKS = {
    "weights",
    "image-features",
    "merged-embeddings",
    "prefill",
    "decode",
    "states",
    "text-only",
}
RECURRENT_CARRIED = "conv_present,\n            recurrent_present,\n        )"


def _config(model_type: str, root: Path) -> Path:
    """The default config with what the published checkpoints set where it cannot run: the
    M-RoPE sections (HF's rotary module falls back to [11, 11, 10] at modeling_qwen3_5.py:159,
    which the generated config cannot read), the merger's width (the text's: 4096 as
    Qwen3.5-9B, 2048 as Qwen3.5-35B-A3B) and the VLM class (transformers also maps these types
    to a text-only causal LM, which default_config_dir names first)."""
    return published_vlm_dir(model_type, root)


def _new(model_type: str, tmp_path: Path, **options):
    source = _config(model_type, tmp_path / "hub")
    return onboard_new(NewOptions(model=str(source), out=tmp_path / "out", **options))


@pytest.mark.parametrize("model_type", ["qwen3_5", "qwen3_5_moe"])
def test_qwen3_5_vl_generates_into_mobius_with_zero_edits(tmp_path: Path, model_type: str):
    result = _new(model_type, tmp_path, treat_as_new=True)
    assert result.proposal.already_supported is None  # --treat-as-new hides mobius' own
    text = passed_module(result, CHECKS)
    proof = result.parity.weights
    assert proof is not None and proof.ok and proof.unread == ()
    assert proof.checkpoint_tensors == proof.parameters
    assert 'default_task = "hybrid-qwen-vl"' in text
    # the prefill with images runs past HF's DeltaNet chunk (64 tokens)
    prefill = next(c for c in result.parity.checks if c.name == "prefill")
    assert prefill.detail.startswith("three rows of 73 tokens")
    assert "mrope_interleaved=True" in text
    assert RECURRENT_CARRIED in text
    assert "deepstack" not in text  # Qwen3.5's tower merges the last layer only
    hf = "Qwen3_5Moe" if model_type == "qwen3_5_moe" else "Qwen3_5"
    prefix = "Qwen35MoE" if model_type == "qwen3_5_moe" else "Qwen35"  # mobius' spelling
    assert f"class {prefix}VisionTransformer(Qwen3VLVisionModel):" in text
    assert f"class {prefix}GatedDeltaNet(nn.Module):" in text
    assert f"Replicates HuggingFace's ``{hf}ForConditionalGeneration``." in text


@pytest.mark.parametrize(
    ("old", "new", "failing", "passing"),
    [
        # the recurrent state the step before left is not read: each decode step starts from
        # zeros
        (
            "            recurrent_state,\n            decay,",
            "            op.Mul(recurrent_state, op.CastLike(0.0, recurrent_state)),\n"
            "            decay,",
            {"decode", "states"},
            {"prefill", "text-only"},
        ),
        # the convolution's window is not handed on
        (
            "conv_present = op.Slice(window,",
            "conv_present = op.Slice(op.Mul(window, op.CastLike(0.0, window)),",
            {"decode", "states"},
            {"prefill", "text-only"},
        ),
        # M-RoPE sections in chunks, not interleaved: only image positions differ by axis
        ("mrope_interleaved=True", "mrope_interleaved=False", {"prefill"}, {"text-only"}),
    ],
    ids=["recurrent-state-dropped", "conv-state-dropped", "mrope-in-chunks"],
)
@pytest.mark.slow
def test_a_wrong_qwen3_5_vl_fails_parity(
    tmp_path: Path, old: str, new: str, failing: set[str], passing: set[str]
) -> None:
    report = parity_with(_new("qwen3_5", tmp_path, treat_as_new=True, parity=False), old, new)
    checks = statuses(report)
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.PASS
    assert {name for name in failing if checks[name] is Status.FAIL} == failing
    assert {name for name in passing if checks[name] is Status.PASS} == passing


def test_mobius_own_qwen3_5_vl_is_reported_for_its_embedding_and_deltanet(tmp_path: Path):
    """mobius' own Qwen3.5 VLM: row 1 gets row 0's image features, and its DeltaNet normalises
    q and k without HF's epsilon; both are named with where they live."""
    result = _new("qwen3_5", tmp_path)
    assert result.proposal.already_supported is not None
    report = result.parity
    assert report is not None and not report.passed
    checks = statuses(report)
    assert checks["weights"] is Status.PASS and checks["image-features"] is Status.PASS
    assert checks["merged-embeddings"] is Status.FAIL and checks["text-only"] is Status.FAIL
    bugs = {b.id: b for b in report.bugs}
    assert set(bugs) == {"qwen3.5 Q1", "qwen3.5 Q2"}
    assert "mobius/models/qwen_vl.py:306" in bugs["qwen3.5 Q1"].evidence
    assert "mobius/components/_gated_deltanet.py" in bugs["qwen3.5 Q2"].evidence


def test_mobius_own_qwen3_5_moe_entry_is_reported_as_text_only(tmp_path: Path) -> None:
    result = _new("qwen3_5_moe", tmp_path)
    report = result.parity
    assert report is not None and statuses(report)["build"] is Status.FAIL
    (bug,) = report.bugs
    assert bug.id == "qwen3.5 Q3" and "Qwen35MoECausalLMModel" in bug.title
