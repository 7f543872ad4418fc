"""The mobius target (onnxruntime/mobius, PyPI ``mobius-onnx``): ONNX graphs via onnxscript."""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from onboard.analysis.attention_kinds import declared_kinds
from onboard.errors import BadInputError, OnboardError, TargetRepoError, UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.library_tests import LibraryTestFile, LibraryTestSelection
from onboard.parity.harness import scenarios_for
from onboard.targets.base import Library, Proposal
from onboard.targets.beside import beside, overwrites_library
from onboard.targets.mobius import design as _design
from onboard.targets.mobius import plan as _plan
from onboard.targets.mobius.blocks import BLOCK_ATTRIBUTES, named_block
from onboard.targets.mobius.config_home import install_config_classes, staged_config_source
from onboard.targets.mobius.profiles import PROFILES
from onboard.targets.mobius.propose import propose as _propose
from onboard.targets.mobius.registry import open_library as _open_library
from onboard.targets.mobius.restated import flag_configs, restated
from onboard.targets.mobius.rope import M8_NOTE, dynamic_rope
from onboard.targets.mobius.settings import Setting
from onboard.targets.mobius.shadowing import (
    CONFIG_BESIDE,
    replaces_library_config,
    shadows_library,
)
from onboard.targets.mobius.splits import with_splits

if TYPE_CHECKING:
    from onboard.analysis import Analysis
    from onboard.parity.report import ParityReport
    from onboard.plan import Plan
    from onboard.spec import ArchitectureSpec, FlagSpecs

# Bugs of the execution providers themselves, which no generated class can route around.
PROVIDER_BUGS = ("T8", "M3", "M6", "M7")
# Bugs of mobius components any library class may build (its RoPE tables): generated classes
# route around them in their config (targets.mobius.rope).
COMPONENT_BUGS = ("M8",)
# Conversion bugs of one library class that has no profile (it is never a base to generate on)
CLASS_BUGS = {"InternLM2CausalLMModel": ("M9", "M10")}
# mobius' own tests that read a model's registry and test-config entries: graph builds and
# weight alignment per entry, and the coverage rules every registered model must follow
LIBRARY_TESTS = (
    LibraryTestFile("tests/build_graph_test.py", "entries"),
    LibraryTestFile("tests/weight_alignment_test.py", "entries"),
    LibraryTestFile("tests/model_coverage_test.py", "registry"),
)


