"""A generated class never shadows one of mobius' own.

``--treat-as-new`` qwen3 would generate ``models/qwen3.py`` with a ``Qwen3CausalLMModel`` that
``models/__init__.py`` then imports a second time (mobius' own lives in ``models/qwen.py``): the
new import shadows mobius' class (ruff F811). Such a model is generated beside it, like one
whose files are taken (``onboard.targets.beside``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from onboard.targets.base import Library
from onboard.targets.mobius.design import ModelDesign
from onboard.targets.mobius.plan import MODELS_INIT


def shadows_library(design: ModelDesign, library: Library) -> bool:
    """``mobius.models`` already imports the registered class from another module."""
    own = f"mobius.models.{design.module}"
    return any(
        module != own and design.model_class in names
        for module, names in _imports(library.package_dir / MODELS_INIT)
    )


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
