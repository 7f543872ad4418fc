"""What the AutoModel target keeps of HF's attention and what it still refuses, for one
checkpoint folder: read from the analysis alone, so tests of other targets can say it cheaply."""

from __future__ import annotations

from pathlib import Path

from onboard.analysis import analyse
from onboard.source import load_source
from onboard.targets.automodel.kept_attention import attention_features
from onboard.targets.automodel.propose import blockers


def automodel_view(model: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the blockers, the features that keep HF's attention whole), each as one line."""
    spec = analyse(load_source(str(model))).spec
    return blockers(spec), tuple(str(r) for r in attention_features(spec))
