"""Where a generated model's config classes live: mobius' ``_configs`` package.

mobius keeps its per-model config classes in ``_configs/_base.py`` and exports them from
``_configs/__init__.py``; a model module imports its class from ``mobius._configs``. onboard
writes its classes there too (upserted at the end of ``_base.py``), into a checkout or, for
``--out``, as part of ``onboard.patch``.

Parity imports a generated module before anything is written, against a ``mobius`` that lacks
those classes: :func:`install_config_classes` defines them, from the staged tree, in the loaded
``mobius._configs`` first (:func:`staged_config_source` finds them in either layout).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from onboard.codegen import format_python, render_template
from onboard.codemods import add_from_import, add_to_all, defined_classes, upsert_classes
from onboard.errors import OnboardError
from onboard.targets.mobius.design import ModelDesign

CONFIGS_BASE = "_configs/_base.py"
CONFIGS_INIT = "_configs/__init__.py"
_BASE_MODULE = "mobius._configs._base"
_PATCHED_BASE = f"b/src/mobius/{CONFIGS_BASE}"
# name -> class of those install_config_classes defined last
_INSTALLED: dict[str, type] = {}


def owner_line(module: str) -> str:
    """The docstring line of each config class onboard writes for ``mobius.models.<module>``:
    how a re-run tells its own classes from mobius' (``shadowing.replaces_library_config``)."""
    return f"Used by :mod:`mobius.models.{module}`."


def config_classes(design: ModelDesign, style) -> str:
    """The model's config classes as they go into ``_configs/_base.py``, formatted."""
    source = render_template(
        "mobius/config.py.j2", style=style, d=design, owner=owner_line(design.module)
    )
    # _base.py's own imports; formatted as a module, then only the classes are kept
    header = "from __future__ import annotations\n\nimport dataclasses\nimport math\n\n\n"
    formatted = format_python(header + source, filename="_base.py", style=style)
    return formatted[formatted.index("@dataclasses.dataclass") :]


def with_config_classes(base: str, init: str, classes: str) -> tuple[str, str]:
    """``_configs/_base.py`` and ``_configs/__init__.py`` with ``classes`` defined and
    exported (codemods: a re-run replaces the classes it wrote)."""
    base = upsert_classes(base, classes)
    for name in defined_classes(classes):
        init = add_to_all(add_from_import(init, _BASE_MODULE, name), name)
    return base, init


def staged_config_source(model_file: Path) -> str:
    """The config classes a tree laid out like mobius' adds or changes (empty when none).

    The classes the model module imports from ``mobius._configs``, as the tree's
    ``_configs/_base.py`` (a checkout, or a staged one) defines them, else as the lines
    ``onboard.patch`` adds to that file (``--out``); those the loaded mobius defines alike are
    left out.
    """
    root = model_file.parents[3] if len(model_file.parents) > 3 else model_file.parent
    wanted = _imported_configs(model_file)
    base = root / "src" / "mobius" / CONFIGS_BASE
    patch = root / "onboard.patch"
    if base.is_file():
        source = base.read_text(encoding="utf-8")
    elif patch.is_file():
        source = _added_lines(patch.read_text(encoding="utf-8"))
    else:
        return ""
    loaded = _loaded_classes(wanted)
    return "\n\n".join(
        text for name, text in _class_sources(source, wanted) if loaded.get(name) != text
    )


def install_config_classes(source: str) -> None:
    """Define ``source``'s classes in the loaded ``mobius._configs`` (and ``_base``), as if
    its ``_base.py`` held them, in place of those an earlier call defined: a module imported
    next finds only its own tree's classes (the plan never names one after mobius' own)."""
    base = importlib.import_module(_BASE_MODULE)
    package = importlib.import_module("mobius._configs")
    for name, cls in list(_INSTALLED.items()):
        for module in (base, package):
            if getattr(module, name, None) is cls:
                delattr(module, name)
        del _INSTALLED[name]
    if not source:
        return
    namespace = dict(vars(base))
    try:
        exec(compile(source, f"<onboard: {CONFIGS_BASE}>", "exec"), namespace)
    except Exception as exc:
        raise OnboardError(
            f"the generated config classes do not load: {type(exc).__name__}: {exc}"
        ) from None
    for name in defined_classes(source):
        setattr(base, name, namespace[name])
        setattr(package, name, namespace[name])
        _INSTALLED[name] = namespace[name]


def _loaded_classes(names: set[str]) -> dict[str, str]:
    """The source of the classes named ``names`` in the loaded ``_configs/_base.py``."""
    base = importlib.import_module(_BASE_MODULE)
    try:
        source = Path(base.__file__ or "").read_text(encoding="utf-8")
    except OSError:
        return {}
    return dict(_class_sources(source, names))


def _imported_configs(model_file: Path) -> set[str]:
    try:
        tree = ast.parse(model_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return set()
    return {
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "mobius._configs"
        for alias in node.names
    }


def _class_sources(source: str, names: set[str]) -> list[tuple[str, str]]:
    """(name, definition with its decorators) of the top-level classes named ``names``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines(keepends=True)
    return [
        (
            n.name,
            "".join(
                lines[min([n.lineno, *(d.lineno for d in n.decorator_list)]) - 1 : n.end_lineno]
            ),
        )
        for n in tree.body
        if isinstance(n, ast.ClassDef) and n.name in names
    ]


def _added_lines(patch: str) -> str:
    """The lines a unified diff adds to ``_configs/_base.py``."""
    section = re.split(r"^--- .*\n", patch, flags=re.MULTILINE)
    for chunk in section:
        if chunk.startswith(f"+++ {_PATCHED_BASE}"):
            return "".join(
                line[1:] for line in chunk.splitlines(keepends=True)[1:] if line.startswith("+")
            )
    return ""
