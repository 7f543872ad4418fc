"""What the installed transformers knows, read from its source files without importing it.

Importing ``transformers.models.auto.configuration_auto`` costs about 1.5 s and pulls in torch
(measured: 1.57 s, then 0.88 s more for ``modeling_auto``), which is too slow for a pre-commit
hook. The mapping tables are plain literals in ``auto_mappings.py`` / ``configuration_auto.py`` /
``modeling_auto.py``, so reading them with ``ast`` gives the same names in about 20 ms.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from onboard.source import SourceFile

_CONFIG_TABLES = ("CONFIG_MAPPING_NAMES",)
_MODULE_TABLES = ("SPECIAL_MODEL_TYPE_TO_MODULE_NAME",)


@dataclass(frozen=True)
class Catalog:
    """Model types, architecture class names and source folders of one transformers install."""

    version: str
    models_dir: Path
    model_types: frozenset[str]
    architectures: frozenset[str]
    special_modules: tuple[tuple[str, str], ...]  # model_type -> module folder, when irregular
    deprecated: frozenset[str]

    def module_name(self, model_type: str) -> str:
        """transformers' ``model_type_to_module_name``, statically."""
        special = dict(self.special_modules)
        name = special.get(model_type, model_type.replace("-", "_"))
        return f"deprecated.{name}" if name in self.deprecated else name

    def module_dir(self, model_type: str) -> Path | None:
        if model_type not in self.model_types:
            return None
        folder = self.models_dir.joinpath(*self.module_name(model_type).split("."))
        return folder if folder.is_dir() else None

    def source_files(self, model_type: str) -> tuple[SourceFile, ...]:
        """The modeling / modular / configuration files of ``model_type`` (read as text)."""
        return _source_files(self.module_dir(model_type))

    def modeling_file(self, name: str) -> Path | None:
        """``modeling_qwen3.py`` -> its path in this install (the folder is the file's stem)."""
        stem = name.removeprefix("modeling_").removesuffix(".py")
        path = self.models_dir / stem / name
        return path if path.is_file() else None


@cache
def _source_files(folder: Path | None) -> tuple[SourceFile, ...]:
    if folder is None:
        return ()
    names = sorted(
        p
        for p in folder.glob("*.py")
        if p.name.startswith(("modeling_", "modular_", "configuration_"))
    )
    return tuple(SourceFile.read(p) for p in names)


@cache
def load_catalog() -> Catalog | None:
    """The installed transformers' catalog, or None when transformers is not installed."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    auto = package / "models" / "auto"
    config_files = [auto / "auto_mappings.py", auto / "configuration_auto.py"]
    config_trees = [t for t in map(_parse, config_files) if t is not None]
    modeling = _parse(auto / "modeling_auto.py")
    return Catalog(
        version=_version(),
        models_dir=package / "models",
        model_types=frozenset(k for t in config_trees for k, _ in _pairs(t, _CONFIG_TABLES)),
        architectures=frozenset(_architectures(modeling) if modeling is not None else ()),
        special_modules=tuple(pair for t in config_trees for pair in _pairs(t, _MODULE_TABLES)),
        deprecated=frozenset(s for t in config_trees for s in _strings(t, "DEPRECATED_MODELS")),
    )


def mapping_keys(source: str, table: str) -> frozenset[str]:
    """The keys written into ``table`` in a transformers auto module's source text (for a
    release that is not the installed one, read from its wheel)."""
    return frozenset(key for key, _ in _pairs(ast.parse(source), (table,)))


def _version() -> str:
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _pairs(tree: ast.Module, names: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """``(key, value)`` string pairs written into the named tables, by assignment or update()."""
    for node in _writes(tree, names):
        for inner in ast.walk(node):
            if isinstance(inner, ast.Tuple) and len(inner.elts) == 2:
                key, value = (_string(e) for e in inner.elts)
                if key is not None and value is not None:
                    yield key, value
            elif isinstance(inner, ast.Dict):
                for k, v in zip(inner.keys, inner.values, strict=True):
                    key, value = _string(k), _string(v)
                    if key is not None and value is not None:
                        yield key, value


def _writes(tree: ast.Module, names: tuple[str, ...]) -> Iterator[ast.AST]:
    """Values assigned to the names, and arguments of ``<name>.update(...)`` calls."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in names for t in node.targets
        ):
            yield node.value
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "update"
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id in names
        ):
            yield from node.value.args


def _strings(tree: ast.Module, name: str) -> Iterator[str]:
    for node in _writes(tree, (name,)):
        for inner in ast.walk(node):
            value = _string(inner)
            if value is not None:
                yield value


def _architectures(tree: ast.Module) -> Iterator[str]:
    """Class names in every ``*_MAPPING_NAMES`` table of ``modeling_auto.py``."""
    names = tuple(
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and t.id.endswith("_MAPPING_NAMES")
    )
    for node in _writes(tree, names):
        for inner in ast.walk(node):
            if isinstance(inner, ast.Tuple) and len(inner.elts) == 2:
                value = inner.elts[1]
                candidates = value.elts if isinstance(value, ast.Tuple) else [value]
                yield from (s for s in map(_string, candidates) if s is not None)


def _string(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
