"""OB401-OB403: test configs, test cases and docs pages, read only where a checkout has them."""

from __future__ import annotations

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
"""


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


def test_missing_test_case(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(extra={"testdata/cases/causal-lm/llama.yaml": CASE})
    [finding] = check(repo, select=["OB402"]).findings
    assert finding.line == line_in(repo / MOBIUS_REGISTRY, '"qwen3": ModelRegistration')
    assert finding.message == (
        "'qwen3' has no test case under testdata/cases/ (a YAML file with model_type: qwen3) "
        "and no _COVERAGE_SKIP reason"
    )
    qwen3 = CASE.replace('"llama"', "qwen3  # unquoted")
    both = {"testdata/cases/causal-lm/llama.yaml": CASE, "testdata/cases/x/qwen3.yml": qwen3}
    assert check(mobius_repo(extra=both), select=["OB402"]).findings == ()


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
