"""What every rule reads: the layout, the registry, the package's source and transformers' catalog.

One ``Context`` per run; everything expensive (parsing a module, reading transformers' tables, the
HF source of a model_type) is computed on first use and shared by all rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from onboard.lint.hf import Catalog, load_catalog
from onboard.lint.layout import Layout
from onboard.lint.pyindex import PackageIndex, Resolved
from onboard.lint.registry import Registered, Registry, read_registry

T = TypeVar("T")


@dataclass
class Context:
    layout: Layout
    registry: Registry
    index: PackageIndex
    _resolved: dict[tuple[str, str], Resolved] = field(default_factory=dict)
    _memo: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, layout: Layout) -> Context:
        index = PackageIndex(layout.kind.package, layout.package_dir)
        return cls(layout, read_registry(layout), index)

    @property
    def target(self) -> str:
        return self.layout.target

    @cached_property
    def catalog(self) -> Catalog | None:
        return load_catalog()

    @cached_property
    def registry_display(self) -> str:
        return self.display(self.registry.path)

    def memo(self, key: str, factory: Callable[[], T]) -> T:
        """A value computed once per run and shared by the rules that need it."""
        if key not in self._memo:
            self._memo[key] = factory()
        return self._memo[key]

    def display(self, path: Path) -> str:
        return self.layout.display(path)

    def resolve(self, entry: Registered) -> Resolved:
        """The class an entry names, looked up where the registry looks it up."""
        key = (entry.module, entry.class_name)
        if key not in self._resolved:
            self._resolved[key] = self.index.resolve(*key)
        return self._resolved[key]

    def module_display(self, dotted: str) -> str:
        """Where a dotted module of the package lives (or would live) in the repository."""
        path = self.index.module_file(dotted)
        if path is None:
            parts = dotted.split(".")[1:]
            path = self.layout.package_dir.joinpath(*parts).with_suffix(".py")
        return self.display(path)

    def repo_path(self, relative: str) -> Path | None:
        """A checkout-only path (tests, testdata, docs); None for an installed package."""
        return self.layout.repo_path(relative)
