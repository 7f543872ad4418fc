"""HF module trees the generated AutoModel code cannot keep are found when proposing, beside
the feature refusals, so the re-onboarding benchmark counts them as what stops a type (MoE, VLM
and hybrid types); a dense type keeps HF's base model whole instead."""

from __future__ import annotations

from pathlib import Path

from onboard.analysis import analyse
from onboard.source import load_source
from onboard.targets.automodel import TARGET
from onboard.targets.automodel.design import layout_blocker
from tests.new_types import default_config_dir


def _spec(model_type: str, root: Path):
    return analyse(load_source(str(default_config_dir(model_type, root)))).spec


def _blockers(model_type: str, root: Path) -> tuple[str, ...]:
    spec = _spec(model_type, root)
    return TARGET.propose(spec, TARGET.open_library(None), treat_as_new=True).blockers


def test_xglm_layers_without_an_mlp_module_are_a_foreign_tree(tmp_path: Path) -> None:
    spec = _spec("xglm", tmp_path)
    found = layout_blocker(spec)
    assert found and found.startswith("HF's module tree under other names (.fc1.* is the analysis'")
    # a dense type: HF's base model is kept whole instead of refusing (test_kept_base.py)
    blockers = TARGET.propose(spec, TARGET.open_library(None), treat_as_new=True).blockers
    assert not any("module tree" in b for b in blockers), blockers


def test_llama_tree_is_no_blocker(tmp_path: Path) -> None:
    assert not any("module tree" in b for b in _blockers("llama", tmp_path))
