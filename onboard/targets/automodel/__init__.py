"""The NeMo AutoModel target (NVIDIA-NeMo/Automodel, PyPI ``nemo-automodel``): torch models.

Known variants come from ``MODEL_ARCH_MAPPING``, read statically. The generated package keeps
HF's module tree, so it is proven by its own generated tests (adapter round trip, every layer and
the logits against HF, a short training run) plus onboard's shared prefill / decode / padding /
KV-cache scenarios, all run in a subprocess that imports the generated package as the library
would.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from onboard.flag_guards import guarded_flags
from onboard.library_tests import LibraryTestFile, LibraryTestSelection
from onboard.targets.automodel import design as _design
from onboard.targets.automodel import plan as _plan
from onboard.targets.automodel.parallelism import for_design
from onboard.targets.automodel.propose import propose as _propose
from onboard.targets.automodel.registry import open_library as _open_library
from onboard.targets.base import Library, Proposal
from onboard.targets.beside import beside, overwrites_library

if TYPE_CHECKING:
    from onboard.analysis import Analysis
    from onboard.parity.report import ParityReport
    from onboard.plan import Plan
    from onboard.spec import ArchitectureSpec

# AutoModel's tests of rules every registered architecture follows: a package per registry
# entry, declared capabilities and tie support, a model-coverage page, recipes that lint
LIBRARY_TESTS = tuple(
    LibraryTestFile(path)
    for path in (
        "tests/unit_tests/_transformers/test_registry.py",
        "tests/unit_tests/_transformers/test_model_capabilities.py",
        "tests/unit_tests/_transformers/test_tie_support_registry.py",
        "tests/unit_tests/_transformers/test_doc_coverage.py",
        "tests/unit_tests/_transformers/test_recipe_doc_coverage.py",
        "tests/unit_tests/config/test_example_yaml_linter.py",
    )
)


class AutomodelTarget:
    name = "automodel"
    reads_flags = True

    def open_library(self, repo: Path | None) -> Library:
        return _open_library(repo)

    def propose(self, spec: ArchitectureSpec, library: Library, *, treat_as_new: bool) -> Proposal:
        return _propose(spec, library, treat_as_new=treat_as_new)

    def design(
        self, analysis: Analysis, proposal: Proposal, name: str | None = None
    ) -> _design.ModelDesign:
        flagged = analysis.flagged_from
        others = (flagged.baseline, *(s for _, s in flagged.single)) if flagged else ()
        design = _design.design_model(
            analysis.spec, proposal, analysis.tiny.config, analysis.probe, others
        )
        if design.vision is None:  # a VLM's flags configure HF's own modules, kept whole
            guards = guarded_flags(analysis.spec, analysis.flagged_from)
            design = dataclasses.replace(design, guards=guards)
        return _design.with_name(design, name)

    def _design_in(
        self, analysis: Analysis, proposal: Proposal, library: Library, name: str | None
    ) -> _design.ModelDesign:
        """The design with the parallelism it may declare in ``library`` (a text model's: a
        VLM's tower and projector are HF's, sharded as HF's classes say)."""
        design = self.design(analysis, proposal, name)
        if design.vision is not None:
            return design
        found = for_design(design, analysis.probe, analysis.tiny.config, library)
        return dataclasses.replace(design, parallelism=found)

    def plan(
        self,
        analysis: Analysis,
        proposal: Proposal,
        library: Library,
        *,
        out: Path | None,
        name: str | None = None,
        command: str = "",
    ) -> Plan:
        design = self._design_in(analysis, proposal, library, name)
        if name is None and _shadows_module(design, library):
            design = dataclasses.replace(design, module=beside(design.module))
        flagged = analysis.flagged_from
        plan = _plan.plan_files(
            design,
            analysis.spec,
            analysis.tiny.config,
            library,
            out=out,
            command=command,
            checkpoint=flagged.baseline if flagged else None,
        )
        if out is not None:  # a proposal keeps the model's own names
            return plan
        # into a checkout, beside the library's own package and registry entry, never over them
        placed = design
        if name is None and (overwrites_library(plan, library) or _arch_taken(design, library)):
            placed = self._design_in(analysis, proposal, library, beside(design.module))
        if _arch_taken(placed, library):
            placed = dataclasses.replace(placed, arch=placed.model_class)
        if placed == design:
            return plan
        return _plan.plan_files(
            placed, analysis.spec, analysis.tiny.config, library, out=out, command=command
        )

    def library_tests(self, plan: Plan, library: Library) -> LibraryTestSelection:
        """The registry-wide rules, plus the library's own tests of the model type when it has
        a package for it (a generated package beside it is proved by parity)."""
        own = LibraryTestFile(f"tests/unit_tests/models/{plan.model_type}")
        return LibraryTestSelection((*LIBRARY_TESTS, own), entries=(plan.model_type,))

    def model_class_in(self, path: Path) -> str:
        """The class a generated ``model.py`` registers: AutoModel's ``ModelClass = X``."""
        return _plan.model_class_in(path)

    def parity(
        self,
        analysis: Analysis,
        proposal: Proposal,
        generated: tuple[Path, str] | None,
        library: Library,
        *,
        device: str = "cpu",
    ) -> ParityReport:
        """The generated package's own tests plus the shared scenarios, or, with ``generated``
        None, the scenarios on the class the registry maps the architecture to."""
        from onboard.targets.automodel.parity import run_parity

        return run_parity(analysis, proposal, generated, library, device=device)


def _shadows_module(design: _design.ModelDesign, library: Library) -> bool:
    """Whether the generated package would hide a module of the library's of the same name
    (AutoModel's ``models/gpt2.py``, whose ``build_gpt2_model`` ``models/__init__.py`` imports)."""
    return (library.root / _plan.MODELS_DIR / f"{design.module}.py").is_file()


def _arch_taken(design: _design.ModelDesign, library: Library) -> bool:
    """Whether the registry maps the design's architecture to a class other than the one
    generated (the library's own model, kept as it is)."""
    registered = library.variant(design.arch)
    return registered is not None and registered.class_name != (
        f"{design.package}.model.{design.model_class}"
    )


TARGET = AutomodelTarget()
