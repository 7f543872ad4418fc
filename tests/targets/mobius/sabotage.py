"""Break one line of a generated mobius module (or of its config class) and run parity again."""

from __future__ import annotations

import shutil
from pathlib import Path

from onboard.parity.report import ParityReport
from onboard.pipeline import NewResult
from onboard.targets.mobius import TARGET
from onboard.targets.mobius.config_home import staged_config_source


def parity_with(result: NewResult, old: str, new: str) -> ParityReport:
    """Parity of ``result``'s generated module with ``old`` (which must occur) replaced; where
    the module lacks it, in the config class ``onboard.patch`` adds to ``mobius._configs``."""
    module = result.root / result.plan.model_file
    edited = module
    if old not in module.read_text():  # the lines the patch adds start with "+"
        edited = result.root / "onboard.patch"
        old, new = old.replace("\n", "\n+"), new.replace("\n", "\n+")
    text = edited.read_text()
    assert old in text
    edited.write_text(text.replace(old, new, 1))
    return TARGET.parity(
        result.analysis, result.proposal, (module, result.plan.model_class), result.library
    )


def broken_module(result: NewResult, tmp_path: Path) -> Path:
    """The generated module in a copy of ``result``'s output tree, to break and run parity on
    beside the original (the copy's ``onboard.patch`` holds its config classes)."""
    copy = tmp_path / "broken"
    shutil.copytree(result.root, copy)
    return copy / result.plan.model_file


def config_classes(result: NewResult) -> str:
    """The config classes ``result`` adds to ``mobius._configs`` (from its patch)."""
    return staged_config_source(result.root / result.plan.model_file)
