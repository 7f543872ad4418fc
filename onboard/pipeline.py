"""``onboard new`` end to end: source, analysis, proposal, plan, parity, render.

Parity runs on a staged copy of the plan *before* anything is written, so a failing run leaves the
repo untouched (the staged files are kept for inspection and their path is reported). The CLI
only parses options and prints the ``NewResult``; it holds no logic.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from onboard import STAMP, flag_attempts, provenance
from onboard.analysis import Analysis, analyse
from onboard.analysis.config_flags import with_flags
from onboard.errors import (
    BadInputError,
    ConflictError,
    EnvironmentFailure,
    UnsupportedFeatureError,
)
from onboard.journal import JOURNAL, pending, repair
from onboard.library_tests import LibraryTestReport, run_library_tests
from onboard.parity.report import ParityReport
from onboard.plan import Plan
from onboard.remote_code import import_if_trusted, untrusted
from onboard.render import (
    RenderResult,
    generated_before,
    recorded_hidden,
    recorded_remote_code,
    render,
)
from onboard.source import ModelSource, load_source, with_hub_id
from onboard.targets.base import Library, Proposal, Target, load_target

Progress = Callable[[str], None]


_NO_HUB_ID = (
    "a local checkpoint: library files name it by its folder and get no test model id; "
    "pass --hub-id org/name to name its Hub id"
)


@dataclass(frozen=True)
class NewOptions:
    model: str
    target: str = "mobius"
    repo: Path | None = None
    out: Path | None = None
    revision: str | None = None
    treat_as_new: bool = False
    dry_run: bool = False
    force: bool = False
    parity: bool = True
    device: str = "cpu"
    name: str | None = None
    trust_remote_code: bool = False
    hub_id: str | None = None  # the Hub id of a local checkpoint, for the library's files
    library_tests: bool = True  # with --repo: the library's own tests before and after


@dataclass(frozen=True)
class NewResult:
    options: NewOptions
    source: ModelSource
    analysis: Analysis
    library: Library
    proposal: Proposal
    plan: Plan | None
    rendered: RenderResult | None
    parity: ParityReport | None
    root: Path | None  # where files were (or would be) written
    staged: Path | None = None  # generated files kept after a failed parity run
    timings: tuple[tuple[str, float], ...] = field(default=())
    refused: str | None = None  # why parity did not run (remote code without trust)
    library_tests: LibraryTestReport | None = None  # the library's tests before and after

    @property
    def ok(self) -> bool:
        return (
            self.refused is None
            and (self.parity is None or self.parity.passed)
            and (self.library_tests is None or self.library_tests.passed)
        )


@dataclass
class _Clock:
    progress: Progress
    laps: list[tuple[str, float]] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.progress(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.laps.append((name, time.perf_counter() - start))


def default_out(model_type: str, target: str) -> Path:
    return Path.cwd() / "onboarded" / model_type / target


def command_line(options: NewOptions) -> str:
    parts = ["onboard new", options.model, f"--target {options.target}"]
    if options.hub_id:
        parts.append(f"--hub-id {options.hub_id}")
    if options.treat_as_new:
        parts.append("--treat-as-new")
    if options.name:
        parts.append(f"--name {options.name}")
    return " ".join(parts)


def _run_remote_code(source: ModelSource, options: NewOptions, root: Path) -> bool:
    """With ``--trust-remote-code``, import the checkpoint's code for the analysis and the HF
    reference; whether it was. For a model onboarded here before, the code must be the bytes its
    answers file recorded (``--force`` accepts new code, as it accepts new files)."""
    answers, recorded = recorded_remote_code(root, source.model_type)
    kept = {} if options.force else recorded
    return import_if_trusted(source, options.trust_remote_code, kept, str(answers))


def _require_writable(root: Path) -> None:
    """The folder the files go to can be made and written: said now, not after parity."""
    existing = next(p for p in (root, *root.parents) if p.exists())
    if not existing.is_dir():
        raise BadInputError(f"cannot write into {root}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise EnvironmentFailure(f"cannot write into {root}: {existing} is not writable")


def _conflict(paths: tuple[str, ...], root: Path, model_type: str) -> str:
    """Why a file stops the run: onboard wrote it and someone edited it since, or it is the
    library's own (mobius' llava.py serves other model types too)."""
    if generated_before(root, model_type):
        return (
            f"{', '.join(paths)} changed by hand since onboard wrote them; re-run with --force "
            "to overwrite"
        )
    return (
        f"{', '.join(paths)} already exist and onboard never wrote them (the library's own); "
        "re-run with --name to write the model under another module name, or --force to "
        "replace them"
    )


def _roll_back_interrupted(root: Path, dry_run: bool) -> str | None:
    """Undo what an interrupted run left half-written under ``root`` (a dry run only says so);
    returns the notice, None when nothing was left."""
    if not dry_run:
        return repair(root)
    if not pending(root):
        return None
    return (
        f"a run interrupted while writing into {root} left {JOURNAL}: a real run rolls it back "
        "first; this preview compares against the files as they are now"
    )


def _staged_parity(
    target: Target,
    clock: _Clock,
    plan: Plan,
    generating: Analysis,
    analysis: Analysis,
    proposal: Proposal,
    library: Library,
    options: NewOptions,
) -> tuple[ParityReport, Path]:
    """Parity of the plan rendered into a staging folder, on the tiny config analysed and, for
    code that reads the flags, on the flags-flipped one too."""
    staging = Path(tempfile.mkdtemp(prefix="onboard-staged-"))
    try:
        with clock.phase("stage"):
            render(plan, staging, stamp=STAMP)
        generated = (staging / plan.model_file, plan.model_class)
        with clock.phase("parity"):
            report = target.parity(analysis, proposal, generated, library, device=options.device)
            if generating is not analysis:
                flipped = target.parity(
                    generating, proposal, generated, library, device=options.device
                )
                report = report.beside(flipped, flag_attempts.flipped_label(generating))
    except BaseException:  # an error or Ctrl-C: nothing is left behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return report, staging


def _library_tests(
    target: Target, plan: Plan, library: Library, options: NewOptions
) -> tuple[LibraryTestReport | None, str | None]:
    """The library's own tests covering ``plan`` on the checkout and on the changed tree, and
    the notice when they were not run."""
    if not options.library_tests:
        return None, "the library's own tests were not run (--no-library-tests)"
    selection = target.library_tests(plan, library)
    report = run_library_tests(selection, plan, library.root) if selection else None
    if report is None:
        return None, f"the {target.name} checkout has none of the tests that cover this change"
    return report, None


def _noticed(source: ModelSource, notice: str | None) -> ModelSource:
    return source if notice is None else replace(source, notices=(*source.notices, notice))


def onboard_new(options: NewOptions, progress: Progress = lambda _: None) -> NewResult:
    clock = _Clock(progress)
    target = load_target(options.target)
    repo = options.repo.expanduser().resolve() if options.repo else None
    # before the library is read: a half-written registry would misdescribe the checkout
    repaired = _roll_back_interrupted(repo, options.dry_run) if repo else None
    library = target.open_library(options.repo)  # a bad --repo fails before any work
    with clock.phase("source"):
        source = load_source(options.model, revision=options.revision)
        if options.hub_id:
            source = with_hub_id(source, options.hub_id)
        elif source.hub_id is None:
            source = replace(source, notices=(*source.notices, _NO_HUB_ID))
        source = _noticed(source, repaired)
    out = None if repo else (options.out or default_out(source.model_type, options.target))
    root = repo or out.expanduser().resolve()
    trusted = _run_remote_code(source, options, root)
    # parity runs the checkpoint's code: without the trust flag it is refused, files still written
    untrusted_code = (
        untrusted(source.model_type, source.remote_files)
        if source.is_remote_code and not trusted
        else None
    )
    with clock.phase("analysis"):
        analysis = with_flags(source, analyse(source, run_remote_code=trusted))
        for note in analysis.build_notes:
            source = _noticed(source, note)
    with clock.phase("target"):
        # A model onboard registered earlier is regenerated, not "already supported".
        regenerate = options.treat_as_new or (
            options.repo is not None and generated_before(library.root, analysis.spec.model_type)
        )
        # what --treat-as-new hid the first time, carried forward: a re-run sees that library
        originals = recorded_hidden(root, analysis.spec.model_type)
        seen = library.as_before(originals or {})
        proposal = target.propose(analysis.spec, seen, treat_as_new=regenerate)
        hidden = (
            tuple((v.key, v.class_name) for v in seen.variants if v.key in proposal.hidden)
            if originals is None
            else tuple(originals.items())
        )

    if proposal.already_supported is not None:
        report = None
        refused = untrusted_code if options.parity else None
        if options.parity and refused is None:  # the library's class against HF's (or the
            with clock.phase("parity"):  # checkpoint's own code, trusted)
                report = target.parity(analysis, proposal, None, library, device=options.device)
                report = flag_attempts.library_flag_notes(
                    target, report, analysis, proposal, library, options.device
                )
        return NewResult(
            options,
            source,
            analysis,
            library,
            proposal,
            None,
            None,
            report,
            None,
            timings=tuple(clock.laps),
            refused=refused,
        )

    if repo is None:
        source = _noticed(source, _roll_back_interrupted(root, options.dry_run))
    attempts = flag_attempts.attempts(analysis, proposal, target, seen, regenerate)
    for number, (generating, generating_proposal) in enumerate(attempts, 1):
        last = number == len(attempts)
        with clock.phase("plan"):
            try:
                plan = target.plan(
                    generating,
                    generating_proposal,
                    library,
                    out=out,
                    name=options.name,
                    command=command_line(options),
                )
            except UnsupportedFeatureError as error:
                if last:
                    raise
                source = _noticed(source, flag_attempts.unwritable_notice(generating, error))
                continue
        plan = replace(
            plan,
            remote_code=analysis.spec.source.remote_files,
            hidden=hidden,
            provenance=provenance.record(generating.spec, command_line(options)),
        )
        preview = render(plan, root, dry_run=True, force=options.force, stamp=STAMP)
        if preview.conflicts and not (options.force or options.dry_run):
            raise ConflictError(_conflict(preview.conflicts, root, analysis.spec.model_type))
        if not options.dry_run:
            _require_writable(root)  # before parity, which takes the time

        report = None
        refused = untrusted_code if options.parity and plan.model_file else None
        if options.parity and plan.model_file and refused is None:
            report, staging = _staged_parity(
                target, clock, plan, generating, analysis, generating_proposal, library, options
            )
            if not report.passed and not last:
                shutil.rmtree(staging, ignore_errors=True)
                source = _noticed(source, flag_attempts.fallback_notice(generating, report))
                continue
            if not report.passed:
                return NewResult(
                    options,
                    source,
                    analysis,
                    library,
                    generating_proposal,
                    plan,
                    None,
                    report,
                    root,
                    staged=staging,
                    timings=tuple(clock.laps),
                )
            shutil.rmtree(staging, ignore_errors=True)
        elif generating is not analysis and plan.model_file:
            why = "parity needs --trust-remote-code" if refused else "--no-parity"
            source = _noticed(source, flag_attempts.unproved_notice(generating, why))
        proposal = generating_proposal
        break

    library_tests = None
    if repo is not None:
        with clock.phase("library tests"):
            library_tests, skipped = _library_tests(target, plan, library, options)
        source = _noticed(source, skipped)
    rendered = None  # a change that breaks the library's own tests is not written
    if library_tests is None or library_tests.passed:
        with clock.phase("write"):
            rendered = render(plan, root, dry_run=options.dry_run, force=options.force, stamp=STAMP)
    return NewResult(
        options,
        source,
        analysis,
        library,
        proposal,
        plan,
        rendered,
        report,
        root,
        timings=tuple(clock.laps),
        refused=refused,
        library_tests=library_tests,
    )
