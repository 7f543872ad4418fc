"""The ``onboard`` command line: parse options, call one core function, print the result.

Human output goes to stdout through rich, progress to stderr; ``--json`` prints one JSON document
on stdout instead. Errors print one line and exit with a documented code (README, "Exit codes");
``ONBOARD_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from onboard import __version__, json_output
from onboard.errors import BadInputError, ExitCode, OnboardError

app = typer.Typer(
    name="onboard",
    help="Onboard a Hugging Face architecture into a model library, proven by parity.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
# Piped output is not a terminal; rich would then wrap tables at 80 columns.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False)

ModelArg = Annotated[str, typer.Argument(help="Hub id (org/name), checkpoint dir or config.json.")]
TargetOpt = Annotated[str, typer.Option("--target", "-t", help="Target library.")]
RepoOpt = Annotated[
    Path | None, typer.Option("--repo", help="Checkout of the target library to edit in place.")
]
ReadRepoOpt = Annotated[
    Path | None,
    typer.Option("--repo", help="Checkout of the target library to read (default: installed)."),
]
RevisionOpt = Annotated[str | None, typer.Option("--revision", help="Hub revision of the model.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
TrustOpt = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Allow onboard to import the checkpoint's own code (auto_map), pinned to the "
        "hashes of its files: the analysis builds and probes a tiny model of it, and parity "
        "runs it as the reference. Without it the code is only read as text.",
    ),
]
DeviceOpt = Annotated[
    str, typer.Option("--device", help="Where the HF reference runs: cpu or cuda.")
]


def _examples(*lines: str) -> str:
    """A help epilog: each example on its own line (rich markup joins single newlines)."""
    return "[bold]Examples[/]\n\n" + "\n\n".join(f"  [cyan]{line}[/]" for line in lines)


@contextmanager
def _status(enabled: bool):
    """A spinner on stderr; ``update(phase)`` names the phase that is running."""
    if not enabled or not err.is_terminal:
        yield lambda phase: None
        return
    with err.status("starting") as status:
        yield lambda phase: status.update(f"{phase}...")


def _emit_json(command: str, data: dict[str, Any], code: int = ExitCode.OK) -> None:
    json_output.write(json_output.document(command, code, data))


def _require_target(target: str) -> None:
    """Refuse (exit 7, one line with the pip command) before anything imports torch when the
    target's packages or transformers release are not installed here; print a notice when the
    release is newer than any the target was tested with."""
    from rich.text import Text

    from onboard.targets.support import require_target

    notice = require_target(target).notice
    if notice:
        err.print(Text.assemble(("notice:", "yellow"), " ", notice), soft_wrap=True)


def _check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise BadInputError(f"--device must be cpu or cuda, not {device!r}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise BadInputError("--device cuda: no CUDA device is available here")


_NEW_EXAMPLES = _examples(
    "onboard new Qwen/Qwen3-0.6B --treat-as-new --out ./qwen3",
    "onboard new ./my-checkpoint --repo ~/src/mobius --dry-run",
    "onboard new llava-hf/llava-1.5-7b-hf --target automodel --json",
)


@app.command(epilog=_NEW_EXAMPLES)
def new(
    model: ModelArg,
    target: TargetOpt = "mobius",
    repo: RepoOpt = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Folder laid out like the target repo (default ./onboarded/...)."
        ),
    ] = None,
    revision: RevisionOpt = None,
    treat_as_new: Annotated[
        bool,
        typer.Option(
            "--treat-as-new", help="Hide the model's own registry entries and regenerate it."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the tree and diffs only.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite generated files edited by hand.")
    ] = False,
    parity: Annotated[
        bool, typer.Option("--parity/--no-parity", help="Run the parity check.")
    ] = True,
    device: DeviceOpt = "cpu",
    name: Annotated[
        str | None, typer.Option("--name", help="Module / class name (default: model_type).")
    ] = None,
    trust_remote_code: TrustOpt = False,
    hub_id: Annotated[
        str | None,
        typer.Option(
            "--hub-id",
            help="The Hub id (org/name) of a local checkpoint: library files (test ids, docs, "
            "recipes) name it by this instead of the folder.",
        ),
    ] = None,
    library_tests: Annotated[
        bool,
        typer.Option(
            "--library-tests/--no-library-tests",
            help="With --repo, run the library's own tests that cover the change on the checkout "
            "and on the changed tree, and write nothing if one it passed fails.",
        ),
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Generate, register and parity-check a model in the target library."""
    _require_target(target)
    from onboard.pipeline import NewOptions, onboard_new
    from onboard.report import new_to_dict, print_new

    if repo is not None and out_dir is not None:
        raise BadInputError("--repo and --out are exclusive: edit a checkout or write a folder")
    _check_device(device)
    if name is not None:
        from onboard.naming import chosen_module_name

        chosen_module_name(name)
    options = NewOptions(
        model=model,
        target=target,
        repo=repo,
        out=out_dir,
        revision=revision,
        treat_as_new=treat_as_new,
        dry_run=dry_run,
        force=force,
        parity=parity,
        device=device,
        name=name,
        trust_remote_code=trust_remote_code,
        hub_id=hub_id,
        library_tests=library_tests,
    )
    with _status(not as_json) as progress:
        result = onboard_new(options, progress)
    code = ExitCode.REFUSED if result.refused else ExitCode.OK if result.ok else ExitCode.FAILED
    if as_json:
        _emit_json("new", new_to_dict(result), code)
    else:
        print_new(result, out)
    if result.refused:  # files are written (unverified); the one-line refusal follows
        _print_error(result.refused)
    if code:
        raise typer.Exit(code)


