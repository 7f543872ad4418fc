"""OB201-OB206: options mobius drops, aliases that lose HF features, orphan side-table keys."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from onboard.lint import Severity, check
from tests.lint.conftest import MakeRepo, line_in
from tests.lint.repos import MOBIUS_CONFIG_BASE, MOBIUS_REGISTRY


def hf_line(folder: str, name: str, after: str, fragment: str) -> int:
    """Line of ``fragment`` after ``after`` in the installed transformers' source file."""
    spec = importlib.util.find_spec("transformers")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "models" / folder / name
    return line_in(path, fragment, after=after)


# --- OB201 -------------------------------------------------------------------------------------


def test_inline_family_and_variant_are_reported_with_their_side_table(
    mobius_repo: MakeRepo,
) -> None:
    repo = mobius_repo(
        """
        "llama": ModelRegistration(CausalLMModel),
        "qwen3": ModelRegistration(
            Qwen3CausalLMModel,
            family="qwen",
            variant="qk-norm",
        ),
        """
    )
    family, variant = check(repo, select=["OB201"]).findings
    registry = repo / MOBIUS_REGISTRY
    assert (family.code, family.path, family.line) == (
        "OB201",
        MOBIUS_REGISTRY,
        line_in(registry, 'family="qwen"'),
    )
    assert family.severity is Severity.ERROR
    assert family.message == (
        "family=\"qwen\" in the 'qwen3' registration is dropped (mobius copies only task and "
        "config_class); move it to _FAMILY_OVERRIDES"
    )
    assert family.fix is not None and family.fix.table == "_FAMILY_OVERRIDES"
    assert variant.line == line_in(registry, 'variant="qk-norm"')
    assert variant.message.endswith("move it to _VARIANT_LABELS")


