"""InternVL into AutoModel: it folds the tower's patches before calling its projector module,
which the generated VLM (HF's tower and projector around the text model) would skip: refused by
name at get_image_features, as the other VLM paths it does not follow."""

from __future__ import annotations

from pathlib import Path


def test_internvl_is_refused_at_its_pixel_shuffle_before_the_projector(tmp_path: Path) -> None:
    from onboard.analysis import analyse
    from onboard.source import load_source
    from onboard.targets.automodel.vision import vision_blockers
    from tests.new_types import default_config_dir

    spec = analyse(load_source(str(default_config_dir("internvl", tmp_path)))).spec
    (shuffle,) = [s for s in spec.vision.projector.steps if s.op == "pixel_shuffle"]
    assert shuffle.outside
    (blocker,) = vision_blockers(spec)
    assert blocker.startswith(
        "a pixel shuffle between the tower and the projector module (modeling_internvl.py:"
    )
