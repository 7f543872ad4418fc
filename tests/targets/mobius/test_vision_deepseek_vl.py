"""DeepSeek-VL (a SigLIP tower read after its post norm, an MLP aligner, Llama text) generated
into mobius from transformers' default config: its generation class has no
``get_image_features`` (only its base model has), which every probe and the parity reference
now find there."""

from __future__ import annotations

from pathlib import Path

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}


def test_deepseek_vl_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    from tests.new_types import default_config_dir

    model = default_config_dir("deepseek_vl", tmp_path / "hub")
    options = NewOptions(model=str(model), out=tmp_path / "out", treat_as_new=True)
    result = onboard_new(options)
    passed_module(result, CHECKS)
    # SigLIP's pooling head: HF builds it and never reads it
    unread = result.parity.weights.unread
    assert unread and all(".head." in name for name in unread), unread
    # the aligner's activation is GELU, fixed in HF's source; another one fails the features
    report = parity_with(result, 'projector_hidden_act="gelu",', 'projector_hidden_act="silu",')
    assert statuses(report)["image-features"] is Status.FAIL
