"""Present results: rich tables for people, plain dicts for ``--json``.

Nothing here computes; every function takes a finished result and prints or converts it.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from onboard.parity.report import ParityReport, Status
from onboard.render import print_result
from onboard.weightmap import WeightMapProof

if TYPE_CHECKING:
    from onboard.analysis import Analysis
    from onboard.analysis.compare import Comparison
    from onboard.library_tests import LibraryTestReport
    from onboard.pipeline import NewResult
    from onboard.source import ModelSource
    from onboard.targets.base import Proposal
    from onboard.vision import VisionSpec

STATUS_STYLE = {
    Status.PASS: "green",
    Status.FAIL: "bold red",
    Status.XFAIL: "yellow",
    Status.SKIP: "dim",
}


def print_source(source: ModelSource, console: Console) -> None:
    revision = f" @ {source.revision[:12]}" if source.revision else ""
    console.print(
        f"[bold]{source.model_id}[/]{revision}  [dim]({source.origin}: {source.config_path})[/]"
    )
    for notice in source.notices:
        console.print(f"[yellow]notice:[/] {notice}")


def print_analysis(analysis: Analysis, console: Console, *, evidence: bool = False) -> None:
    from onboard.analysis.features import features

    classification = analysis.classification
    spec = analysis.spec
    text = spec.text
    console.print(
        f"kind [bold]{classification.kind}[/] ({spec.source.architecture}): "
        + "; ".join(classification.reasons)
    )
    for warning in classification.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    att = text.attention
    kinds = Counter(text.layer_types)
    layers = f"{text.num_layers} layers" + (
        f" ({', '.join(f'{n} {kind}' for kind, n in kinds.items())})"
        if text.mixers.in_use()
        else ""
    )
    sizes = [f"hidden {text.hidden_size}", layers, f"vocab {text.vocab_size}"]
    if att is not None:
        sizes.append(f"{att.num_heads} heads / {att.num_kv_heads} kv heads of {att.head_dim}")
    if text.mlp is not None:
        sizes.append(f"MLP {text.mlp.intermediate_size}")
    if text.moe:
        sizes.append(f"{text.moe.num_experts} experts top-{text.moe.top_k}")
    console.print(f"[dim]{', '.join(sizes)}[/]")
    if spec.vision is not None:
        console.print(f"[dim]{_vision_summary(spec.vision)}[/]")
    table = Table(title="features", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("feature", style="cyan", no_wrap=True)
    table.add_column("value")
    if evidence:
        table.add_column("evidence", style="dim")
    for feature in features(spec):
        value = "absent" if feature.value is None else str(feature.value)  # (no attention)
        row = [feature.name, Text(value)]
        if evidence:  # source lines hold brackets rich would read as markup
            row.append(Text("\n".join(e.cite() for e in feature.evidence[:2]) or "-"))
        table.add_row(*row)
    console.print(table)
    if spec.unresolved:
        console.print("[bold red]unresolved[/] (a human must look):")
        for delta in spec.unresolved:
            detail = f": {delta.detail}" if delta.detail else ""
            console.print(f"  - {delta.what} at {delta.where}{detail}", markup=False)
    if analysis.review is not None:
        print_review(analysis, console)


def _vision_summary(vision: VisionSpec) -> str:
    from onboard.vision import LinearPatchTowerSpec, PixtralTowerSpec, QwenVLTowerSpec

    tower, select = vision.tower, vision.select
    if isinstance(tower, LinearPatchTowerSpec):
        order = {"hwc": "row, column, channel", "chw": "channel, row, column"}[tower.layout]
        return (
            f"vision: no tower, one linear ({tower.name_of('patch')}"
            + (", biased" if tower.patch_bias else "")
            + f") from flattened {tower.patch_size} x {tower.patch_size} x {tower.num_channels} "
            f"patches ({order}, as {tower.processor} makes them) to the text's "
            f"{tower.hidden_size}; "
            f"placeholder config.{vision.merge.image_token_key} = {vision.merge.image_token_id}"
        )
    read = (
        "the post-normed last state"
        if select.post_norm
        else "hidden state " + ", ".join(str(i) for i in select.layers)
    )
    if tower.class_token:
        read += ", without the class token" if select.drop_class_token else ", with the class token"
    steps = ">".join(s.activation if s.op == "activation" else s.op for s in vision.projector.steps)
    if isinstance(tower, QwenVLTowerSpec):
        mrope = vision.merge.mrope
        images = (
            f"flattened patches of {tower.patch_size} x {tower.temporal_patch_size} frames over "
            f"image_grid_thw, "
            + (
                f"{tower.position_embeddings} learned positions resampled to the grid, "
                if tower.position_embeddings
                else ""
            )
            + f"2-D RoPE, windows of {tower.window_size} px, full attention in layers "
            f"{list(tower.fullatt_layers)}, M-RoPE sections "
            + (f"{list(mrope.sections)} {mrope.layout}" if mrope else "?")
            + (
                f" (HF's fallback at {mrope.default_at})"
                if mrope is not None and mrope.default_at
                else ""
            )
            + (
                f", DeepStack from tower layers {list(vision.deepstack.layers)} into the first "
                f"{len(vision.deepstack.layers)} text layers"
                if vision.deepstack is not None
                else ""
            )
        )
    elif isinstance(tower, PixtralTowerSpec):
        images = (
            f"images of any size up to {tower.image_size} / patch {tower.patch_size}, 2-D RoPE "
            f"(theta {tower.rope_theta:g})"
        )
    else:
        images = (
            f"image {tower.image_size} / patch {tower.patch_size} ({tower.num_patches} patches)"
        )
    return (
        f"vision: {vision.towers.kind} tower, hidden {tower.hidden_size}, {tower.num_layers} "
        f"layers, {images}; features: {read}; projector {steps}; placeholder "
        f"config.{vision.merge.image_token_key} = {vision.merge.image_token_id}"
    )


def print_review(analysis: Analysis, console: Console) -> None:
    """Remote code: read, not run; how it compares with transformers, line by line."""
    review = analysis.review
    assert review is not None
    files = ", ".join(f"{n} sha256:{h[:12]}" for n, h in analysis.spec.source.remote_files)
    console.print(f"[yellow]remote code[/], read as text, never imported: {files}")
    ranking = ", ".join(f"{t} {score:.2f}" for t, score in review.ranking)
    console.print(f"closest transformers code: {ranking}")
    for match in review.roles:
        console.print(
            f"  {match.role}: {match.remote_class} ~ {match.hf_class} ({match.model_type}, "
            f"{match.similarity:.2f})",
            markup=False,
        )
    if review.unexplained:
        console.print(
            f"[bold yellow]{len(review.unexplained)} differing lines no detected feature explains"
            "[/] (review them; parity with --trust-remote-code proves the reading):"
        )
        for line in review.unexplained:
            console.print(f"  {line.where} [{line.role}] {line.code}", markup=False)


def print_proposal(proposal: Proposal, console: Console, *, limit: int = 3) -> None:
    if proposal.hidden:
        console.print(f"[dim]hidden by --treat-as-new: {', '.join(proposal.hidden)}[/]")
    if proposal.already_supported is not None:
        v = proposal.already_supported
        console.print(
            f"[green]already supported[/]: {proposal.model_type} -> {v.class_name}; nothing to "
            "generate (--treat-as-new regenerates it from another class)"
        )
    table = Table(title="closest variants", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("class", style="cyan")
    table.add_column("key")
    table.add_column("deltas (generated code)")
    for candidate in proposal.candidates[:limit]:
        deltas = ", ".join(f"{d.feature}={d.wanted}" for d in candidate.deltas) or "none"
        if candidate.notes:
            deltas += f" [dim]({'; '.join(candidate.notes)})[/]"
        table.add_row(candidate.variant.class_name, candidate.variant.key, deltas)
    console.print(table)
    if proposal.by_role:
        roles = ", ".join(f"{role}: {v.key} ({v.class_name})" for role, v in proposal.by_role)
        console.print(f"[dim]nearest registered HF ancestor per role: {roles}[/]")
    for blocker in proposal.blockers:
        console.print(f"[bold red]cannot generate:[/] {blocker}")


def print_parity(report: ParityReport, console: Console, *, generated: bool = True) -> None:
    """``generated``: the class under test is onboard's output (else the library's own)."""
    table = Table(
        title=f"parity: {report.model_class} vs transformers ({report.seconds:.1f} s)",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for column in ("provider", "check", "status", "max abs", "cosine", "argmax", "detail"):
        table.add_column(column)
    for check in report.checks:
        m = check.metrics
        detail = check.detail + (f" [bug {check.bug}]" if check.bug else "")
        table.add_row(
            check.provider,
            Text(check.name),
            Text(str(check.status), style=STATUS_STYLE[check.status]),
            f"{m.max_abs:.1e}" if m else "",
            f"{m.cosine:.8f}" if m else "",
            f"{m.argmax_agree:.0%}" if m else "",
            Text(detail),
        )
    console.print(table)
    for note in report.notes:
        console.print(Text(note, style="dim"))
    if report.weights is not None:
        print_weight_map(report.weights, console)
    for bug in report.bugs:
        console.print(
            f"[yellow]target-library bug {bug.id}[/]: {bug.title}\n  [dim]{bug.evidence}[/]"
        )
    for divergence in report.divergences:
        console.print(Text(divergence.line(), style="red"))
    verdict = "[green]parity passed[/]" if report.passed else "[bold red]parity FAILED[/]"
    culprit = (
        "generated code or its config is wrong"
        if generated
        else f"the library's own {report.model_class} computes something else"
    )
    if report.divergences:
        culprit += f", from {report.divergences[0].where} on"
    blame = f" ({culprit})" if not report.passed else ""
    console.print(verdict + blame)


def print_comparison(comparison: Comparison, console: Console) -> None:
    table = Table(
        title=f"{comparison.left} vs {comparison.right}",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for column in ("feature", comparison.left, comparison.right):
        table.add_column(column)
    for feature, left, right in comparison.rows:
        style = "bold yellow" if left != right else "dim"
        table.add_row(Text(feature, style=style), str(left), str(right))
    console.print(table)
    if comparison.capability_differences:
        flags = Table(
            title="behind config flags", title_justify="left", show_edge=False, pad_edge=False
        )
        for column in ("feature", comparison.left, comparison.right):
            flags.add_column(column)
        for row in comparison.capability_differences:
            flags.add_row(*row)
        console.print(flags)
        for side, found in (
            (comparison.left, comparison.left_flags),
            (comparison.right, comparison.right_flags),
        ):
            for flag in found:
                where = flag.evidence[0].cite() if flag.evidence else "no source line"
                console.print(f"  {side} {flag.key}: {where}", highlight=False)
    console.print(
        f"{len(comparison.differences)} of {len(comparison.rows)} features differ; ancestry "
        f"{' -> '.join(comparison.left_chain)} | {' -> '.join(comparison.right_chain)}"
        + (f"; common ancestor {comparison.common_ancestor}" if comparison.common_ancestor else "")
    )


def print_weight_map(proof: WeightMapProof, console: Console) -> None:
    table = Table(
        title=f"weight map: {proof.summary()}",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for column in ("group", "checkpoint tensors", "placed", ""):
        table.add_column(column)
    for row in proof.rows:
        style = "green" if row.placed == row.checkpoint else "bold red"
        table.add_row(
            row.group, str(row.checkpoint), Text(str(row.placed), style=style), row.detail
        )
    console.print(table)
    for problem in proof.problems[:12]:
        console.print(f"  [red]-[/] {problem}", markup=True, highlight=False)


def print_new(result: NewResult, console: Console) -> None:
    print_source(result.source, console)
    print_analysis(result.analysis, console)
    print_proposal(result.proposal, console)
    if result.rendered is not None:
        print_result(result.rendered, console, show_diffs=result.rendered.dry_run)
    if result.parity is not None:
        generated = result.proposal.already_supported is None
        print_parity(result.parity, console, generated=generated)
    if result.library_tests is not None:
        print_library_tests(result.library_tests, console)
    if result.staged is not None:
        console.print(
            f"[bold red]nothing written[/]: the generated files are kept in {result.staged} "
            "for inspection"
        )
    if result.timings:
        total = sum(s for _, s in result.timings)
        laps = ", ".join(f"{name} {s:.1f}s" for name, s in result.timings)
        console.print(f"[dim]{laps}; total {total:.1f}s[/]")


def print_library_tests(report: LibraryTestReport, console: Console) -> None:
    style = "green" if report.passed else "bold red"
    console.print(Text(f"library tests: {report.summary()}", style=style))
    for test in report.broken:
        console.print(
            f"  [red]broken[/] {escape(test.test)}: {escape(test.message)}", highlight=False
        )
    for test in report.unrunnable[:5]:
        console.print(
            f"  [dim]fails before the change[/] {escape(test.test)}: {escape(test.message)}",
            highlight=False,
        )
    if not report.passed:
        console.print(
            "[bold red]nothing written[/]: the change breaks the library's own tests above "
            "(--no-library-tests writes it anyway)"
        )


def new_to_dict(result: NewResult) -> dict[str, Any]:
    return {
        "model": result.source.model_id,
        "origin": str(result.source.origin),
        "notices": list(result.source.notices),
        "classification": result.analysis.classification.to_dict(),
        "spec": result.analysis.spec.to_dict(),
        "proposal": proposal_to_dict(result.proposal),
        "files": result.rendered.to_json() if result.rendered else None,
        "root": str(result.root) if result.root else None,
        "parity": result.parity.to_dict() if result.parity else None,
        "staged": str(result.staged) if result.staged else None,
        "library_tests": result.library_tests.to_dict() if result.library_tests else None,
        "review": review_to_dict(result.analysis),
        "refused": result.refused,
        "timings": [{"phase": phase, "seconds": round(s, 3)} for phase, s in result.timings],
        "ok": result.ok,
    }


def review_to_dict(analysis: Analysis) -> dict[str, Any] | None:
    """The remote-code comparison with transformers, or None for transformers' own models."""
    import dataclasses

    return dataclasses.asdict(analysis.review) if analysis.review is not None else None


def features_to_dict(analysis: Analysis) -> list[dict[str, Any]]:
    from onboard.analysis.features import features

    return [
        {
            "name": f.name,
            "value": f.value,
            "confidence": f.confidence,
            "evidence": [e.cite() for e in f.evidence],
        }
        for f in features(analysis.spec)
    ]


def proposal_to_dict(proposal: Proposal) -> dict[str, Any]:
    return {
        "already_supported": proposal.already_supported.class_name
        if proposal.already_supported
        else None,
        "hidden": list(proposal.hidden),
        "blockers": list(proposal.blockers),
        "by_role": {role: {"key": v.key, "class": v.class_name} for role, v in proposal.by_role},
        "candidates": [
            {
                "class": c.variant.class_name,
                "key": c.variant.key,
                "deltas": [d.__dict__.copy() for d in c.deltas],
                "notes": list(c.notes),
            }
            for c in proposal.candidates
        ],
    }


def error_panel(message: str) -> Panel:
    return Panel(Group(Text(message)), title="error", border_style="red")
