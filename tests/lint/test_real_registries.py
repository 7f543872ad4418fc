"""The installed mobius-onnx 0.1.0 and nemo-automodel 0.7.0 registries, copied into repo layouts.

Every error below was checked by hand (see the report of issue #6): the 18 OB201 options are
dropped by ``_create_default_registry`` (the built registry has family=None/variant=None for
those keys), and mobius' ``MoECausalLMModel`` built from the Qwen3-VL-MoE / Qwen3-Omni-MoE text
configs has ``attn_qk_norm=False`` and no ``q_norm`` parameter while HF's attention has one.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from onboard.lint import Finding, check

MOBIUS_INLINE = {
    ("gemma4_assistant", "family"),
    ("Gemma4AssistantForCausalLM", "family"),
    ("gemma4_unified_assistant", "family"),
    ("gemma4_unified_assistant", "variant"),
    ("Gemma4UnifiedAssistantForCausalLM", "family"),
    ("Gemma4UnifiedAssistantForCausalLM", "variant"),
    ("DFlashDraftModel", "family"),
    ("DFlashDraftModel", "variant"),
    ("Qwen35MtpModel", "family"),
    ("Qwen35MtpModel", "variant"),
    ("Eagle3LlamaForCausalLM", "family"),
    ("Eagle3LlamaForCausalLM", "variant"),
    ("LlamaForCausalLMEagle3", "family"),
    ("LlamaForCausalLMEagle3", "variant"),
    ("Eagle3Speculator", "family"),
    ("Eagle3Speculator", "variant"),
    ("Eagle3DraftModel", "family"),
    ("Eagle3DraftModel", "variant"),
}
MOBIUS_SLIDING_WINDOW = {
    "ministral", "ministral3", "mistral", "qwen2", "mixtral", "qwen3_moe", "qwen3_omni_moe",
}  # fmt: skip
AUTOMODEL_UNKNOWN = {
    "LlamaBidirectionalForSequenceClassification",
    "LlamaBidirectionalModel",
    "MiMoV25ForCausalLM",
    "Mistral3FP8VLMForConditionalGeneration",
    "Qwen3RerankerForCausalReranking",
    "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronParseForConditionalGeneration",
    "HyMT2ForCausalLM",
    "Qwen2_5OmniModel",
    "Step3p5ForCausalLM",
}


def python_only(folder: str, names: list[str]) -> set[str]:
    """Copy only Python sources (what the linter reads): keeps the copies small and fast."""
    return {n for n in names if n == "__pycache__" or ("." in n and not n.endswith(".py"))}


def installed(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        pytest.skip(f"{package} is not installed")
    return Path(spec.origin).parent


@pytest.fixture(scope="module")
def mobius_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mobius")
    shutil.copytree(installed("mobius"), root / "src" / "mobius", ignore=python_only)
    return root


@pytest.fixture(scope="module")
def automodel_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("automodel")
    shutil.copytree(installed("nemo_automodel"), root / "nemo_automodel", ignore=python_only)
    return root


def key(finding: Finding) -> str:
    found = re.search(r"'([^']+)'", finding.message)
    assert found is not None, finding
    return found[1]


def test_mobius_errors_are_the_real_ones(mobius_checkout: Path) -> None:
    result = check(mobius_checkout)
    assert {f.code for f in result.errors} == {"OB201", "OB203"}
    inline = {(key(f), f.message.split("=", 1)[0]) for f in result.errors if f.code == "OB201"}
    assert inline == MOBIUS_INLINE
    assert sum(f.code == "OB201" for f in result.errors) == len(MOBIUS_INLINE)
    assert {key(f) for f in result.errors if f.code == "OB203"} == {
        "qwen3_omni_moe",
        "qwen3_vl_moe",
    }
    assert {key(f) for f in result.warnings if f.code == "OB204"} == MOBIUS_SLIDING_WINDOW
    assert {f.code for f in result.warnings} == {"OB103", "OB204"}
    assert {f.path for f in result.findings} == {"src/mobius/_registry.py"}


def test_mobius_fix_on_the_real_registry(mobius_checkout: Path, tmp_path: Path) -> None:
    root = tmp_path / "mobius"
    (root / "src" / "mobius").mkdir(parents=True)
    shutil.copy(mobius_checkout / "src/mobius/_registry.py", root / "src/mobius/_registry.py")
    fixed = check(root, select=["OB201"], fix=True)
    assert len(fixed.fixed) == len(MOBIUS_INLINE)
    assert fixed.findings == ()
    text = (root / "src/mobius/_registry.py").read_text()
    compile(text, "_registry.py", "exec")
    assert "family=" not in text.split("_REGISTRATIONS:", 1)[1].split("\n}\n", 1)[0]
    assert check(root, select=["OB201"], fix=True).fixed == ()
    assert (root / "src/mobius/_registry.py").read_text() == text


def test_automodel_has_no_error(automodel_checkout: Path) -> None:
    result = check(automodel_checkout)
    assert result.errors == ()
    assert {f.code for f in result.warnings} == {"OB103"}
    assert {key(f) for f in result.warnings} == AUTOMODEL_UNKNOWN
