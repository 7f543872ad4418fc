"""VLMs that also take videos, generated into mobius for their images.

mobius' vision-language task takes images, so the generated graphs read the image path; a part
only videos go through is named and its tensors skipped by the generated weight map, which the
weight proof checks. Video-LLaVA has two towers of one config: the image path's is the one
``get_image_features`` reads, and a module that loads the video tower's weights instead fails
the proof.
"""

from __future__ import annotations

from pathlib import Path

from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}


def _new(tmp_path: Path, model_type: str, **options):
    source = default_config_dir(model_type, tmp_path / "hub")
    return onboard_new(
        NewOptions(model=str(source), out=tmp_path / "out", treat_as_new=True, **options)
    )


def test_llava_next_video_generates_its_image_path(tmp_path: Path) -> None:
    """LLaVA-NeXT's tiles; the frame pooler (average, no weights) is on the video path only."""
    result = _new(tmp_path, "llava_next_video")
    text = passed_module(result, CHECKS)
    assert "class LlavaNextVideoTileGrid(nn.Module)" in text
    assert "videos" not in text  # nothing to skip


def test_video_llava_reads_its_image_tower_and_names_the_video_one(tmp_path: Path) -> None:
    result = _new(tmp_path, "video_llava")
    text = passed_module(result, CHECKS)
    proof = result.parity.weights
    video = [name for name in proof.unread if name.startswith("video_tower.")]
    assert len(video) == 391  # every tensor of the tiny video tower, by name
    assert (
        'elif name.startswith("video_tower."):\n                continue  # read for videos' in text
    )
    words = " ".join(text.split())
    assert "VideoLlavaModel.video_tower (CLIPVisionModel), read for videos only" in words
    assert "(391 checkpoint tensors)" in words
    # the video tower's weights in the image path's place: the image tower's go unplaced
    skipped = (
        'elif name.startswith("image_tower."):\n'
        '                tower[name.removeprefix("image_tower.")] = tensor\n'
        '            elif name.startswith("video_tower."):\n'
        "                continue"
    )
    swapped = skipped.replace("image_tower", "X").replace("video_tower", "image_tower")
    report = parity_with(result, skipped, swapped.replace("X", "video_tower"))
    assert statuses(report)["weights"] is Status.FAIL
    assert any("image_tower." in problem for problem in report.weights.problems)
