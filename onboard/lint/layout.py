"""Where the linted library lives and how its paths are shown.

A checkout is recognised by its registry file (mobius: ``src/mobius/_registry.py``; automodel:
``nemo_automodel/_transformers/registry.py``). Without a checkout the installed package is read
as if it sat at that place in a repository, so findings read the same either way; folders only a
checkout has (tests, testdata, docs) are then simply absent.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from onboard.errors import BadInputError, TargetRepoError


@dataclass(frozen=True)
class TargetKind:
    name: str
    package: str  # import name
    prefix: str  # where the package sits in a checkout
    registry: str  # the registry module, relative to the package
    pip_name: str


TARGETS: dict[str, TargetKind] = {
    "mobius": TargetKind("mobius", "mobius", "src/mobius", "_registry.py", "mobius-onnx"),
    "automodel": TargetKind(
        "automodel",
        "nemo_automodel",
        "nemo_automodel",
        "_transformers/registry.py",
        "nemo-automodel",
    ),
}


@dataclass(frozen=True)
class Layout:
    """The library being linted: a checkout (``root``) or an installed package (``root=None``)."""

    kind: TargetKind
    root: Path | None
    package_dir: Path

    @property
    def target(self) -> str:
        return self.kind.name

    @property
    def registry_path(self) -> Path:
        return self.package_dir / self.kind.registry

    def repo_path(self, relative: str) -> Path | None:
        """A path outside the package (``tests/...``); None for an installed package."""
        return None if self.root is None else self.root / relative

    def display(self, path: Path) -> str:
        """``path`` as the repository would show it (``src/mobius/_registry.py``)."""
        for base, prefix in self._bases():
            try:
                relative = path.relative_to(base)
            except ValueError:
                continue
            return f"{prefix}{relative.as_posix()}" if relative.parts else prefix.rstrip("/")
        return path.as_posix()

    def _bases(self) -> tuple[tuple[Path, str], ...]:
        package = (self.package_dir, f"{self.kind.prefix}/")
        return (package,) if self.root is None else (package, (self.root, ""))

    def describe(self) -> str:
        return str(self.root if self.root is not None else self.package_dir)


def open_layout(root: Path | None, target: str | None) -> Layout:
    """Find the library: ``root`` is a checkout (target detected when not given) or None."""
    if target is not None and target not in TARGETS:
        raise BadInputError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
    if root is None:
        return _installed(TARGETS[target or _the_installed_target()])
    return _checkout(root.expanduser().resolve(), target)


def _the_installed_target() -> str:
    """The one target library installed here (``--installed`` without ``--target``)."""
    installed = [n for n, k in TARGETS.items() if importlib.util.find_spec(k.package) is not None]
    if len(installed) == 1:
        return installed[0]
    if not installed:
        packages = " or ".join(k.pip_name for k in TARGETS.values())
        raise TargetRepoError(f"no target library is installed (pip install {packages})")
    raise BadInputError(
        f"--installed: {' and '.join(installed)} are both installed; name one with --target"
    )


def _installed(kind: TargetKind) -> Layout:
    spec = importlib.util.find_spec(kind.package)
    if spec is None or spec.origin is None:
        raise TargetRepoError(
            f"{kind.package} is not installed (pip install {kind.pip_name}); give a checkout"
        )
    return Layout(kind, None, Path(spec.origin).parent)


def _checkout(root: Path, target: str | None) -> Layout:
    if not root.is_dir():
        raise TargetRepoError(f"{root} is not a directory")
    found = [k for k in TARGETS.values() if (root / k.prefix / k.registry).is_file()]
    if target is not None:
        kind = TARGETS[target]
        if kind not in found:
            raise TargetRepoError(
                f"{root} is not a {target} checkout: {kind.prefix}/{kind.registry} does not exist"
            )
        return Layout(kind, root, root / kind.prefix)
    if not found:
        expected = " or ".join(f"{k.prefix}/{k.registry}" for k in TARGETS.values())
        raise TargetRepoError(f"{root} is not a target checkout: no {expected}")
    if len(found) > 1:
        raise BadInputError(f"{root} holds several targets; pass --target")
    return Layout(found[0], root, root / found[0].prefix)
