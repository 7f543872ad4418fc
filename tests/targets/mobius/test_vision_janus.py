"""Janus generated into mobius for image understanding (Janus-Pro-7B's widths).

Janus' base model also holds the image-generation side (a VQ-VAE, codebook embeddings, an
aligner and a head that predicts image tokens): read for image generation only, each part is
named and its tensors are skipped by the generated weight map, which the weight proof checks.
The aligner keeps its linears after the first in a list (``hidden_layers.0``), its activation
is the vision config's ``hidden_act`` and the tower's MLP width is ``mlp_ratio`` times its
hidden size.
"""

from __future__ import annotations

from pathlib import Path

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.published_vlms import published_vlm_dir
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}
GENERATION = ("vqmodel", "generation_embeddings", "generation_aligner", "generation_head")


def test_janus_generates_its_image_path_and_names_the_generation_parts(tmp_path: Path) -> None:
    source = published_vlm_dir("janus", tmp_path / "hub")
    result = onboard_new(NewOptions(model=str(source), out=tmp_path / "out", treat_as_new=True))
    text = passed_module(result, CHECKS)
    vision = result.analysis.spec.vision
    assert [p.part.split(" ")[0] for p in vision.other_paths] == [
        f"JanusModel.{name}" for name in GENERATION
    ]
    assert {p.path for p in vision.other_paths} == {"image generation"}
    skipped = sum(len(p.tensors) for p in vision.other_paths)
    assert set(result.parity.weights.unread) >= {t for p in vision.other_paths for t in p.tensors}
    assert skipped == 160  # the tiny VQ-VAE and the three generation parts
    assert dict(vision.tower.keys)["intermediate_size"] == "mlp_ratio"
    assert vision.projector.activation_key == "vision_config.hidden_act"
    assert "projector_hidden_act=top.vision_config.hidden_act," in text
    assert "self.hidden_layers.append(Linear(" in text
    # the aligner's activation after its listed linear instead of before it
    steps = (
        "features = self._activation_fn(op, features)\n"
        "        features = self.hidden_layers[0](op, features)"
    )
    swapped = "\n".join(reversed(steps.split("\n        ")))
    report = parity_with(result, steps, swapped.replace("\n", "\n        "))
    assert statuses(report)["image-features"] is Status.FAIL
