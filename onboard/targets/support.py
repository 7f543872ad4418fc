"""What each built-in target needs installed, and which transformers releases it runs on.

One place for both, read without importing any of those packages: onboard's base install is the
``onboard check`` linter alone (the pre-commit hook installs nothing more), and the commands that
analyse or generate refuse there in one line that names the pip command, not a traceback.
pyproject.toml's extras say the same ranges to pip (a test keeps the two equal).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from onboard.errors import EnvironmentFailure

# What every analysis imports, whatever the target (``onboard diff`` needs no more)
ANALYSIS_MODULES = ("torch", "transformers")


@dataclass(frozen=True)
class Support:
    """A target's packages and transformers range."""

    target: str
    modules: tuple[str, ...]  # import names it needs, ANALYSIS_MODULES first
    transformers: str  # the specifier its pip extra carries
    tested: tuple[str, ...]  # transformers releases onboard ran its tests or benchmarks on
    pinned_by: str | None = None  # the package whose own pin the range copies
    after_extra: str = ""  # an install step pip cannot take through the extra

    @property
    def install(self) -> str:
        command = f"pip install 'onboard[{self.target}]'"
        return f"{command} && {self.after_extra}" if self.after_extra else command

    def to_dict(self) -> dict[str, object]:
        return {
            "supported": self.transformers,
            "tested": list(self.tested),
            "pinned_by": self.pinned_by,
            "install": self.install,
        }


SUPPORT: dict[str, Support] = {
    # mobius-onnx 0.1.0 takes any transformers: newer releases are allowed (day-0 models need
    # them) and run with a notice past the newest one tested (benchmarks/day0.py)
    "mobius": Support(
        "mobius",
        (*ANALYSIS_MODULES, "onnxruntime", "mobius"),
        ">=5.18.0",
        tested=("5.18.0", "5.25.0"),
    ),
    # nemo-automodel 0.7.0 pins transformers==5.18.0; it is installed apart, without its
    # dependencies (they pull triton and CUDA kernels)
    "automodel": Support(
        "automodel",
        (*ANALYSIS_MODULES, "nemo_automodel"),
        "==5.18.0",
        tested=("5.18.0",),
        pinned_by="nemo-automodel 0.7.0",
        after_extra="pip install --no-deps nemo-automodel==0.7.0",
    ),
}


@dataclass(frozen=True)
class Readiness:
    """Whether a target can run here: the refusal, or a notice it may run with."""

    transformers: str | None  # the installed version
    problem: str | None = None
    notice: str | None = None


def installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def missing_modules(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names that cannot be imported here (found, not imported)."""
    return tuple(name for name in names if importlib.util.find_spec(name) is None)


def readiness(support: Support) -> Readiness:
    """A transformers release out of range is named first: its fix installs the rest too."""
    installed = installed_version("transformers")
    version = Version(installed) if installed else None
    if version is not None and version not in SpecifierSet(support.transformers):
        why = f" ({support.pinned_by} pins it)" if support.pinned_by else ""
        return Readiness(
            installed,
            f"the {support.target} target needs transformers{support.transformers}{why}, and "
            f"{installed} is installed: {support.install}",
        )
    missing = missing_modules(support.modules)
    if missing:
        return Readiness(
            installed,
            f"the {support.target} target needs {', '.join(missing)}, which this environment "
            f"lacks (the base install is only the `onboard check` linter): {support.install}",
        )
    newest = max(map(Version, support.tested))
    if version is not None and version > newest:
        return Readiness(
            installed,
            notice=f"transformers {installed} is newer than the newest release the "
            f"{support.target} target was tested with ({newest}); new failures may be its changes",
        )
    return Readiness(installed)


def require_target(name: str) -> Readiness:
    """The built-in target's readiness, or EnvironmentFailure (exit 7) with the pip command.
    Targets from other packages declare nothing here and pass."""
    support = SUPPORT.get(name)
    if support is None:
        return Readiness(installed_version("transformers"))
    ready = readiness(support)
    if ready.problem:
        raise EnvironmentFailure(ready.problem)
    return ready


def require_analysis(command: str) -> None:
    """EnvironmentFailure unless torch and transformers are there (any target's extra has them)."""
    missing = missing_modules(ANALYSIS_MODULES)
    if missing:
        raise EnvironmentFailure(
            f"`onboard {command}` needs {', '.join(missing)}, which this environment lacks (the "
            "base install is only the `onboard check` linter): pip install 'onboard[mobius]'"
        )
