"""Import generated files as if they were part of the ``nemo_automodel`` package.

An ``--out`` folder (or a staged plan) holds only the new files, laid out like the repo:
``nemo_automodel/components/models/<name>/...`` and perhaps an edited ``_transformers/registry.py``.
The generated code and its tests import them by their library names, so this finder serves any
``nemo_automodel.*`` module that exists in one of the overlay roots from there, and leaves every
other module to the installed package (or the ``--repo`` checkout), as if the files had been
copied into it. It only ever runs in the
subprocess that executes generated code, never in onboard's own process.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

PACKAGE = "nemo_automodel"


class OverlayFinder(importlib.abc.MetaPathFinder):
    """Finds ``<package>.*`` modules (``nemo_automodel.*``) in the overlay roots first."""

    def __init__(self, roots: Sequence[Path], package: str = PACKAGE) -> None:
        self.roots = tuple(Path(r) for r in roots)
        self.package = package

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: object = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(f"{self.package}."):
            return None
        parts = fullname.split(".")
        for root in self.roots:
            package = root.joinpath(*parts) / "__init__.py"
            if package.is_file():
                # Files copied into the library's own package would sit beside its other modules:
                # search the overlay first, then wherever the package lives already.
                base = PathFinder.find_spec(fullname, path)
                below = list(base.submodule_search_locations or ()) if base else []
                return importlib.util.spec_from_file_location(
                    fullname, package, submodule_search_locations=[str(package.parent), *below]
                )
            module = root.joinpath(*parts[:-1]) / f"{parts[-1]}.py"
            if module.is_file():
                return importlib.util.spec_from_file_location(fullname, module)
        return None


def install(roots: Sequence[Path]) -> OverlayFinder:
    finder = OverlayFinder(roots)
    sys.meta_path.insert(0, finder)
    return finder