_INSPECT_EXAMPLES = _examples(
    "onboard inspect Qwen/Qwen3-30B-A3B",
    "onboard inspect gemma3 --json",
)


@app.command(epilog=_INSPECT_EXAMPLES)
def inspect(
    model: ModelArg,
    target: TargetOpt = "mobius",
    repo: ReadRepoOpt = None,
    revision: RevisionOpt = None,
    treat_as_new: Annotated[bool, typer.Option("--treat-as-new")] = False,
    trust_remote_code: TrustOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Classify a model, list its features with evidence and the closest known variants."""
    _require_target(target)
    from onboard.analysis import analyse
    from onboard.remote_code import import_if_trusted
    from onboard.report import (
        features_to_dict,
        print_analysis,
        print_proposal,
        print_source,
        proposal_to_dict,
        review_to_dict,
    )
    from onboard.source import load_source
    from onboard.targets.base import load_target

    with _status(not as_json) as progress:
        progress("source")
        source = load_source(model, revision=revision)
        progress("analysis")
        analysis = analyse(source, run_remote_code=import_if_trusted(source, trust_remote_code))
        chosen_target = load_target(target)
        library = chosen_target.open_library(repo)
        proposal = chosen_target.propose(analysis.spec, library, treat_as_new=treat_as_new)
    if as_json:
        _emit_json(
            "inspect",
            {
                "classification": analysis.classification.to_dict(),
                "features": features_to_dict(analysis),
                "spec": analysis.spec.to_dict(),
                "review": review_to_dict(analysis),
                "proposal": proposal_to_dict(proposal),
            },
        )
        return
    print_source(source, out)
    print_analysis(analysis, out, evidence=True)
    print_proposal(proposal, out)


_DIFF_EXAMPLES = _examples(
    "onboard diff qwen3 llama",
    "onboard diff Qwen/Qwen3-0.6B ./my-checkpoint --json",
)


@app.command(epilog=_DIFF_EXAMPLES)
def diff(
    left: Annotated[
        str, typer.Argument(help="A model type, Hub id, checkpoint dir or config.json.")
    ],
    right: Annotated[str, typer.Argument(help="The model to compare it with.")],
    as_json: JsonOpt = False,
) -> None:
    """Compare two architectures feature by feature (model types or model ids)."""
    from onboard.targets.support import require_analysis

    require_analysis("diff")
    from onboard.analysis import analyse
    from onboard.analysis.compare import compare
    from onboard.analysis.config_flags import with_flags
    from onboard.report import print_comparison

    with _status(not as_json) as progress:
        analyses = []
        for model in (left, right):
            progress(f"analysing {model} and its config flags")
            source = _load_model_or_type(model)
            analyses.append(with_flags(source, analyse(source)))
    comparison = compare(*analyses)
    if as_json:
        _emit_json("diff", comparison.to_dict())
    else:
        print_comparison(comparison, out)


def _load_model_or_type(model: str):
    """A source for a model id or path; a bare transformers model type uses its default config."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    from onboard.source import load_source

    if "/" not in model and model in CONFIG_MAPPING_NAMES and not Path(model).exists():
        from onboard.source import default_config_source

        return default_config_source(model)
    return load_source(model)


_PARITY_EXAMPLES = _examples(
    "onboard parity Qwen/Qwen3-0.6B",
    "onboard parity ./ckpt --generated onboarded/x/src/mobius/models/x.py",
)


@app.command("parity", epilog=_PARITY_EXAMPLES)
def parity_command(
    model: ModelArg,
    target: TargetOpt = "mobius",
    repo: ReadRepoOpt = None,
    generated: Annotated[
        Path | None,
        typer.Option("--generated", help="A generated module to check instead of the registry's."),
    ] = None,
    revision: RevisionOpt = None,
    device: DeviceOpt = "cpu",
    trust_remote_code: TrustOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the model's class in the target library (or a generated module) against HF."""
    _require_target(target)
    from onboard.analysis import analyse
    from onboard.report import print_parity
    from onboard.source import load_source
    from onboard.targets.base import load_target

    _check_device(device)
    with _status(not as_json) as progress:
        progress("source")
        source = load_source(model, revision=revision)
        if source.is_remote_code:
            _trust_for_parity(source, generated, trust_remote_code)
        progress("analysis")
        analysis = analyse(source, run_remote_code=source.is_remote_code)
        chosen_target = load_target(target)
        library = chosen_target.open_library(repo)
        treat_as_new = generated is not None
        proposal = chosen_target.propose(analysis.spec, library, treat_as_new=treat_as_new)
        module = None
        if generated is not None:
            if not generated.is_file():
                raise BadInputError(f"--generated {generated} is not a file")
            module = (generated, chosen_target.model_class_in(generated))
        elif proposal.already_supported is None:
            raise BadInputError(
                f"{analysis.spec.model_type} is not registered in {target}; "
                "run `onboard new` or pass --generated"
            )
        progress("parity")
        report = chosen_target.parity(analysis, proposal, module, library, device=device)
    code = ExitCode.OK if report.passed else ExitCode.FAILED
    if as_json:
        _emit_json("parity", report.to_dict(), code)
    else:
        print_parity(report, out, generated=generated is not None)
    if code:
        raise typer.Exit(code)


def _trust_for_parity(source, generated: Path | None, trusted: bool) -> None:
    """The checkpoint's code runs only when trusted, and only if a generated module's header
    records the same code."""
    from onboard.provenance import header_remote_hashes
    from onboard.remote_code import import_if_trusted, require_trust

    require_trust(source.model_type, source.remote_files, trusted)
    recorded = header_remote_hashes(generated) if generated is not None else None
    import_if_trusted(source, trusted, recorded, str(generated))


_CHECK_EXAMPLES = _examples(
    "onboard check --repo ~/src/mobius",
    "onboard check --since origin/main",
    "onboard check --installed -t mobius --select OB4",
    "onboard check --explain OB402",
)


_CHECK_HELP = (
    "Lint a target library's model registry (static, fast enough for pre-commit).\n\n"
    "With FILES (as the pre-commit hook passes them), --diff or --since, only the findings on the "
    "lines or registry entries changed since HEAD (or REV) are reported, from `git diff -U0` of "
    "the working tree, and one line counts the others; --all reports every finding. Without git "
    "or outside a git work tree, FILES keep the findings that touch those files."
)


@app.command("check", epilog=_CHECK_EXAMPLES, help=_CHECK_HELP)
def check_command(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Report the changes to these files since HEAD (pre-commit passes them)."
        ),
    ] = None,
    diff: Annotated[
        bool, typer.Option("--diff", help="Report the findings the changes since HEAD touch.")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", metavar="REV", help="Report the findings the changes since REV touch."
        ),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Report every finding, whatever the files or changes.")
    ] = False,
    repo: Annotated[
        Path | None,
        typer.Option("--repo", help="The library checkout (default: current directory)."),
    ] = None,
    installed: Annotated[
        bool, typer.Option("--installed", help="Lint the installed package of --target.")
    ] = False,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            "-t",
            help="mobius or automodel (default: detected from the checkout; needed with "
            "--installed).",
        ),
    ] = None,
    select: Annotated[
        list[str] | None, typer.Option("--select", help="Codes, prefixes or ALL (comma lists ok).")
    ] = None,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Codes or prefixes.")] = None,
    fix: Annotated[bool, typer.Option("--fix", help="Apply the mechanical fixes.")] = False,
    explain: Annotated[
        str | None,
        typer.Option("--explain", metavar="CODE", help="Print a rule's documentation."),
    ] = None,
    show_rules: Annotated[bool, typer.Option("--show-rules", help="List every rule.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Lint a target library's model registry (static, fast enough for pre-commit)."""
    from onboard.lint import CheckOptions, run_check

    options = CheckOptions(
        files=tuple(files or ()),
        repo=repo,
        installed=installed,
        target=target,
        select=tuple(select or ()),
        ignore=tuple(ignore or ()),
        fix=fix,
        as_json=as_json,
        explain=explain,
        show_rules=show_rules,
        diff=diff,
        since=since,
        show_all=show_all,
    )
    code = run_check(options, out)
    if code:
        raise typer.Exit(code)


_TARGETS_EXAMPLES = _examples(
    "onboard targets --json",
)


@app.command(epilog=_TARGETS_EXAMPLES)
def targets(as_json: JsonOpt = False) -> None:
    """List installed targets, where their library is and which transformers each runs on."""
    from importlib.metadata import entry_points

    from rich.markup import escape

    from onboard.targets.support import SUPPORT, installed_version, readiness

    installed = installed_version("transformers")
    rows = []
    for ep in sorted(entry_points(group="onboard.targets"), key=lambda e: e.name):
        support = SUPPORT.get(ep.name)
        row: dict[str, Any] = {"name": ep.name, "library": None}
        if support is not None:
            row["transformers"] = {**support.to_dict(), "installed": installed}
        problem = readiness(support).problem if support else None
        try:
            if problem:
                raise OnboardError(problem)
            library = ep.load().open_library(None)
            row.update(library=str(library.package_dir), variants=len(library.variants))
        except OnboardError as exc:
            row["error"] = exc.message
        rows.append(row)
    if as_json:
        _emit_json("targets", {"targets": rows})
        return
    for row in rows:
        where = escape(row["library"]) if row["library"] else f"[red]{escape(row['error'])}[/]"
        entries = f"  {row['variants']} registry entries" if "variants" in row else ""
        out.print(f"[bold]{row['name']}[/]  {where}{entries}", soft_wrap=True)
        if "transformers" in row:
            out.print(f"  transformers {_transformers_line(row['transformers'])}")


def _transformers_line(support: dict[str, Any]) -> str:
    """``>=5.18.0 (tested 5.18.0, 5.25.0; installed 5.18.0)``, and who pins it."""
    pinned = f", pinned by {support['pinned_by']}" if support["pinned_by"] else ""
    tested = ", ".join(support["tested"])
    installed = support["installed"] or "none"
    return f"{support['supported']} (tested {tested}{pinned}; installed {installed})"


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        out.print(f"onboard {__version__}")
        raise typer.Exit()


def main() -> None:
    """Entry point: every outcome is one exit code (README, "Exit codes"); an error is one line
    on stderr, and with ``--json`` also one JSON document on stdout; never a traceback."""
    from typer.exceptions import TyperException

    from onboard.failures import classify

    # SIGTERM (a CI timeout, `kill`) stops a run as Ctrl-C does, so temporary folders go and a
    # commit in progress rolls back, rather than the process vanishing mid-write.
    signal.signal(signal.SIGTERM, _stop)
    _quiet_transformers()
    try:
        code = app(standalone_mode=False)  # click returns the code of typer.Exit here
    except (typer.Abort, KeyboardInterrupt):
        _fail(_interrupted())
    except TyperException as exc:  # usage errors: unknown option, missing argument
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        _fail(BadInputError(message or "no command given"))
    except Exception as exc:
        if os.environ.get("ONBOARD_DEBUG"):
            raise
        _fail(classify(exc))
    if code == ExitCode.INTERRUPTED:  # typer turns Ctrl-C into Exit(130) without a word
        _fail(_interrupted())
    sys.exit(code if isinstance(code, int) else 0)


def _quiet_transformers() -> None:
    """transformers' warnings are about the checkpoint (a token id outside the vocabulary, a
    deprecated key), printed once per process: onboard reports what matters itself, so an error
    stays one line on stderr. ``TRANSFORMERS_VERBOSITY`` set by the user wins."""
    if "TRANSFORMERS_VERBOSITY" in os.environ:
        return
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"  # read when transformers configures logging
    logging.getLogger("transformers").setLevel(logging.ERROR)  # when it already has


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _interrupted() -> OnboardError:
    error = OnboardError("interrupted")
    error.exit_code = ExitCode.INTERRUPTED
    return error


def _print_error(message: str) -> None:
    from rich.text import Text

    # A Text, not markup: messages quote configs and code, whose brackets are not rich tags.
    err.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)


def _fail(error: OnboardError) -> None:
    if os.environ.get("ONBOARD_DEBUG") and sys.exc_info()[0] is not None:
        import traceback

        traceback.print_exc()
    for item in getattr(error, "items", ()):
        err.print(f"  - {item}", soft_wrap=True, highlight=False, markup=False)
    _print_error(error.message)
    if "--json" in sys.argv[1:]:
        json_output.write(json_output.error_document(_command_name(sys.argv[1:]), error))
    sys.exit(int(error.exit_code))


def _command_name(argv: list[str]) -> str:
    """The subcommand the user typed (``onboard`` alone when there is none)."""
    return next((arg for arg in argv if not arg.startswith("-")), "onboard")


if __name__ == "__main__":
    main()
