"""HF module trees the generated AutoModel code cannot keep are refused when proposing, beside
the feature refusals, so the re-onboarding benchmark counts them as what stops a type."""

from __future__ import annotations

from pathlib import Path

from onboard.analysis import analyse
from onboard.source import load_source
from onboard.targets.automodel import TARGET
from tests.new_types import default_config_dir


def _blockers(model_type: str, root: Path) -> tuple[str, ...]:
    spec = analyse(load_source(str(default_config_dir(model_type, root)))).spec
    return TARGET.propose(spec, TARGET.open_library(None), treat_as_new=True).blockers


def test_xglm_layers_without_an_mlp_module_are_a_blocker(tmp_path: Path) -> None:
    found = _blockers("xglm", tmp_path)
    assert found[0].startswith("HF's module tree under other names (.fc1.* is the analysis'")
    assert any(b.startswith("sinusoidal absolute positions") for b in found)


def test_llama_tree_is_no_blocker(tmp_path: Path) -> None:
    assert not any("module tree" in b for b in _blockers("llama", tmp_path))
