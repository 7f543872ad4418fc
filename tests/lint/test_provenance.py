"""OB501: a generated module whose HF modeling source changed since generation."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

from onboard.lint import check
from onboard.lint.rules.provenance import read_header
from tests.lint.conftest import MakeRepo

EXAMPLE = Path(__file__).parents[2] / "generated_examples/qwen3/mobius/src/mobius/models/qwen3.py"


def modeling_sha16(name: str) -> str:
    spec = importlib.util.find_spec("transformers")
    assert spec is not None and spec.origin is not None
    folder = name.removeprefix("modeling_").removesuffix(".py")
    path = Path(spec.origin).parent / "models" / folder / name
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def header(sha: str, name: str = "modeling_qwen3.py") -> str:
    return (
        "# Copyright (c) Microsoft Corporation.\n"
        "# Licensed under the MIT License.\n"
        "#\n"
        "# onboard 0.1.0: generated from Qwen/Qwen3-0.6B (revision unknown), transformers 5.18.0\n"
        f"# {name} sha256:{sha}.\n"
        "# Closest mobius class: CausalLMModel (registry key llama).\n"
        "# Regenerate: onboard new Qwen/Qwen3-0.6B --target mobius --treat-as-new\n"
        "\n"
        '"""Qwen3."""\n'
    )


def test_header_of_the_generated_example_is_read() -> None:
    found = read_header(EXAMPLE)
    assert found is not None
    assert (found.line, found.modeling_file, found.transformers) == (
        5,
        "modeling_qwen3.py",
        "5.18.0",
    )
    assert found.command is None  # the command lives in the answers file, not the library's code


def test_generated_module_with_the_current_hash_is_clean(mobius_repo: MakeRepo) -> None:
    current = {"src/mobius/models/qwen3.py": header(modeling_sha16("modeling_qwen3.py"))}
    assert check(mobius_repo(extra=current), select=["OB501"]).findings == ()


def test_generated_module_whose_source_changed(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(extra={"src/mobius/models/qwen3.py": header("0123456789abcdef")})
    [finding] = check(repo, select=["OB501"]).findings
    assert (finding.code, finding.path, finding.line) == (
        "OB501",
        "src/mobius/models/qwen3.py",
        5,
    )
    assert finding.message.startswith(
        "generated from modeling_qwen3.py sha256:0123456789abcdef (transformers 5.18.0), but it "
        f"hashes to {modeling_sha16('modeling_qwen3.py')} in the installed transformers "
    )
    assert finding.message.endswith(
        "; re-run `onboard new Qwen/Qwen3-0.6B --target mobius --treat-as-new` and review the diff"
    )


def test_the_command_to_rerun_comes_from_the_answers_file(mobius_repo: MakeRepo) -> None:
    """Headers no longer carry the command: the answers file that records the module does."""
    text = header("0123456789abcdef").replace(
        "# Regenerate: onboard new Qwen/Qwen3-0.6B --target mobius --treat-as-new\n", ""
    )
    answers = {
        "files": {"src/mobius/models/qwen3.py": "0" * 64},
        "provenance": {"command": "onboard new Qwen/Qwen3-0.6B --target mobius --repo ."},
    }
    repo = mobius_repo(
        extra={"src/mobius/models/qwen3.py": text, ".onboard/qwen3.json": json.dumps(answers)}
    )
    [finding] = check(repo, select=["OB501"]).findings
    assert finding.message.endswith(
        "; re-run `onboard new Qwen/Qwen3-0.6B --target mobius --repo .` and review the diff"
    )


def test_generated_automodel_module_whose_source_is_gone(automodel_repo: MakeRepo) -> None:
    license_lines = "# Copyright (c) 2026, NVIDIA CORPORATION. All rights reserved.\n#\n"
    text = license_lines + header("0123456789abcdef", "modeling_qwen99.py").split("#\n", 1)[1]
    repo = automodel_repo(extra={"nemo_automodel/components/models/qwen99/model.py": text})
    [finding] = check(repo, select=["OB501"]).findings
    assert finding.path == "nemo_automodel/components/models/qwen99/model.py"
    assert (
        "but modeling_qwen99.py no longer exists in the installed transformers" in finding.message
    )


def test_hand_written_modules_are_ignored(mobius_repo: MakeRepo) -> None:
    plain = {"src/mobius/models/qwen3.py": "# modeling_qwen3.py sha256:0123456789abcdef\n"}
    assert check(mobius_repo(extra=plain), select=["OB501"]).findings == ()
