"""PaliGemma (a SigLIP tower read after its post norm, a linear projector, Gemma text whose
embedding scales the token rows before the merge) regenerated into mobius with zero edits.

HF's mask reads ``token_type_ids``: the tokens typed 0 (the image and the prompt) see each other
both ways, the suffix typed 1 stays causal. The generated decoder takes them through a task of
the module's own; parity feeds two rows whose prefixes and suffixes differ in length, decode
steps typed 1 and a typed text-only prompt. A prefix made causal, or image features scaled like
the token rows, fails it. mobius' own ``paligemma`` (``LLaVAModel``) takes no token types
(paligemma B1). PaliGemma 2's Gemma 2 text passes too: its VLM's head leaves Gemma 2's final
soft-cap out, which the analysis reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.published_vlms import published_vlm_dir
from tests.targets.mobius.checks import statuses
from tests.targets.mobius.sabotage import config_classes, parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
PREFIX = "block_sequence_ids=prefix_blocks(op, token_type_ids),"
MERGE = "op.Where(op.Unsqueeze(filled, [-1]), rows, embeddings)"


def _new(model: Path, out: Path, **options):
    return onboard_new(NewOptions(model=str(model), out=out, treat_as_new=True, **options))


def _passed(result) -> str:
    """The generated module, once parity passed every check on the default EP; on the cpu EP
    the GroupQueryAttention rewrite drops the bias that carries the prefix (M5, confirmed by
    building the same graph without the rewrite)."""
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert statuses(report) == dict.fromkeys(CHECKS, Status.PASS)
    assert [b.id for b in report.bugs] == ["M5"]
    return (result.root / result.plan.model_file).read_text() + config_classes(result)


def test_paligemma_3b_pt_224_regenerates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    """google/paligemma-3b-pt-224's shape (tests/published_vlms.py)."""
    result = _new(published_vlm_dir("paligemma", tmp_path / "hub"), tmp_path / "out")
    text = _passed(result)
    prefill = next(c for c in result.parity.checks if c.name == "prefill")
    assert prefill.detail == "two rows, an image each, suffixes of 4, 2"
    assert PREFIX in text
    assert "default_task = PaliGemmaVisionLanguageTask()" in text
    assert '"token_type_ids", dtype=ir.DataType.INT64' in text
    assert "GemmaScaledWordEmbedding(" in text.split("Embedding(nn.Module)")[1]
    patch = (result.root / "onboard.patch").read_text()
    assert '"paligemma": ModelRegistration(PaliGemmaMultiModalModel),' in patch


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        # the prefix attends causally, as mobius' own paligemma decoder does (paligemma B1)
        (PREFIX, "block_sequence_ids=None,", {"prefill", "text-only"}),
        # the image features scaled by sqrt(hidden) like the token rows: HF's embedding scales
        # the token rows only, before the merge
        (
            MERGE,
            "op.Where(op.Unsqueeze(filled, [-1]), op.Mul(rows, self._hidden_size**0.5), "
            "embeddings)",
            {"merged-embeddings", "prefill"},
        ),
    ],
    ids=["causal-prefix", "scaled-features"],
)
def test_a_causal_prefix_or_scaled_image_features_fail_parity(
    tmp_path: Path, old: str, new: str, failing: set[str]
) -> None:
    result = _new(published_vlm_dir("paligemma", tmp_path / "hub"), tmp_path / "out", parity=False)
    checks = statuses(parity_with(result, old, new))
    assert checks["weights"] is Status.PASS and checks["image-features"] is Status.PASS
    assert {name for name, status in checks.items() if status is Status.FAIL} >= failing


def _paligemma2(root: Path) -> Path:
    """PaliGemma 2 3B's shape: Gemma 2 2B text (tests/fixtures/hub/google/gemma-2-2b, its
    two-source partial config) under the published PaliGemma tower and placeholder."""
    from tests.hub_cache import FIXTURES

    text = json.loads((FIXTURES / "google/gemma-2-2b/config.partial.json").read_text())
    folder = published_vlm_dir("paligemma", root)
    config = json.loads((folder / "config.json").read_text())
    config["text_config"] = {**text, "vocab_size": config["text_config"]["vocab_size"]}
    config.update(projection_dim=text["hidden_size"], hidden_size=text["hidden_size"])
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_paligemma_2_regenerates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(_paligemma2(tmp_path / "hub"), tmp_path / "out")
    text = _passed(result)
    # PaliGemma's head is lm_head(last state): Gemma 2's final soft-cap is not applied
    spec = result.analysis.spec
    assert spec.text.final_logit_softcap is None
    (cap,) = dict(spec.evidence)["text.final_logit_softcap"]
    assert cap.where.startswith("modeling_paligemma.py:") and "not soft-capped" in cap.detail
    assert PREFIX in text and "sliding_window=self.config.sliding_window" in text


def test_mobius_own_vlm_decoders_are_named_where_they_cannot_see_token_types() -> None:
    from mobius.models import Gemma3MultiModalModel, LLaVAModel

    from onboard.targets.mobius.token_block_bugs import causal_decoder_defects

    (prefix,) = causal_decoder_defects(LLaVAModel, "prefix")
    assert prefix.id == "paligemma B1" and "_LLaVADecoderModel.forward" in prefix.evidence
    (blocks,) = causal_decoder_defects(Gemma3MultiModalModel, "images")
    assert blocks.id == "hybrid M13"
    assert causal_decoder_defects(LLaVAModel, "") == ()