def test_inline_option_equal_to_or_overridden_by_the_side_table(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(
        """
        "llama": ModelRegistration(CausalLMModel, family="llama"),
        "qwen3": ModelRegistration(Qwen3CausalLMModel, test_model_id="Qwen/Qwen3-0.6B"),
        """,
        family='"qwen3": "qwen",',
    )
    same, test_id = check(repo, select=["OB201"]).findings
    assert same.message.endswith("_FAMILY_OVERRIDES already has it, remove the inline option")
    assert same.fix is not None and same.fix.kind == "drop-option"
    assert test_id.message.endswith("move it to _TEST_MODEL_IDS")
    conflict = mobius_repo('"llama": ModelRegistration(CausalLMModel, family="meta"),')
    [finding] = check(conflict, select=["OB201"]).findings
    table_line = line_in(conflict / MOBIUS_REGISTRY, '"llama": "llama"')
    assert finding.message.endswith(f'_FAMILY_OVERRIDES says "llama" (line {table_line}) and wins')
    assert finding.fix is None


def test_task_and_config_class_are_not_dropped(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo('"llama": ModelRegistration(CausalLMModel, task="text-generation"),')
    assert check(repo, select=["OB201"]).findings == ()


# --- OB202 -------------------------------------------------------------------------------------


def test_registry_config_class_loses_to_an_inherited_class_attribute(
    mobius_repo: MakeRepo,
) -> None:
    repo = mobius_repo('"qwen3": ModelRegistration(Qwen3CausalLMModel, config_class=QKNormConfig),')
    [finding] = check(repo, select=["OB202"]).findings
    base_line = line_in(repo / "src/mobius/models/base.py", "config_class")
    assert (finding.code, finding.line) == (
        "OB202",
        line_in(repo / MOBIUS_REGISTRY, "config_class=QKNormConfig"),
    )
    assert finding.message == (
        "config_class=QKNormConfig in the 'qwen3' registration is ignored: "
        "Qwen3CausalLMModel.config_class = CausalLMConfig (CausalLMModel, "
        f"src/mobius/models/base.py:{base_line}) wins in _config_from_hf; "
        "set config_class on a subclass instead"
    )


def test_registry_config_class_that_applies_or_repeats(mobius_repo: MakeRepo) -> None:
    vision = {
        "src/mobius/models/vision.py": """
            class VisionModel:
                config_class = None
            """
    }
    repo = mobius_repo(
        """
        "qwen3": ModelRegistration(Qwen3CausalLMModel, config_class=CausalLMConfig),
        "siglip": ModelRegistration(VisionModel, config_class=QKNormConfig),
        """,
        extra=vision,
        imports="from mobius.models.vision import VisionModel",
    )
    assert check(repo, select=["OB202"]).findings == ()


# --- OB203 / OB204 / OB205 ---------------------------------------------------------------------


def test_alias_of_a_qk_norm_model_to_the_generic_class(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo('"olmoe": ModelRegistration(MoECausalLMModel),')
    [finding] = check(repo, select=["OB203"]).findings
    hf = hf_line("olmoe", "modeling_olmoe.py", "class OlmoeAttention", "self.q_norm =")
    assert finding.line == line_in(repo / MOBIUS_REGISTRY, '"olmoe"')
    assert finding.message == (
        "'olmoe' maps to MoECausalLMModel, which builds q/k norms only for the model_types "
        "listed in _configs/_base.py, but OlmoeAttention creates self.q_norm "
        f"(modeling_olmoe.py:{hf}): the q_norm/k_norm weights are never applied"
    )


def test_qk_norm_handled_by_the_model_type_list_or_a_config_field(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(
        """
        "qwen3": ModelRegistration(CausalLMModel),
        "cohere": ModelRegistration(CausalLMModel),
        "olmoe": ModelRegistration(Qwen3CausalLMModel),
        """
    )
    assert check(repo, select=["OB203"]).findings == ()
    # Without the config field mobius reads, cohere's guarded q_norm is a delta again.
    no_field = MOBIUS_CONFIG_BASE.replace('getattr(config, "use_qk_norm", False)', "False")
    repo = mobius_repo(
        '"cohere": ModelRegistration(CausalLMModel),',
        extra={"src/mobius/_configs/_base.py": no_field},
    )
    [finding] = check(repo, select=["OB203"]).findings
    assert "CohereAttention creates self.q_norm (modeling_cohere.py:" in finding.message


def test_alias_of_a_sliding_window_model_is_a_warning(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(
        """
        "llama": ModelRegistration(CausalLMModel),
        "mistral": ModelRegistration(CausalLMModel),
        """
    )
    [finding] = check(repo, select=["OB204"]).findings
    modeling = hf_line("mistral", "modeling_mistral.py", "class MistralAttention", "sliding_window")
    config = hf_line(
        "mistral", "configuration_mistral.py", "class MistralConfig", "sliding_window:"
    )
    assert (finding.severity, finding.line) == (
        Severity.WARNING,
        line_in(repo / MOBIUS_REGISTRY, '"mistral"'),
    )
    assert finding.message == (
        "'mistral' maps to CausalLMModel, which ignores sliding_window on the default EP, but "
        f"MistralAttention uses one (modeling_mistral.py:{modeling}; MistralConfig.sliding_window "
        f"defaults to 4096, configuration_mistral.py:{config})"
    )


def test_alias_of_a_hard_coded_qkv_bias(mobius_repo: MakeRepo) -> None:
    listed = mobius_repo('"qwen2": ModelRegistration(CausalLMModel),')
    assert check(listed, select=["OB205"]).findings == ()
    unlisted = MOBIUS_CONFIG_BASE.replace('("gpt2", "qwen2", "qwen2_moe")', '("gpt2",)')
    repo = mobius_repo(
        '"qwen2": ModelRegistration(CausalLMModel),',
        extra={"src/mobius/_configs/_base.py": unlisted},
    )
    [finding] = check(repo, select=["OB205"]).findings
    hf = hf_line("qwen2", "modeling_qwen2.py", "class Qwen2Attention", "self.q_proj =")
    assert finding.message == (
        "'qwen2' maps to CausalLMModel, which sets q/k/v bias from config fields or the "
        "model_types listed in _configs/_base.py, but Qwen2Attention hard-codes bias=True "
        f"(modeling_qwen2.py:{hf}): the bias weights are never applied"
    )


def test_config_driven_bias_is_not_a_delta(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo('"llama": ModelRegistration(CausalLMModel),')
    assert check(repo, select=["OB203", "OB204", "OB205"]).findings == ()


# --- OB206 -------------------------------------------------------------------------------------


def test_side_table_key_that_is_not_registered(mobius_repo: MakeRepo) -> None:
    repo = mobius_repo(family='"qwen-3": "qwen",', variant='"qwen3": "qk",')
    [finding] = check(repo, select=["OB206"]).findings
    assert (finding.line, finding.severity) == (
        line_in(repo / MOBIUS_REGISTRY, '"qwen-3": "qwen"'),
        Severity.WARNING,
    )
    assert finding.message == (
        "'qwen-3' in _FAMILY_OVERRIDES is not registered in _REGISTRATIONS; mobius ignores this "
        "entry"
    )
