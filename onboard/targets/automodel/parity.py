"""Parity for AutoModel: the generated tests and the shared scenarios, run in a subprocess.

The subprocess (``runner.py``) imports generated code by its library name through an import
overlay of the staged folder, so the tests run exactly as they would in an Automodel checkout.
An ``--out`` plan carries the registry edit only as a patch; here the edited registry is written
to a scratch overlay too, so the generated registry test resolves the new entry either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onboard.errors import OnboardError
from onboard.parity.divergence import Divergence
from onboard.parity.harness import scenarios_for
from onboard.parity.report import Check, Metrics, ParityReport, Status, TargetBug
from onboard.targets.automodel.bugs import bugs_for
from onboard.targets.automodel.plan import DEVICE_ENV, TESTS_DIR, registry_with_entry
from onboard.targets.automodel.registry import PACKAGE, REGISTRY, entry_for
from onboard.targets.automodel.runner import Request
from onboard.weightmap import ProofRow, WeightMapProof

if TYPE_CHECKING:
    from onboard.analysis import Analysis
    from onboard.targets.base import Library, Proposal

RUNNER_TIMEOUT_S = 1800
_STATUS = {"passed": Status.PASS, "failed": Status.FAIL, "skipped": Status.SKIP}


def run_parity(
    analysis: Analysis,
    proposal: Proposal,
    generated: tuple[Path, str] | None,
    library: Library,
    *,
    device: str = "cpu",
) -> ParityReport:
    start = time.perf_counter()
    spec = analysis.spec
    with tempfile.TemporaryDirectory(prefix="onboard-automodel-") as scratch_dir:
        scratch = Path(scratch_dir)
        if generated is None:
            request = _registered_request(analysis, proposal, library, device)
        else:
            request = _generated_request(analysis, generated, library, device, scratch)
        result = _run(request, scratch)
    notes = ()
    if generated is not None and request.tests is None:
        notes = (f"no generated tests beside {generated[0]}: only the shared scenarios ran",)
    tests = [_test_check(t, device) for t in result.get("tests", ())]
    checks = [_check(c) for c in result.get("checks", ())]
    weights = result.get("weights")
    return ParityReport(
        target="automodel",
        model_type=spec.model_type,
        model_class=request.class_name,
        checks=(*tests, *checks),
        weights=_proof(weights) if weights else None,
        bugs=tuple(TargetBug(**bug) for bug in result.get("bugs", ())),
        divergences=tuple(Divergence.from_dict(d) for d in result.get("divergences", ())),
        versions=_versions(),
        seconds=time.perf_counter() - start,
        notes=notes,
    )


def package_root(model_file: Path) -> Path:
    """The folder holding ``nemo_automodel/`` for a generated ``.../<name>/model.py``."""
    for parent in model_file.resolve().parents:
        if parent.name == PACKAGE:
            return parent.parent
    raise OnboardError(f"{model_file} is not inside a {PACKAGE}/ folder")


def _generated_request(
    analysis: Analysis,
    generated: tuple[Path, str],
    library: Library,
    device: str,
    scratch: Path,
) -> Request:
    model_file, class_name = generated
    root = package_root(model_file)
    module = ".".join(model_file.resolve().relative_to(root).with_suffix("").parts)
    overlay = [str(root)]
    if not (root / REGISTRY).is_file():  # --out: the registry edit exists only as a patch
        registry = scratch / "overlay" / REGISTRY
        registry.parent.mkdir(parents=True)
        arch = analysis.spec.source.architecture
        registry.write_text(
            registry_with_entry(library, arch, module, class_name), encoding="utf-8"
        )
        overlay.append(str(scratch / "overlay"))
    tests = root / TESTS_DIR / model_file.parent.name
    scenarios = scenarios_for(analysis.spec.text)
    return Request(
        module=module,
        class_name=class_name,
        tiny_config=analysis.tiny.config,
        device=device,
        overlay=tuple(overlay),
        checkout=str(library.root) if library.is_checkout else None,
        tests=str(tests) if tests.is_dir() else None,
        device_env=DEVICE_ENV,
        prompt_len=scenarios.prompt_len,
        compare_kv=scenarios.compare_kv,
        vision=analysis.spec.vision is not None,
    )


def _registered_request(
    analysis: Analysis, proposal: Proposal, library: Library, device: str
) -> Request:
    variant = proposal.already_supported
    entry = entry_for(library.root, variant.key) if variant is not None else None
    if entry is None:
        raise OnboardError("nothing to check: no generated module and no registered class")
    scenarios = scenarios_for(analysis.spec.text)
    return Request(
        module=entry.module,
        class_name=entry.class_name,
        tiny_config=analysis.tiny.config,
        device=device,
        checkout=str(library.root) if library.is_checkout else None,
        device_env=DEVICE_ENV,
        prompt_len=scenarios.prompt_len,
        compare_kv=scenarios.compare_kv,
        known_bugs=bugs_for(entry.module, entry.class_name),
        vision=analysis.spec.vision is not None,
    )


def _run(request: Request, scratch: Path) -> dict[str, Any]:
    request_file, result_file = scratch / "request.json", scratch / "result.json"
    request_file.write_text(json.dumps(asdict(request)), encoding="utf-8")
    # No PYTEST_* variables: an outer pytest run must not configure the generated tests' run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PYTHONDONTWRITEBYTECODE="1", **{DEVICE_ENV: request.device})
    # The subprocess imports the onboard this process runs (a worktree's, not an installed one).
    here = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-m", "onboard.targets.automodel.runner"]
    try:
        run = subprocess.run(
            [*command, str(request_file), str(result_file)],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUNNER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return _failed(request, f"the parity subprocess ran past {RUNNER_TIMEOUT_S} s")
    if run.returncode != 0 or not result_file.is_file():
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
        return _failed(request, f"the parity subprocess failed (exit {run.returncode}): {tail[0]}")
    return json.loads(result_file.read_text(encoding="utf-8"))


def _failed(request: Request, detail: str) -> dict[str, Any]:
    check = {"name": "runner", "provider": request.device, "status": "fail", "detail": detail}
    return {"checks": [check]}


def _test_check(test: dict[str, Any], device: str) -> Check:
    # A pytest id in brackets would read as rich markup in the report table: use parentheses.
    name = test["name"].replace("[", "(").replace("]", ")")
    return Check(name, device, _STATUS.get(test["outcome"], Status.FAIL), None, test["detail"])


def _check(data: dict[str, Any]) -> Check:
    metrics = data.get("metrics")
    return Check(
        data["name"],
        data["provider"],
        Status(data["status"]),
        Metrics(**metrics) if metrics else None,
        data.get("detail", ""),
        data.get("bug"),
    )


def _proof(data: dict[str, Any]) -> WeightMapProof:
    return WeightMapProof(
        checkpoint_tensors=data["checkpoint_tensors"],
        parameters=data["parameters"],
        rows=tuple(ProofRow(**row) for row in data["rows"]),
        problems=tuple(data["problems"]),
    )


def _versions() -> tuple[tuple[str, str], ...]:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("nemo-automodel", "transformers", "torch"):
        try:
            found.append((package, version(package)))
        except PackageNotFoundError:
            continue
    return tuple(found)
