"""GLM-4V into AutoModel: its M-RoPE turns adjacent channel pairs, which the generated
MRopeRotaryEmbedding does not (it repeats the angles over halves): refused by name."""

from __future__ import annotations

import tempfile
from pathlib import Path


def test_glm4v_is_refused_at_its_adjacent_mrope_pairs() -> None:
    import transformers.models.glm4v.modeling_glm4v as module

    from onboard.analysis import analyse
    from onboard.source import load_source
    from onboard.targets.automodel.vision_qwen import qwen_vl_blockers
    from tests.published_vlms import published_vlm_dir

    root = published_vlm_dir("glm4v", Path(tempfile.mkdtemp(prefix="glm4v-am-")))
    vision = analyse(load_source(str(root))).spec.vision
    (blocker,) = qwen_vl_blockers(vision, module)
    assert blocker.startswith("M-RoPE on adjacent channel pairs (vision.merge.mrope.pairs")
