"""The parity subprocess: ``python -m onboard.targets.automodel.runner REQUEST.json RESULT.json``.

Generated code runs here, never in onboard's process: the overlay makes the generated package
importable under its library name, pytest runs the generated tests in-process, and onboard's
shared scenarios (prefill, decode, padding, KV cache) compare the model with the HF reference.
Everything comes back as plain JSON, so a crash in generated code cannot take onboard down.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from onboard.targets.automodel.bugs import (
    BY_ID,
    CUDA_CONSTRUCTION,
    FINAL_NORM_OFFSET,
    LibraryBug,
    add_final_norm_offset,
    asks_for_cuda,
    cpu_construction,
    move_cuda_devices_to_cpu,
)
from onboard.targets.automodel.overlay import install

LM_HEAD = "lm_head.weight"
EMBEDDINGS = "model.embed_tokens.weight"


@dataclass(frozen=True)
class Request:
    module: str  # the module of the class to check
    class_name: str
    tiny_config: dict[str, Any]
    device: str = "cpu"
    overlay: tuple[str, ...] = ()  # roots holding generated nemo_automodel/... files
    checkout: str | None = None  # an Automodel checkout to import instead of the installed one
    tests: str | None = None  # the generated tests' directory
    device_env: str = "AUTOMODEL_TEST_DEVICE"
    prompt_len: int = 9  # the shared scenarios' prompt (longer where a mixer scans in chunks)
    compare_kv: bool = True
    known_bugs: tuple[str, ...] = ()  # ids in bugs.py of the library class under test
    vision: bool = False  # a VLM: the vision scenarios (images, merge, text-only) instead


@dataclass
class Result:
    tests: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    weights: dict[str, Any] | None = None
    bugs: list[dict[str, str]] = field(default_factory=list)
    divergences: list[dict[str, Any]] = field(default_factory=list)


def main(argv: list[str]) -> int:
    request_path, result_path = (Path(a) for a in argv)
    data = json.loads(request_path.read_text(encoding="utf-8"))
    request = Request(
        **{
            **data,
            "overlay": tuple(data.get("overlay", ())),
            "known_bugs": tuple(data.get("known_bugs", ())),
        }
    )
    if request.checkout:
        sys.path.insert(0, request.checkout)
    install([Path(root) for root in request.overlay])
    os.environ[request.device_env] = request.device
    result = Result()
    if request.tests:
        result.tests = run_tests(Path(request.tests))
    result.checks, result.weights, result.bugs, result.divergences = run_scenarios_on(request)
    result_path.write_text(json.dumps(asdict(result)), encoding="utf-8")
    return 0


# -- generated tests --------------------------------------------------------------------------


class _Outcomes:
    """A pytest plugin that keeps one outcome per test (a failed setup counts as the test)."""

    def __init__(self) -> None:
        self.outcomes: dict[str, dict[str, Any]] = {}
        self._files: dict[str, str] = {}  # test name -> the file that first had it

    def _name(self, nodeid: str) -> str:
        """The test's name, with its file's where another file has a test of that name."""
        path, _, name = nodeid.rpartition("::")
        first = self._files.setdefault(name, path)
        return name if first == path else f"{Path(path).name}::{name}"

    def pytest_runtest_logreport(self, report: Any) -> None:
        name = self._name(report.nodeid)
        if report.when == "call" or report.outcome != "passed":
            if name in self.outcomes and self.outcomes[name]["outcome"] != "passed":
                return  # keep the first failure (a teardown error must not hide it)
            self.outcomes[name] = {
                "name": name,
                "outcome": report.outcome,
                "detail": _failure_line(report),
                "seconds": round(report.duration, 3),
            }

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.outcomes[report.nodeid or "collection"] = {
                "name": f"collect {Path(report.nodeid).name}",
                "outcome": "failed",
                "detail": _failure_line(report),
                "seconds": 0.0,
            }


def _failure_line(report: Any) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:240] if lines else ""


def run_tests(directory: Path) -> list[dict[str, Any]]:
    """Run the generated tests in this process (the overlay is active) and keep each outcome."""
    import pytest

    plugin = _Outcomes()
    pytest.main(
        [
            str(directory),
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(directory),
            "-c",
            os.devnull,  # the generated tests need no configuration; ignore any pyproject
            "-W",
            "ignore::DeprecationWarning",
        ],
        plugins=[plugin],
    )
    if not plugin.outcomes:
        return [{"name": "collect", "outcome": "failed", "detail": "no tests ran", "seconds": 0}]
    return list(plugin.outcomes.values())


# -- shared scenarios ---------------------------------------------------------------------------


Outcome = tuple[
    list[dict[str, Any]], dict[str, Any] | None, list[dict[str, str]], list[dict[str, Any]]
]


def run_scenarios_on(request: Request) -> Outcome:
    try:
        cls = getattr(importlib.import_module(request.module), request.class_name)
    except Exception as exc:  # reported as a failed check, the way a user would meet it
        return _failed_step("import", request.device, exc)
    bugs = tuple(BY_ID[bug_id] for bug_id in request.known_bugs)
    try:
        if request.vision:
            from onboard.targets.automodel.vision_runner import vision_scenarios

            checks, proof = vision_scenarios(cls, request)
            return [_check_dict(c) for c in checks], proof, [], []
        return _scenarios(cls, request, bugs)
    except Exception as exc:
        return _failed_step("build", request.device, exc)


def _failed_step(step: str, device: str, exc: BaseException) -> Outcome:
    from onboard.parity.report import Check, Status

    return [_check_dict(Check(step, device, Status.FAIL, detail=_error(exc)))], None, [], []


def _scenarios(cls: type, request: Request, bugs: tuple[LibraryBug, ...]) -> Outcome:
    """Weights and scenarios; a known bug of a library class that explains a failure is named."""
    import torch

    from onboard.hf_config import make_hf_config
    from onboard.parity.divergence import localise, worth_localising
    from onboard.parity.harness import Scenarios, run_scenarios
    from onboard.parity.reference import HFRunner, build_reference, saved_checkpoint
    from onboard.parity.report import Status

    reference = build_reference(make_hf_config(request.tiny_config), device=request.device)
    checkpoint = saved_checkpoint(reference)
    config = make_hf_config(request.tiny_config)
    config._attn_implementation = "eager"  # as the reference runs
    config.dtype = torch.float32
    scenarios = Scenarios(compare_kv=request.compare_kv, prompt_len=request.prompt_len)
    checks, found = [], []
    model, build = _build(cls, config, request.device, bugs)
    if build is not None:
        checks.append(build[0])
        found.append(build[1])

    def measure(model: Any, fix: Any = None) -> tuple[list[Any], dict[str, Any]]:
        """Weights as loaded, then the scenarios (after ``fix``, a bug's counterfactual)."""
        weights, proof = load_checked(model.to(request.device).eval(), checkpoint)
        if proof["problems"]:
            return [weights], proof
        if fix is not None:
            fix(model)
        runner = HFRunner(model)
        runner.provider = request.device
        hf = HFRunner(reference)
        return [weights, *run_scenarios(hf, runner, config.vocab_size, scenarios)], proof

    measured, proof = measure(model)
    failed = [c for c in measured if c.status is Status.FAIL]
    offset_bug = next((b for b in bugs if b.workaround == FINAL_NORM_OFFSET), None)
    if failed and offset_bug is not None and not proof["problems"]:
        rebuilt, _ = _build(cls, config, request.device, bugs)
        rerun, _ = measure(rebuilt, add_final_norm_offset)
        if not any(c.status is Status.FAIL for c in rerun):
            measured = [c.excused_by(offset_bug.id) for c in measured]
            evidence = (
                f"max abs {_worst(failed):.2g} as built; {_worst(rerun):.2g} with "
                f"{offset_bug.trigger}"
            )
            found.append(_found(offset_bug, evidence))
    divergences = []
    if worth_localising(measured):
        candidate = HFRunner(model, probe=True)
        candidate.provider = request.device
        reference_runner = HFRunner(reference, probe=True)
        divergence = localise(reference_runner, candidate, config.vocab_size, scenarios)
        divergences = [divergence.to_dict()] if divergence else []
    return [_check_dict(c) for c in checks + measured], proof, found, divergences


def _build(cls: type, config: Any, device: str, bugs: tuple[LibraryBug, ...]) -> tuple[Any, Any]:
    """The model, and (an xfail build check, the bug) when only a known bug's shim builds it."""
    from onboard.parity.report import Check, Status

    try:
        return construct(cls, config), None
    except Exception as exc:
        shim = next((b for b in bugs if b.workaround == CUDA_CONSTRUCTION), None)
        if shim is None or not asks_for_cuda(exc):
            raise
        error = _error(exc)
    with cpu_construction():
        model = construct(cls, config)
    move_cuda_devices_to_cpu(model)
    detail = f"{error}; builds with {shim.trigger}"
    check = Check("build", device, Status.XFAIL, detail=detail, bug=shim.id)
    return model, (check, _found(shim, detail))


def _worst(checks: list[Any]) -> float:
    return max((c.metrics.max_abs for c in checks if c.metrics is not None), default=0.0)


def _found(bug: LibraryBug, evidence: str) -> dict[str, str]:
    return {"id": bug.id, "title": bug.title, "evidence": evidence}


def construct(cls: type, config: Any) -> Any:
    """The class with AutoModel's CPU backend spelt out (T14), if its __init__ takes one."""
    from nemo_automodel.components.models.common import BackendConfig

    if "backend" not in inspect.signature(cls.__init__).parameters:
        return cls(copy.deepcopy(config))
    backend = BackendConfig(attn="sdpa", linear="torch", rms_norm="torch_fp32", rope_fusion=False)
    return cls(copy.deepcopy(config), backend=backend)


def load_checked(model: Any, checkpoint: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Prove the adapter's weight map, load the checkpoint through it, check the export."""
    from onboard.parity.report import Check, Status
    from onboard.weightmap import WeightMapProof, prove

    adapter = getattr(model, "state_dict_adapter", None)
    tied = bool(getattr(model.config, "tie_word_embeddings", False))

    def convert(tensors: dict[str, Any]) -> dict[str, Any]:
        native = adapter.from_hf(tensors) if adapter else dict(tensors)
        if tied and LM_HEAD not in native and EMBEDDINGS in native:
            native[LM_HEAD] = native[EMBEDDINGS]  # what AutoModel's checkpointer does
        return native

    state = model.state_dict()
    # A tied head is the embedding's own tensor under a second name: not a parameter to fill.
    aliases = {n for n, _ in model.named_parameters(remove_duplicate=False)} - {
        n for n, _ in model.named_parameters()
    }
    parameters = {k: tuple(v.shape) for k, v in state.items() if k not in aliases}
    try:
        proof = prove(
            {k: tuple(v.shape) for k, v in checkpoint.items()},
            convert,
            parameters,
            derived_ok=aliases,
        )
    except Exception as exc:  # an adapter that raises on the checkpoint fails the weight map
        problem = f"converting the checkpoint raised {_error(exc)}"
        failed = WeightMapProof(len(checkpoint), len(parameters), (), (problem,))
        device = str(next(model.parameters()).device)
        return Check("weights", device, Status.FAIL, detail=problem), asdict(failed)
    problems = list(proof.problems)
    if proof.ok:
        model.load_state_dict(convert(dict(checkpoint)), strict=True)
        state = model.state_dict()
        exported = adapter.to_hf(state) if adapter else _without_tied_head(state, tied)
        differ = _export_differences(exported, checkpoint)
        if differ:
            problems.append(f"to_hf(state_dict) differs from the checkpoint: {differ}")
    via = f" via {type(adapter).__name__}" if adapter else " (no adapter)"
    detail = f"{proof.summary()}{via}; " + (
        "; ".join(problems[:4]) if problems else "every tensor placed once, export is exact"
    )
    status = Status.FAIL if problems else Status.PASS
    device = str(next(model.parameters()).device)
    return Check("weights", device, status, detail=detail), {**asdict(proof), "problems": problems}


def _without_tied_head(state: dict[str, Any], tied: bool) -> dict[str, Any]:
    return {k: v for k, v in state.items() if not (tied and k == LM_HEAD)}


def _export_differences(exported: dict[str, Any], checkpoint: dict[str, Any]) -> str:
    import torch

    missing = sorted(set(checkpoint) - set(exported))
    extra = sorted(set(exported) - set(checkpoint))
    if missing or extra:
        return f"missing {missing[:3]}, extra {extra[:3]}"
    for name, tensor in checkpoint.items():
        value = exported[name].detach().cpu()
        if value.shape != tensor.shape or value.dtype != tensor.dtype:
            got, want = (f"{tuple(t.shape)} {t.dtype}" for t in (value, tensor))
            return f"{name}: {got} != {want}"
        if not torch.equal(value, tensor):
            return f"{name}: values differ"
    return ""


def _check_dict(check: Any) -> dict[str, Any]:
    out = {
        "name": check.name,
        "provider": check.provider,
        "status": str(check.status),
        "detail": check.detail,
        "bug": check.bug,
    }
    if check.metrics is not None:
        out["metrics"] = asdict(check.metrics)
    return out


def _error(exc: BaseException) -> str:
    first = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
