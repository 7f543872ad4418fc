"""--fix: inline family / variant / test_model_id move to their side tables, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.errors import BadInputError
from onboard.lint import check
from onboard.lint.findings import Edit
from onboard.lint.fixes import edited_source
from tests.lint.conftest import MakeRepo
from tests.lint.repos import MOBIUS_REGISTRY

INLINE = """
"llama": ModelRegistration(CausalLMModel, family="llama"),  # keep this comment
"qwen3": ModelRegistration(
    Qwen3CausalLMModel,
    family="qwen",  # dropped with its option
    task="text-generation",
    variant="qk-norm",
),
"mistral": ModelRegistration(
    CausalLMModel, test_model_id="mistralai/Mistral-7B-v0.1"
),
"""


def test_fix_moves_options_and_keeps_the_rest(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(INLINE)
    result = check(repo, select=["OB201"], fix=True)
    assert [f.code for f in result.fixed] == ["OB201"] * 4
    assert result.findings == ()
    text = (repo / MOBIUS_REGISTRY).read_text()
    assert '"llama": ModelRegistration(CausalLMModel),  # keep this comment\n' in text
    assert (
        '    "qwen3": ModelRegistration(\n'
        "        Qwen3CausalLMModel,\n"
        '        task="text-generation",\n'
        "    ),\n"
    ) in text
    assert '    "mistral": ModelRegistration(\n        CausalLMModel\n    ),\n' in text
    assert (
        '    "llama": "meta-llama/Llama-2-7b-hf",\n    "mistral": "mistralai/Mistral-7B-v0.1",\n}'
        in text
    )
    assert '    "llama": "llama",\n    "qwen3": "qwen",\n}' in text
    assert '_VARIANT_LABELS: dict[str, str] = {\n    "qwen3": "qk-norm",\n}' in text
    compile(text, MOBIUS_REGISTRY, "exec")


def test_fix_is_idempotent(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(INLINE)
    check(repo, fix=True)
    once = (repo / MOBIUS_REGISTRY).read_text()
    again = check(repo, fix=True)
    assert again.fixed == ()
    assert (repo / MOBIUS_REGISTRY).read_text() == once


def test_conflicting_value_is_left_for_a_human(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo('"llama": ModelRegistration(CausalLMModel, family="meta"),')
    before = (repo / MOBIUS_REGISTRY).read_text()
    result = check(repo, select=["OB201"], fix=True)
    assert result.fixed == ()
    assert [f.code for f in result.findings] == ["OB201"]
    assert (repo / MOBIUS_REGISTRY).read_text() == before


def test_fix_only_touches_selected_and_restricted_findings(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(INLINE)
    before = (repo / MOBIUS_REGISTRY).read_text()
    assert check(repo, ignore=["OB201"], fix=True).fixed == ()
    assert check(repo, files=[Path("README.md")], fix=True).fixed == ()
    assert (repo / MOBIUS_REGISTRY).read_text() == before


def test_fix_refuses_an_installed_package() -> None:
    with pytest.raises(BadInputError, match="--fix edits a checkout"):
        check(None, target="mobius", select=["OB201"], fix=True)


def test_single_line_call_loses_its_trailing_options() -> None:
    source = (
        "_REGISTRATIONS = {\n"
        '    "d": ModelRegistration(D, task="t", family="f", variant="v"),\n'
        '    "e": ModelRegistration(E, family="f"),\n'
        "}\n"
        "_FAMILY_OVERRIDES = {}\n"
        "_VARIANT_LABELS = {}\n"
    )
    edits = [
        Edit("move-option", "d", "family", "_FAMILY_OVERRIDES", '"f"'),
        Edit("move-option", "d", "variant", "_VARIANT_LABELS", '"v"'),
        Edit("drop-option", "e", "family", "_FAMILY_OVERRIDES", '"f"'),
    ]
    assert edited_source(source, edits) == (
        "_REGISTRATIONS = {\n"
        '    "d": ModelRegistration(D, task="t"),\n'
        '    "e": ModelRegistration(E),\n'
        "}\n"
        '_FAMILY_OVERRIDES = {\n    "d": "f",\n}\n'
        '_VARIANT_LABELS = {\n    "d": "v",\n}\n'
    )
