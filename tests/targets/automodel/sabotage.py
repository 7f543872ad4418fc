"""Break one line of a generated AutoModel file and run parity on the package again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from onboard.parity.report import ParityReport, Status
from onboard.pipeline import NewOptions, NewResult, onboard_new
from onboard.targets.automodel import TARGET
from tests.new_types import default_config_dir


def parity_with(result: NewResult, file: str, old: str, new: str) -> ParityReport:
    """Parity of ``result``'s generated package with ``old`` (which must occur) in ``file``
    (relative to the model's package) replaced by ``new``."""
    module = result.root / result.plan.model_file
    path = module.parent / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return TARGET.parity(
        result.analysis, result.proposal, (module, result.plan.model_class), result.library
    )


def statuses(report: ParityReport) -> dict[str, Status]:
    return {c.name: c.status for c in report.checks}


def run_generated_tests(out: Path, keyword: str) -> subprocess.CompletedProcess[str]:
    """Run the generated tests under ``out`` whose names match ``keyword``, in a subprocess with
    the overlay active (generated code never runs in onboard's process), as parity runs them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    tests = [str(p) for p in sorted(out.glob("tests/unit_tests/models/*/test_*.py"))]
    assert tests, f"no generated tests under {out}"
    return subprocess.run(
        [sys.executable, "-c", _RUN, str(out), keyword, *tests],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def generate_default(model_type: str, tmp_path: Path) -> tuple[Path, NewResult]:
    """``model_type`` from transformers' default config, ``--treat-as-new`` into an out
    folder, without parity: the folder and the result."""
    folder = default_config_dir(model_type, tmp_path / "models")
    out = tmp_path / "out"
    options = NewOptions(
        model=str(folder), target="automodel", treat_as_new=True, out=out, parity=False
    )
    return out, onboard_new(options)


def assert_generated_tests_catch(out: Path, path: Path, old: str, new: str, keyword: str) -> None:
    """The generated tests matching ``keyword`` pass on the generated code and every one of
    them fails once ``old`` (which occurs once) in ``path`` is replaced by ``new``."""
    text = path.read_text()
    assert text.count(old) == 1
    clean = run_generated_tests(out, keyword)
    assert clean.returncode == 0 and "passed" in clean.stdout, clean.stdout[-3000:]
    path.write_text(text.replace(old, new))
    broken = run_generated_tests(out, keyword)
    summary = broken.stdout.strip().splitlines()[-1]  # every selected test fails
    assert broken.returncode == 1 and "failed" in summary and "passed" not in summary, summary


REPO = Path(__file__).resolve().parents[3]
_RUN = """
import os, sys
from pathlib import Path
from onboard.targets.automodel.overlay import install
install([Path(sys.argv[1])])
import pytest
sys.exit(pytest.main([*sys.argv[3:], "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
    "-c", os.devnull, "--rootdir", sys.argv[1], "-k", sys.argv[2]]))
"""
