"""A generated class never shadows one of mobius' own.

``--treat-as-new`` qwen3 would generate ``models/qwen3.py`` with a ``Qwen3CausalLMModel`` that
``models/__init__.py`` then imports a second time (mobius' own lives in ``models/qwen.py``): the
new import shadows mobius' class (ruff F811). Such a model is generated beside it, like one
whose files are taken (``onboard.targets.beside``). Its config class is upserted into
``_configs/_base.py``: one named like a class mobius' own models use (``Gemma2Config`` for
``--treat-as-new gemma2``) would replace it, so such a model goes beside it even with ``--out``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from onboard.targets.base import Library
from onboard.targets.mobius.config_home import CONFIGS_BASE
from onboard.targets.mobius.design import ModelDesign
from onboard.targets.mobius.plan import MODELS_INIT


def shadows_library(design: ModelDesign, library: Library) -> bool:
    """``mobius.models`` already imports the registered class from another module."""
    own = f"mobius.models.{design.module}"
    return any(
        module != own and design.model_class in names
        for module, names in _imports(library.package_dir / MODELS_INIT)
    )


def replaces_library_config(design: ModelDesign, library: Library) -> bool:
    """``_configs/_base.py`` defines a config class of the design's name that a module of
    ``mobius.models`` other than the design's own imports."""
    names = {design.config_class, *([design.vision.config_class] if design.vision else [])}
    taken = names & _defined_classes(library.package_dir / CONFIGS_BASE)
    own = library.package_dir / "models" / f"{design.module}.py"
    return any(
        path != own and taken & names_imported
        for path in sorted((library.package_dir / "models").glob("*.py"))
        for module, names_imported in _imports(path)
        if module == "mobius._configs"
    )


def _defined_classes(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return set()
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def _imports(path: Path) -> list[tuple[str, set[str]]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []  # the registry codemods report an unreadable file
    return [
        (node.module or "", {alias.asname or alias.name for alias in node.names})
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
    ]
