"""A generated class never shadows one of mobius' own.

``--treat-as-new`` qwen3 would generate ``models/qwen3.py`` with a ``Qwen3CausalLMModel`` that
``models/__init__.py`` then imports a second time (mobius' own lives in ``models/qwen.py``): the
new import shadows mobius' class (ruff F811). Such a model is generated beside it, like one
whose files are taken (``onboard.targets.beside``). Its config class is upserted into
``_configs/_base.py``: one named like a class of mobius' own (``Gemma2Config`` for
``--treat-as-new gemma2``, ``JambaConfig``) would replace it, so such a config class gets a name
of its own (``CONFIG_BESIDE``), even with ``--out``, where the model keeps its names.
"""

from __future__ import annotations

import ast
from pathlib import Path

from onboard.targets.base import Library
from onboard.targets.mobius.config_home import CONFIGS_BASE, owner_line
from onboard.targets.mobius.design import ModelDesign
from onboard.targets.mobius.plan import MODELS_INIT

CONFIG_BESIDE = "Onboarded"  # Jamba's generated config: JambaOnboardedConfig


def shadows_library(design: ModelDesign, library: Library) -> bool:
    """``mobius.models`` already imports the registered class from another module."""
    own = f"mobius.models.{design.module}"
    return any(
        module != own and design.model_class in names
        for module, names in _imports(library.package_dir / MODELS_INIT)
    )


def replaces_library_config(design: ModelDesign, library: Library) -> bool:
    """``_configs/_base.py`` defines a config class of the design's name that onboard did not
    write for the design's module (its docstring names the module that uses it): mobius' own,
    which a model or the registry may use."""
    ours = owner_line(design.module)
    return any(
        name == design.config_class and ours not in (docstring or "")
        for name, docstring in _class_docstrings(library.package_dir / CONFIGS_BASE)
    )


def _class_docstrings(path: Path) -> list[tuple[str, str | None]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    return [(n.name, ast.get_docstring(n)) for n in tree.body if isinstance(n, ast.ClassDef)]


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
