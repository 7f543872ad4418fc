"""OB101-OB104 on synthetic registries: each rule fires on its bad case, stays silent when clean."""

from __future__ import annotations

from onboard.lint import check
from tests.lint.conftest import MakeRepo, line_in
from tests.lint.repos import AUTOMODEL_CLEAN_ENTRIES, AUTOMODEL_REGISTRY, MOBIUS_REGISTRY

GHOST_ENTRY = """
(
    "LlamaForCausalLM",
    ("nemo_automodel.components.models.ghost.model", "LlamaForCausalLM"),
),
"""
WRONG_CLASS_ENTRY = """
(
    "LlamaForCausalLM",
    ("nemo_automodel.components.models.llama.model", "LlamaForCausalLm"),
),
"""


def test_clean_repositories_have_no_error(mobius_repo: MakeRepo, automodel_repo: MakeRepo) -> None:
    assert check(mobius_repo()).errors == ()
    assert check(automodel_repo()).errors == ()


def test_automodel_module_that_does_not_exist(automodel_repo: MakeRepo) -> None:
    repo = automodel_repo(GHOST_ENTRY)
    [finding] = check(repo, select=["OB101"]).findings
    assert (finding.code, finding.path) == ("OB101", AUTOMODEL_REGISTRY)
    assert finding.line == line_in(repo / AUTOMODEL_REGISTRY, '"LlamaForCausalLM",')
    assert "module nemo_automodel.components.models.ghost.model does not exist" in finding.message
    assert "silently uses the HF implementation" in finding.message
    assert finding.related == ("nemo_automodel/components/models/ghost/model.py",)


def test_module_that_does_not_parse(automodel_repo: MakeRepo) -> None:
    broken = {"nemo_automodel/components/models/llama/model.py": "class LlamaForCausalLM(:\n"}
    [finding] = check(automodel_repo(extra=broken), select=["OB101"]).findings
    assert "nemo_automodel.components.models.llama.model does not parse (line 1" in finding.message


def test_automodel_class_missing_from_its_module(automodel_repo: MakeRepo) -> None:
    repo = automodel_repo(WRONG_CLASS_ENTRY)
    [finding] = check(repo, select=["OB10"]).findings
    assert finding.code == "OB102"
    assert finding.line == line_in(repo / AUTOMODEL_REGISTRY, '"LlamaForCausalLM",')
    assert "components.models.llama.model does not define LlamaForCausalLm" in finding.message


def test_mobius_class_not_imported_in_the_registry(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo('"qwen3": ModelRegistration(Qwen3CausalLMModelX),')
    [finding] = check(repo, select=["OB102"]).findings
    assert (finding.path, finding.line) == (
        MOBIUS_REGISTRY,
        line_in(repo / MOBIUS_REGISTRY, '"qwen3": ModelRegistration('),
    )
    assert "Qwen3CausalLMModelX is neither imported nor defined in the registry" in finding.message
    assert "importing mobius fails" in finding.message


def test_mobius_import_from_a_module_that_lacks_the_class(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(
        '"qwen3": ModelRegistration(Qwen9CausalLMModel),',
        imports="from mobius.models.qwen import Qwen9CausalLMModel",
    )
    [finding] = check(repo, select=["OB101", "OB102"]).findings
    assert finding.code == "OB102"
    assert "mobius.models.qwen does not define Qwen9CausalLMModel" in finding.message
    missing = mobius_repo(
        '"qwen3": ModelRegistration(Qwen9CausalLMModel),',
        imports="from mobius.models.qwen9 import Qwen9CausalLMModel",
    )
    [finding] = check(missing, select=["OB101", "OB102"]).findings
    assert finding.code == "OB101"
    assert "module mobius.models.qwen9 does not exist" in finding.message


def test_class_re_exported_through_the_models_package_resolves(mobius_repo: MakeRepo) -> None:
    assert check(mobius_repo(), select=["OB101", "OB102"]).findings == ()


def test_key_unknown_to_transformers_is_a_warning(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo('"qwen-3": ModelRegistration(Qwen3CausalLMModel),')
    [finding] = check(repo, select=["OB103"]).findings
    assert finding.severity == "warning"
    assert finding.line == line_in(repo / MOBIUS_REGISTRY, '"qwen-3"')
    assert finding.message.startswith("'qwen-3' is not a model_type or architecture transformers")
    assert check(repo, select=["OB103"]).exit_code == 0


def test_architecture_names_are_known_keys(mobius_repo: MakeRepo, automodel_repo: MakeRepo) -> None:
    repo = mobius_repo('"Qwen3ForCausalLM": ModelRegistration(Qwen3CausalLMModel),')
    assert check(repo, select=["OB103"]).findings == ()
    assert check(automodel_repo(), select=["OB103"]).findings == ()


def test_automodel_unknown_architecture_unless_it_has_a_custom_config(
    automodel_repo: MakeRepo,
) -> None:
    entry = AUTOMODEL_CLEAN_ENTRIES.replace('"LlamaForCausalLM",\n', '"LlamaXForCausalLM",\n', 1)
    [finding] = check(automodel_repo(entry), select=["OB103"]).findings
    assert "'LlamaXForCausalLM' is not an architecture class transformers" in finding.message
    config = '"llamax": ("nemo_automodel.components.models.llama.config", "LlamaXConfig"),'
    assert check(automodel_repo(entry, config), select=["OB103"]).findings == ()


def test_duplicate_keys_in_every_registry_table(
    mobius_repo: MakeRepo, automodel_repo: MakeRepo
) -> None:
    entries = """
    "qwen3": ModelRegistration(Qwen3CausalLMModel),
    "qwen3": ModelRegistration(CausalLMModel),
    """
    repo = mobius_repo(entries, family='"llama": "llama2",')
    found = check(repo, select=["OB104"]).findings
    registry = repo / MOBIUS_REGISTRY
    winner = line_in(registry, '"qwen3": ModelRegistration(CausalLMModel')
    family_winner = line_in(registry, '"llama": "llama2"')
    assert [(f.line, f.message) for f in found] == [
        (
            line_in(registry, '"qwen3": ModelRegistration(Qwen3'),
            f"'qwen3' appears again in _REGISTRATIONS at line {winner}; "
            "Python keeps only the last, so this entry is dead",
        ),
        (
            line_in(registry, '"llama": "llama",'),
            f"'llama' appears again in _FAMILY_OVERRIDES at line {family_winner}; "
            "Python keeps only the last, so this entry is dead",
        ),
    ]
    twice = AUTOMODEL_CLEAN_ENTRIES * 2
    automodel = automodel_repo(twice)
    [finding] = check(automodel, select=["OB104"]).findings
    assert finding.line == line_in(automodel / AUTOMODEL_REGISTRY, '"LlamaForCausalLM",')
    assert "in MODEL_ARCH_MAPPING" in finding.message