class MobiusTarget:
    name = "mobius"
    reads_flags = True

    def open_library(self, repo: Path | None) -> Library:
        return _open_library(repo)

    def propose(self, spec: ArchitectureSpec, library: Library, *, treat_as_new: bool) -> Proposal:
        return _propose(spec, library, treat_as_new=treat_as_new)

    def design(
        self,
        spec: ArchitectureSpec,
        proposal: Proposal,
        name: str | None = None,
        flagged_from: FlagSpecs | None = None,
    ) -> _design.ModelDesign:
        if proposal.blockers:
            raise UnsupportedFeatureError(
                f"the mobius generator cannot express {len(proposal.blockers)} feature(s) of "
                f"{spec.model_type}; nothing was written",
                proposal.blockers,
            )
        if proposal.chosen is None:
            raise UnsupportedFeatureError(
                "no profiled mobius class to build on (all hidden or unknown to onboard)"
            )
        return _design.design_model(spec, proposal.chosen, name=name, flagged_from=flagged_from)

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
        flagged_from = analysis.flagged_from
        design = self.design(analysis.spec, proposal, name, flagged_from)
        # measured once, against the library onboard writes into; unmeasurable: nothing dropped
        configs = flag_configs(analysis) if _importable(library) else []
        dropped = _restated(design, configs)
        design = _without(design, dropped)
        design = _config_beside(design, library)
        plan = _plan.plan_files(design, analysis.spec, proposal, library, out=out, command=command)
        # into a checkout, beside the library's own model (an --out proposal keeps its names)
        if (out is None and name is None) and (
            shadows_library(design, library) or overwrites_library(plan, library)
        ):
            named = beside(design.module)
            design = _without(self.design(analysis.spec, proposal, named, flagged_from), dropped)
            design = _config_beside(design, library)
            plan = _plan.plan_files(
                design, analysis.spec, proposal, library, out=out, command=command
            )
        return plan

    def library_tests(self, plan: Plan, library: Library) -> LibraryTestSelection:
        """Tests keyed by model type (test ids are test-config entries), importing ``src/``."""
        return LibraryTestSelection(LIBRARY_TESTS, entries=(plan.model_type,), pythonpath=("src",))

    def model_class_in(self, path: Path) -> str:
        """The last ``*MultiModalModel`` class the module defines (a VLM), else the last
        ``*CausalLMModel`` (read, not imported)."""
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError) as exc:
            raise BadInputError(f"{path} cannot be read as Python: {exc}") from None
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        names = [n for n in classes if n.endswith("MultiModalModel")] or [
            n for n in classes if n.endswith("CausalLMModel")
        ]
        if not names:
            raise BadInputError(f"{path} defines no *CausalLMModel class")
        return names[-1]

    def parity(
        self,
        analysis: Analysis,
        proposal: Proposal,
        generated: tuple[Path, str] | None,
        library: Library,
        *,
        device: str = "cpu",
    ) -> ParityReport:
        """Parity of the generated (file, class), or of the class registered for the model_type."""
        from onboard.targets.mobius.parity import run_parity

        _use_library(library)
        if analysis.spec.vision is not None:
            return _vision_parity(analysis, proposal, generated)
        module_class = _module_class(proposal, generated)
        if generated is not None:
            # The design routes around the base class's own bugs, so only bugs of the execution
            # providers may explain a failure of generated code.
            design = self.design(analysis.spec, proposal)
            # M5 only where the generated attention carries a bias of its own (ALiBi).
            bug_ids = PROVIDER_BUGS + (("M5",) if design.text and design.text.alibi else ())
            moe = analysis.spec.text.moe
            expected_name = functools.partial(
                _renamed,
                renames=design.renames,
                fused_qkv=design.fused_qkv,
                experts=analysis.tiny.config.get(moe.count_key, 0) if moe else 0,
                blocks=_tiny_block_attributes(analysis),
                stacked=_tiny_stacked_shared(analysis),
                head_norms=design.text.qk_norm_head_modules if design.text else None,
                fused_gate_up=bool(moe and moe.glu),
            )
            expected_name = with_splits(expected_name, design.splits)
        else:
            profile = PROFILES.get(module_class.__name__)
            bug_ids = (profile.bugs if profile else ()) + PROVIDER_BUGS + COMPONENT_BUGS
            bug_ids += CLASS_BUGS.get(module_class.__name__, ())
            expected_name = None
        report = run_parity(
            module_class,
            analysis.tiny.config,
            model_type=analysis.spec.model_type,
            bug_ids=bug_ids,
            device=device,
            scenarios=scenarios_for(analysis.spec.text),
            expected_name=expected_name,
        )
        if generated is not None and dynamic_rope(analysis.spec):
            report = dataclasses.replace(report, notes=(*report.notes, M8_NOTE))
        return report


def _vision_parity(
    analysis: Analysis, proposal: Proposal, generated: tuple[Path, str] | None
) -> ParityReport:
    from onboard.targets.mobius.vision import unread_tensors
    from onboard.targets.mobius.vision_parity import VisionCase, run_vision_parity

    vision = analysis.spec.vision
    blocks = vision.merge.token_blocks
    case = VisionCase(
        _module_class(proposal, generated),
        analysis.tiny.config,
        unread=tuple(unread_tensors(analysis.spec)),
        token_blocks=blocks,
        published_aliases=vision.published_aliases,
        prompt_len=scenarios_for(analysis.spec.text).prompt_len,
    )
    return run_vision_parity(
        case,
        model_type=analysis.spec.model_type,
        generated=generated is not None,
        # The generated decoder routes around its base class's bugs, as a text model's does;
        # image blocks or a prefix are an attention bias of its own (M5)
        bug_ids=PROVIDER_BUGS + (("M5",) if blocks else ()),
    )


def _module_class(proposal: Proposal, generated: tuple[Path, str] | None) -> type:
    """The generated (file, class), or the class the library registers for the model type."""
    if generated is not None:
        path, class_name = generated
        return getattr(_import_file(path), class_name)
    variant = proposal.already_supported
    if variant is None:
        raise OnboardError("nothing to check: no generated module and no registered class")
    return getattr(importlib.import_module("mobius.models"), variant.class_name)


def _restated(design: _design.ModelDesign, configs: list[dict]) -> frozenset[Setting]:
    """The design's config settings that restate mobius' base config (restated). A VLM's
    configure its text decoder, which the base reads from a sub-config: none dropped."""
    if design.vision is not None:
        return frozenset()
    return restated(design.settings, design.base.config_class, configs)


def _without(design: _design.ModelDesign, dropped: frozenset[Setting]) -> _design.ModelDesign:
    return dataclasses.replace(
        design, settings=tuple(s for s in design.settings if s not in dropped)
    )


