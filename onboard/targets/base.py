"""What every target library plug-in provides, and the data it hands back.

A target reads the library's registry (statically: no import of the library), proposes how to
express a spec with what the library already has (closest variants and the deltas left), plans the
files, and proves the result with a parity run. Third-party targets register an object with these
methods under the ``onboard.targets`` entry-point group.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from onboard.analysis import Analysis
    from onboard.library_tests import LibraryTestSelection
    from onboard.parity.report import ParityReport
    from onboard.plan import Plan
    from onboard.spec import ArchitectureSpec


@dataclass(frozen=True)
class Variant:
    """One registry entry of the target library."""

    key: str  # registry key: an HF model_type (mobius) or architecture name (automodel)
    class_name: str
    task: str | None = None


@dataclass(frozen=True)
class Library:
    """Where the target library lives: a checkout (``--repo``) or the installed package."""

    name: str
    root: Path  # the checkout root, or the directory holding the installed package
    package_dir: Path  # the importable package directory
    is_checkout: bool
    variants: tuple[Variant, ...]

    def variant(self, key: str) -> Variant | None:
        return next((v for v in self.variants if v.key == key), None)

    def as_before(self, registered: dict[str, str]) -> Library:
        """The library with ``registered`` (key -> class) as its entries were before onboard
        re-pointed them, so a re-run proposes against what the first run saw."""
        variants = tuple(
            replace(v, class_name=registered[v.key]) if v.key in registered else v
            for v in self.variants
        )
        return replace(self, variants=variants)


@dataclass(frozen=True)
class Delta:
    """A feature the spec needs that a candidate class does not compute."""

    feature: str
    wanted: str
    candidate_has: str


@dataclass(frozen=True)
class Candidate:
    variant: Variant
    deltas: tuple[Delta, ...]  # what generated code must add or override
    flags: tuple[str, ...] = ()  # what the generated config sets explicitly
    notes: tuple[str, ...] = ()  # known bugs of this class that the deltas route around


@dataclass(frozen=True)
class Proposal:
    """How the target would express the spec: ranked candidates and the chosen base."""

    model_type: str
    candidates: tuple[Candidate, ...]  # best first
    hidden: tuple[str, ...] = ()  # registry keys hidden by --treat-as-new
    already_supported: Variant | None = None  # the model_type is registered (and not hidden)
    blockers: tuple[str, ...] = field(default=())  # why no code can be generated
    # Per role (attention, mlp, norm ...): the nearest HF ancestor the library registers, and
    # the class it is registered to (from transformers' modular files).
    by_role: tuple[tuple[str, Variant], ...] = ()

    @property
    def chosen(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None


@runtime_checkable
class Target(Protocol):
    name: str
    # Generates code that reads the architecture's boolean flags from a flags-flipped analysis
    # (``Analysis.variants``); a target without it generates for the analysed values alone.
    reads_flags: bool

    def open_library(self, repo: Path | None) -> Library: ...

    def propose(
        self, spec: ArchitectureSpec, library: Library, *, treat_as_new: bool
    ) -> Proposal: ...

    def plan(
        self,
        analysis: Analysis,
        proposal: Proposal,
        library: Library,
        *,
        out: Path | None,
        name: str | None = None,
    ) -> Plan: ...

    def library_tests(self, plan: Plan, library: Library) -> LibraryTestSelection | None:
        """The library's own tests that cover what ``plan`` touches (run before and after the
        change with ``--repo``); None when the target names none."""
        ...

    def model_class_in(self, path: Path) -> str:
        """The model class a generated module defines (for ``onboard parity --generated``)."""
        ...

    def parity(
        self,
        analysis: Analysis,
        proposal: Proposal,
        generated: tuple[Path, str] | None,
        library: Library,
        *,
        device: str = "cpu",
    ) -> ParityReport: ...


def load_target(name: str) -> Any:
    """The target registered under ``name`` (built-in or through the entry-point group); a
    built-in one whose packages are missing here is an EnvironmentFailure, not an ImportError."""
    from importlib.metadata import entry_points

    from onboard.errors import BadInputError
    from onboard.targets.support import require_target

    found = {ep.name: ep for ep in entry_points(group="onboard.targets")}
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise BadInputError(f"unknown target {name!r} (installed targets: {known})")
    require_target(name)
    return found[name].load()
