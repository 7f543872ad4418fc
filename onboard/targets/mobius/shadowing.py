"""A generated model goes beside mobius' own, never over it.

``--treat-as-new`` into a library that has the model (and an architecture whose derived names
are taken) would generate ``models/qwen3.py`` with a ``Qwen3CausalLMModel`` that
``models/__init__.py`` then imports a second time: the new import shadows mobius' class (ruff
F811), and a module file onboard did not write would be overwritten. The names are derived from
the library as it is, not from what an earlier run wrote, so a re-run picks the same ones.
Only a checkout gets the new names: an ``--out`` proposal keeps the model's own.
"""

from __future__ import annotations

import ast
from pathlib import Path

from onboard.render import recorded_files
from onboard.targets.base import Library
from onboard.targets.mobius.design import ModelDesign
from onboard.targets.mobius.plan import MODELS_INIT

SUFFIX = "_onboarded"


def unshadowed_name(design: ModelDesign, library: Library) -> str | None:
    """The ``--name`` to generate under when ``design``'s module or class is mobius' own
    (``<module>_onboarded``), else None."""
    if _module_taken(design, library) or _class_taken(design, library):
        return f"{design.module}{SUFFIX}"
    return None


def _module_taken(design: ModelDesign, library: Library) -> bool:
    """``models/<module>.py`` exists and onboard did not write it."""
    relative = f"models/{design.module}.py"
    if not (library.package_dir / relative).is_file():
        return False
    written = recorded_files(library.root, design.model_type) if library.is_checkout else {}
    return f"src/mobius/{relative}" not in written


def _class_taken(design: ModelDesign, library: Library) -> bool:
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