def _config_beside(design: _design.ModelDesign, library: Library) -> _design.ModelDesign:
    """The design, its config class renamed where its name is one of mobius' own (Jamba's
    ``JambaConfig``), which the upsert into ``_configs/_base.py`` would replace."""
    if not replaces_library_config(design, library):
        return design
    return dataclasses.replace(design, config_name=f"{design.prefix}{CONFIG_BESIDE}Config")


def _renamed(
    key: str,
    renames: tuple[tuple[str, str], ...],
    fused_qkv: str | None = None,
    experts: int = 0,
    blocks: tuple[str, tuple[str, ...]] | None = None,
    stacked: tuple[str, int] | None = None,
    head_norms: str | None = None,
    fused_gate_up: bool = False,
) -> str | tuple[str, ...]:
    """The parameter a checkpoint key should fill (the design's renames, applied in order, then
    one-block layers' blocks named by kind), or the three a fused q/k/v projection is split
    into, or the per-expert ones fused experts saved 3-D (Granite MoE) are split into, or
    (``stacked``: HF's name and count of stacked shared experts) one per shared expert; a q/k
    norm saved one per head (``head_norms``: the list's name) fills the norm's stacked weight.
    ``fused_gate_up``: each expert keeps its gate and up fused (a generated clamped GLU)."""
    if head_norms:
        key = re.sub(
            rf"(\.self_attn\.\w+)\.{re.escape(head_norms)}\.\d+\.weight$", r"\1.weight", key
        )
    key = _design.renamed(key, renames)
    if blocks is not None:
        key = named_block(key, *blocks)
    if stacked is not None:
        name, count = stacked
        for leaf in ("gate_proj", "up_proj", "down_proj"):
            if key.endswith(f".{name}.{leaf}"):
                prefix = key.removesuffix(leaf)
                return tuple(f"{prefix}{e}.{leaf}.weight" for e in range(count))
    for fused, leaves in (
        ("gate_up_proj", ("gate_up_proj",) if fused_gate_up else ("gate_proj", "up_proj")),
        ("down_proj", ("down_proj",)),
    ):
        if key.endswith(f".experts.{fused}"):
            prefix = key.removesuffix(fused)
            return tuple(f"{prefix}{e}.{leaf}.weight" for e in range(experts) for leaf in leaves)
    fused = f".self_attn.{fused_qkv}." if fused_qkv else None
    if fused and fused in key:
        return tuple(key.replace(fused, f".self_attn.{p}_proj.") for p in "qkv")
    return key


def _tiny_stacked_shared(analysis: Analysis) -> tuple[str, int] | None:
    """HF's name and the tiny model's count of shared experts kept stacked, if any."""
    moe = analysis.spec.text.moe
    if moe is None or moe.shared is None or not moe.shared.stacked:
        return None
    key = moe.router.shared_logits_key
    return moe.shared.name, int(analysis.tiny.config.get(key, 0) if key else 0)


def _tiny_block_attributes(analysis: Analysis) -> tuple[str, tuple[str, ...]] | None:
    """HF's block name and each tiny layer's block attribute in the generated layers, for a
    model whose layers are one block each."""
    text = analysis.spec.text
    if text.blocks is None:
        return None
    labels = declared_kinds(make_hf_config(analysis.tiny.config)) or ()
    return text.blocks.block, tuple(BLOCK_ATTRIBUTES[text.kind_of_label(k)] for k in labels)


def _importable(library: Library) -> bool:
    """Whether ``import mobius`` gives ``library`` (a checkout's src/ put first when mobius is
    not imported yet); False when another mobius is loaded already."""
    try:
        _use_library(library)
    except TargetRepoError:
        return False
    return True


def _use_library(library: Library) -> None:
    """Make ``import mobius`` load the library onboard read (a --repo checkout's src/)."""
    if not library.is_checkout:
        return
    src = str(library.package_dir.parent)
    loaded = sys.modules.get("mobius")
    if loaded is not None:
        origin = Path(loaded.__file__ or "").resolve().parent
        if origin != library.package_dir.resolve():
            raise TargetRepoError(
                f"mobius is already imported from {origin}, not from {library.package_dir}"
            )
        return
    if src not in sys.path:
        sys.path.insert(0, src)


def _import_file(path: Path) -> object:
    """Import a generated module from its file under a private name (it may shadow mobius'),
    with the config classes its tree adds to ``mobius._configs`` defined first."""
    configs = staged_config_source(path)
    digest = hashlib.sha256(path.read_bytes() + configs.encode()).hexdigest()[:12]
    name = f"_onboard_generated.{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    install_config_classes(configs)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise OnboardError(f"cannot import generated module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise OnboardError(
            f"the generated module {path.name} does not import: {type(exc).__name__}: {exc}"
        ) from None
    return module


TARGET = MobiusTarget()
