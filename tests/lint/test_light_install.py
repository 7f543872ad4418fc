"""`onboard check` in the pre-commit hook's light environment: it imports none of the packages
the base install leaves out, and says which rules it skips where transformers is missing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from onboard.lint import runner
from onboard.lint.rules import RULES
from onboard.lint.runner import check
from tests.lint.conftest import MakeRepo

# Packages of the `analysis`/`mobius`/`automodel` extras; the base install has none of them
HEAVY = ("torch", "transformers", "onnxruntime", "mobius", "onnx", "numpy", "nemo_automodel")
# Runs the console entry point in-process, then lists the heavy packages it imported
_PROBE = """
import json, sys
heavy = set(json.loads(sys.argv.pop()))
from onboard.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
loaded = sorted({m.split(".")[0] for m in sys.modules} & heavy)
print(json.dumps({"code": code, "heavy": loaded}), file=sys.stderr)
"""


def test_check_imports_no_heavy_package(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo('"qwen-3": ModelRegistration(Qwen3CausalLMModel),')
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, "check", "--repo", str(repo), "--json", json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    probe = json.loads(run.stderr.strip().splitlines()[-1])
    report = json.loads(run.stdout)
    # the check ran, and its transformers rules read the installed transformers without import
    assert probe["code"] == report["exit_code"] == 0, run.stderr
    assert "OB103" in {f["code"] for f in report["findings"]}
    assert probe["heavy"] == []


def test_rules_reading_transformers_are_skipped_without_it(
    mobius_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = mobius_repo('"qwen-3": ModelRegistration(Qwen3CausalLMModel),')
    assert check(repo, select=["OB1"]).skipped == ()
    monkeypatch.setattr(runner, "load_catalog", lambda: None)
    result = check(repo, select=["OB1", "OB5"])
    assert result.skipped == ("OB103", "OB501")
    assert "OB103" not in result.rules and "OB101" in result.rules
    assert result.findings == ()
    wanted = {r.code for r in RULES if r.reads_transformers and "mobius" in r.targets}
    assert set(check(repo).skipped) == wanted
