"""Read a target's registry file into entries the rules can check, with their line numbers.

mobius: ``_REGISTRATIONS = {"model_type": ModelRegistration(Class, task=..., ...)}`` plus the side
tables ``_TEST_MODEL_IDS``, ``_FAMILY_OVERRIDES``, ``_VARIANT_LABELS``, ``_TEXT_ONLY_MODEL_TYPE``;
the class comes from an import at the top of ``_registry.py``.
automodel: ``MODEL_ARCH_MAPPING = OrderedDict([("Arch", ("module.path", "Class"[, {tags}])), ...])``
plus ``_CUSTOM_CONFIG_REGISTRATIONS = {"model_type": ("module.path", "ConfigClass")}``.
A registry that is missing, does not parse or has no such literal is a ``TargetRepoError``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from onboard.errors import TargetRepoError
from onboard.lint.layout import Layout
from onboard.lint.pyindex import parse_file
from onboard.lint.tables import Table, module_tables, string_set, string_tuple

MOBIUS_REGISTRATIONS = "_REGISTRATIONS"
MOBIUS_TEST_MODEL_IDS = "_TEST_MODEL_IDS"
# Inline ModelRegistration options that _create_default_registry drops, and the side table that
# _apply_test_metadata reads instead (trap T3).
MOBIUS_SIDE_TABLES = {
    "test_model_id": MOBIUS_TEST_MODEL_IDS,
    "family": "_FAMILY_OVERRIDES",
    "variant": "_VARIANT_LABELS",
}
MOBIUS_TEXT_ONLY = "_TEXT_ONLY_MODEL_TYPE"
ARCH_MAPPING = "MODEL_ARCH_MAPPING"
CUSTOM_CONFIGS = "_CUSTOM_CONFIG_REGISTRATIONS"


@dataclass(frozen=True)
class Registered:
    """A registry entry that names a class: ``module`` is where the name is looked up."""

    table: str
    key: str
    line: int
    module: str
    class_name: str
    tags: tuple[str, ...] = ()
    call: ast.Call | None = None  # mobius: the ModelRegistration(...) call

    def keyword(self, name: str) -> ast.keyword | None:
        if self.call is None:
            return None
        return next((k for k in self.call.keywords if k.arg == name), None)


@dataclass(frozen=True)
class Registry:
    """One target's registry: its tables as written and the entries that name classes."""

    path: Path
    module: str  # dotted name of the registry module
    tables: dict[str, Table]
    main: str  # the table whose keys are the registry keys
    entries: tuple[Registered, ...]  # entries of the main table that name a class
    configs: tuple[Registered, ...] = ()  # automodel custom configs

    @property
    def main_table(self) -> Table:
        return self.tables[self.main]


def read_registry(layout: Layout) -> Registry:
    path = layout.registry_path
    tree = parse_file(path)
    if isinstance(tree, str):
        raise TargetRepoError(f"{layout.display(path)} cannot be read: {tree}")
    tables = module_tables(tree)
    module = ".".join((layout.kind.package, *Path(layout.kind.registry).with_suffix("").parts))
    if layout.target == "mobius":
        return _mobius(path, module, tables, layout)
    return _automodel(path, module, tables, layout)


def _require(tables: dict[str, Table], name: str, layout: Layout) -> Table:
    if name not in tables:
        where = layout.display(layout.registry_path)
        raise TargetRepoError(f"{where} has no {name} literal; is this {layout.target}?")
    return tables[name]


def _mobius(path: Path, module: str, tables: dict[str, Table], layout: Layout) -> Registry:
    entries = []
    for item in _require(tables, MOBIUS_REGISTRATIONS, layout).items:
        call = item.value
        if not (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name)):
            continue
        entries.append(
            Registered(MOBIUS_REGISTRATIONS, item.key, item.line, module, call.args[0].id, (), call)
        )
    return Registry(path, module, tables, MOBIUS_REGISTRATIONS, tuple(entries))


def _automodel(path: Path, module: str, tables: dict[str, Table], layout: Layout) -> Registry:
    entries = tuple(_dotted_entries(_require(tables, ARCH_MAPPING, layout)))
    configs = tuple(_dotted_entries(tables[CUSTOM_CONFIGS])) if CUSTOM_CONFIGS in tables else ()
    return Registry(path, module, tables, ARCH_MAPPING, entries, configs)


def _dotted_entries(table: Table) -> list[Registered]:
    entries = []
    for item in table.items:
        strings = string_tuple(item.value)
        if not isinstance(item.value, ast.Tuple) or strings is None or len(strings) < 2:
            continue
        tags = string_set(item.value.elts[2]) if len(item.value.elts) > 2 else ()
        entries.append(Registered(table.name, item.key, item.line, strings[0], strings[1], tags))
    return entries
