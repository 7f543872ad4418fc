"""A VLM whose text backbone's causal LM scales the logits where the VLM's head does not (Aya
Vision: a plain lm_head over Cohere 2, whose Cohere2ForCausalLM multiplies by logit_scale). The
generated text-only class computes what HF's text causal LM computes, the VLM class what the VLM
computes, and the generated tests catch either with the other's head."""

from __future__ import annotations

from pathlib import Path

from onboard.pipeline import NewOptions, onboard_new
from onboard.spec import ScaleSpec
from tests.published_vlms import published_vlm_dir
from tests.targets.automodel.sabotage import run_generated_tests

TEXT_HEAD = (
    "logits = compute_lm_head_logits(self.lm_head, outputs.last_hidden_state, logits_to_keep)"
    ".logits\n"
    "        # config multiplier: final logits x config.logit_scale\n"
    "        logits = logits * self.config.logit_scale\n"
)
TEXT_HEAD_PLAIN = (
    "logits = compute_lm_head_logits(self.lm_head, outputs.last_hidden_state, logits_to_keep)"
    ".logits\n"
)
VLM_HEAD = (
    "logits = compute_lm_head_logits(self.lm_head, outputs.last_hidden_state, logits_to_keep)"
    ".logits\n"
    "        loss = None\n"
    "        if labels is not None:\n"
    "            vocab = logits.shape[-1]\n"
)
VLM_HEAD_SCALED = VLM_HEAD.replace(
    ".logits\n", ".logits\n        logits = logits * self.config.text_config.logit_scale\n", 1
)


def test_aya_vision_text_class_scales_its_logits_and_the_vlm_does_not(tmp_path: Path) -> None:
    folder = published_vlm_dir("aya_vision", tmp_path / "models")
    out = tmp_path / "out"
    options = NewOptions(
        model=str(folder), target="automodel", treat_as_new=True, out=out, parity=False
    )
    result = onboard_new(options)
    vision = result.analysis.spec.vision
    assert vision.text_lm_scales == (ScaleSpec("logits", "logit_scale", "times"),)
    assert result.analysis.spec.text.scale_at("logits") is None  # what the VLM computes

    model = result.root / result.plan.model_file
    text = model.read_text()
    assert text.count(TEXT_HEAD) == 1 and text.count(VLM_HEAD) == 1
    clean = run_generated_tests(out, "test_logits_match_hf")
    assert clean.returncode == 0 and "4 passed" in clean.stdout, clean.stdout[-3000:]

    model.write_text(text.replace(TEXT_HEAD, TEXT_HEAD_PLAIN))
    _assert_all_fail(run_generated_tests(out, "aya_vision_model and test_logits_match_hf"))

    model.write_text(text.replace(VLM_HEAD, VLM_HEAD_SCALED))
    _assert_all_fail(run_generated_tests(out, "aya_vision_vision and test_logits_match_hf"))


def _assert_all_fail(run) -> None:
    summary = run.stdout.strip().splitlines()[-1]
    assert run.returncode == 1 and "failed" in summary and "passed" not in summary, summary
