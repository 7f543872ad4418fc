"""Idefics 2 (a SigLIP-like tower read after its post norm; a connector of a gated modality
projection and a perceiver resampler; Mistral text) generated into mobius' vision-language task
from transformers' default config, which runs at its real sizes.

mobius has no perceiver resampler: the generated projector holds one, built from mobius'
Linear, RMSNorm and GatedMLP under HF's names, with ONNX's Attention over the context's and the
latents' keys and values. Parity runs rows of two, one and no image; the latents left out of
the keys and values, the final norm skipped, the modality projection's gate and up swapped or
the text's epsilon in the resampler's norms fail it. mobius' own registration (LLaVAModel) is
reported for what it gets wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
KEYS_IN = "keys_in = op.Concat(context, latents, axis=1)"
FINAL_NORM = "return self.norm(op, latents)"
GATE = (
    "gate = self._act(op, self.gate_proj(op, features))\n"
    "        return self.down_proj(op, op.Mul(gate, self.up_proj(op, features)))"
)
EPS = "perceiver_norm_eps=top.perceiver_config.rms_norm_eps,"


def _new(tmp_path: Path, **options):
    from tests.new_types import default_config_dir

    model = default_config_dir("idefics2", tmp_path / "hub")
    return onboard_new(NewOptions(model=str(model), out=tmp_path / "out", **options))


def test_idefics2_is_generated_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path, treat_as_new=True)
    text = passed_module(result, CHECKS)
    report = result.parity
    prefill = {c.provider: c.detail for c in report.checks if c.name == "prefill"}
    assert prefill == dict.fromkeys(("default", "cpu"), "rows of 2, 1, 0 images")
    assert report.weights.unread == ()  # every perceiver tensor fills a parameter
    assert KEYS_IN in text and FINAL_NORM in text and GATE in text and EPS in text
    assert "class Idefics2PerceiverResampler(nn.Module):" in text
    assert "perceiver_latents=top.perceiver_config.resampler_n_latents," in text
    assert "perceiver_kv_heads=top.perceiver_config.num_key_value_heads," in text
    assert "projector_hidden_act=top.text_config.hidden_act," in text
    assert "config.intermediate_size," in text  # the modality projection's width: the text's
    assert "hidden * 4," in text
    assert "pixel_attention_mask is not read" in text
    assert "the context mask is all" in text
    patch = (result.root / "onboard.patch").read_text()
    assert '+    "idefics2": ModelRegistration(Idefics2MultiModalModel' in patch


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (KEYS_IN, "keys_in = context"),
        (  # the final norm skipped: its weight still held, its output unused
            FINAL_NORM,
            "return op.Add(latents, op.Mul(self.norm(op, latents), op.Constant(value_float=0.0)))",
        ),
        (
            GATE,
            GATE.replace("gate_proj", "@").replace("up_proj", "gate_proj").replace("@", "up_proj"),
        ),
        (EPS, "perceiver_norm_eps=top.text_config.rms_norm_eps,"),
    ],
    ids=["latents-not-in-keys", "final-norm-skipped", "gate-up-swapped", "text-eps"],
)
@pytest.mark.slow
def test_a_wrong_perceiver_fails_parity(tmp_path: Path, old: str, new: str) -> None:
    report = parity_with(_new(tmp_path, treat_as_new=True, parity=False), old, new)
    checks = statuses(report)
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.FAIL
    assert checks["prefill"] is Status.FAIL
    assert checks["text-only"] is Status.PASS  # no image: the resampler is not run


def test_mobius_own_idefics2_is_reported_for_its_llava_registration(tmp_path: Path) -> None:
    result = _new(tmp_path)
    report = result.parity
    assert result.proposal.already_supported is not None
    assert report is not None and not report.passed
    bugs = {b.id: b for b in report.bugs}
    assert "registers idefics2 to LLaVAModel" in bugs["idefics2 I1"].title
    assert "perceiver resampler" in bugs["idefics2 I1"].title
    assert "mobius/_registry.py:579 'idefics2'" in bugs["idefics2 I1"].evidence
    assert "restarts its feature count on every row" in bugs["idefics2 I2"].title
    assert "hybrid M1" in bugs  # no checkpoint tensor reaches any graph
