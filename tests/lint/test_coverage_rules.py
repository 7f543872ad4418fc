"""OB401-OB403: test configs, test cases and docs pages, read only where a checkout has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.lint import check
from tests.lint.conftest import MakeRepo, line_in
from tests.lint.repos import AUTOMODEL_REGISTRY, MOBIUS_REGISTRY

TEST_CONFIGS = """
CAUSAL_LM_CONFIGS: list[tuple[str, dict, bool]] = [
    ("llama", {}, True),
]
ENCODER_CONFIGS = [("bert", {}, True)]
ALL_CAUSAL_LM_CONFIGS = CAUSAL_LM_CONFIGS + [("mistral", {}, False)]
"""
CASE = """
model_id: "meta-llama/Llama-2-7b-hf"
model_type: "llama"
revision: "main"
task_type: "text-generation"
dtype: "float32"
level: "L4+L5"
"""
QWEN3_CASE = CASE.replace("meta-llama/Llama-2-7b-hf", "Qwen/Qwen3-0.6B")


def test_missing_test_config(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(extra={"tests/_test_configs.py": TEST_CONFIGS})
    [finding] = check(repo, select=["OB401"]).findings
    assert (finding.path, finding.line, finding.severity) == (
        MOBIUS_REGISTRY,
        line_in(repo / MOBIUS_REGISTRY, '"qwen3": ModelRegistration'),
        "warning",
    )
    assert finding.message == (
        "'qwen3' has no test config in tests/_test_configs.py (and no _COVERAGE_SKIP reason): "
        "its graph is never built by the L1/L3 tests"
    )
    assert finding.related == ("tests/_test_configs.py",)


def test_test_config_lists_and_the_coverage_skip_list(mobius_repo: MakeRepo) -> None:
    configs = TEST_CONFIGS + '\nSSM_CONFIGS = [("qwen3", {}, True)]\n'
    assert (
        check(mobius_repo(extra={"tests/_test_configs.py": configs}), select=["OB401"]).findings
        == ()
    )
    skip = {
        "tests/_test_configs.py": TEST_CONFIGS,
        "tests/model_coverage_test.py": '_COVERAGE_SKIP = {"qwen3": "alias"}\n',
    }
    assert check(mobius_repo(extra=skip), select=["OB401"]).findings == ()


def with_qwen3_test_id(repo: Path) -> Path:
    """Give the fixture's qwen3 entry a test model id (its llama entry has one already)."""
    registry = repo / MOBIUS_REGISTRY
    llama = '"llama": "meta-llama/Llama-2-7b-hf",\n'
    registry.write_text(
        registry.read_text().replace(llama, llama + '    "qwen3": "Qwen/Qwen3-0.6B",\n')
    )
    return repo


def test_missing_test_case(mobius_repo: MakeRepo) -> None:
    repo = with_qwen3_test_id(mobius_repo(extra={"testdata/cases/causal-lm/llama.yaml": CASE}))
    [finding] = check(repo, select=["OB402"]).findings
    assert (finding.path, finding.line) == (
        MOBIUS_REGISTRY,
        line_in(repo / MOBIUS_REGISTRY, '"qwen3": "Qwen/Qwen3-0.6B"'),
    )
    assert finding.message == (
        "'qwen3' has test model id 'Qwen/Qwen3-0.6B' but no test case under testdata/cases/ "
        "has model_id: Qwen/Qwen3-0.6B (and no _COVERAGE_SKIP reason): mobius' "
        "test_model_has_golden_data[qwen3] fails"
    )


@pytest.mark.parametrize(
    ("name", "case", "reported"),
    [
        # mobius matches a case by model_id; its model_type may be another (a VL case, say)
        ("vl/qwen3-vl.yaml", QWEN3_CASE.replace('"llama"', "qwen3_vl  # composite"), False),
        ("causal-lm/qwen3.yaml", QWEN3_CASE.replace('"Qwen/Qwen3-0.6B"', "Qwen/Qwen3-0.6B"), False),
        (
            "causal-lm/qwen3.yaml",
            QWEN3_CASE.replace('"Qwen/Qwen3-0.6B"', "'Qwen/Qwen3-0.6B'"),
            False,
        ),
        # a model_type match is not enough when the model_id differs
        ("causal-lm/qwen3.yaml", CASE.replace('"llama"', '"qwen3"'), True),
        # discover_test_cases reads *.yaml only, and skips a case without a required field
        ("causal-lm/qwen3.yml", QWEN3_CASE, True),
        ("causal-lm/qwen3.yaml", QWEN3_CASE.replace('level: "L4+L5"\n', ""), True),
        ("causal-lm/qwen3.yaml", "extra:\n  model_id: Qwen/Qwen3-0.6B\n" + CASE, True),
    ],
)
def test_test_cases_match_by_model_id(
    mobius_repo: MakeRepo, name: str, case: str, reported: bool
) -> None:
    cases = {"testdata/cases/causal-lm/llama.yaml": CASE, f"testdata/cases/{name}": case}
    repo = with_qwen3_test_id(mobius_repo(extra=cases))
    keys = [f.message.split("'")[1] for f in check(repo, select=["OB402"]).findings]
    assert keys == (["qwen3"] if reported else [])


def test_test_case_needs_a_test_model_id_and_honours_the_skip_list(
    mobius_repo: MakeRepo,
) -> None:
    # qwen3 has no _TEST_MODEL_IDS row, so mobius' L4 test does not ask for its case
    other = {"testdata/cases/causal-lm/llama.yaml": CASE.replace("Llama-2-7b-hf", "Other")}
    [finding] = check(mobius_repo(extra=other), select=["OB402"]).findings
    assert finding.message.startswith("'llama' has test model id")
    skip = {**other, "tests/model_coverage_test.py": '_COVERAGE_SKIP = {"llama": "alias"}\n'}
    assert check(mobius_repo(extra=skip), select=["OB402"]).findings == ()


def test_coverage_rules_are_silent_without_the_folders(mobius_repo: MakeRepo) -> None:
    assert check(mobius_repo(), select=["OB4"]).findings == ()


def test_missing_docs_page(automodel_repo: MakeRepo) -> None:
    page = {"docs/model-coverage/llm/meta/llama2.mdx": "# Llama 2\n\n`LlamaForCausalLM`\n"}
    assert check(automodel_repo(extra=page), select=["OB403"]).findings == ()
    other = {"docs/model-coverage/llm/index.mdx": "# Models\n"}
    repo = automodel_repo(extra=other)
    [finding] = check(repo, select=["OB403"]).findings
    assert (finding.path, finding.line) == (
        AUTOMODEL_REGISTRY,
        line_in(repo / AUTOMODEL_REGISTRY, '"LlamaForCausalLM",'),
    )
    assert finding.message == (
        "'LlamaForCausalLM' is not named in any docs/model-coverage/ page (nor through "
        "_DOC_ARCH_ALIASES)"
    )
    alias = {
        **other,
        "docs/model-coverage/llm/meta/llama.md": "Llama family\n",
        "tests/unit_tests/_transformers/test_doc_coverage.py": (
            '_DOC_ARCH_ALIASES = {"LlamaForCausalLM": "Llama family"}\n'
        ),
    }
    assert check(automodel_repo(extra=alias), select=["OB403"]).findings == ()
