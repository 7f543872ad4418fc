"""AutoModel's registry, read statically from the installed package or a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.errors import TargetRepoError
from onboard.targets.automodel.registry import (
    REGISTRY,
    custom_config_types,
    entry_for,
    library_version,
    open_library,
)

QWEN3 = "nemo_automodel.components.models.qwen3.model.Qwen3ForCausalLM"


def test_installed_registry_is_read_statically() -> None:
    library = open_library(None)
    assert not library.is_checkout
    assert (library.root / REGISTRY).is_file()
    assert len(library.variants) == 71  # nemo-automodel 0.7.0
    assert library.variant("Qwen3ForCausalLM").class_name == QWEN3
    assert library.variant("LlamaBidirectionalModel").task == "retrieval"
    assert library.variant("MistralForCausalLM") is None
    assert len(custom_config_types(library.root)) == 34
    assert library_version(library.root) == "0.7.0"


def test_keys_sharing_a_class_name_differ_by_module() -> None:
    library = open_library(None)
    v2 = library.variant("MiMoV2ForCausalLM").class_name
    v25 = library.variant("MiMoV25ForCausalLM").class_name
    assert v2.endswith(".MiMoV2ForCausalLM") and v25.endswith(".MiMoV2ForCausalLM")
    assert v2 != v25  # so --treat-as-new hides one without the other


def test_checkout(automodel_repo: Path) -> None:
    library = open_library(automodel_repo)
    assert library.is_checkout
    assert library.package_dir == automodel_repo / "nemo_automodel"
    entry = entry_for(automodel_repo, "LlamaForCausalLM")
    assert (entry.module, entry.class_name) == (
        "nemo_automodel.components.models.llama.model",
        "LlamaForCausalLM",
    )


def test_not_a_checkout(tmp_path: Path) -> None:
    with pytest.raises(TargetRepoError, match="is not an Automodel checkout"):
        open_library(tmp_path)


def test_registry_with_syntax_error(automodel_repo: Path) -> None:
    registry = automodel_repo / REGISTRY
    registry.write_text(registry.read_text().replace("OrderedDict(", "OrderedDict((", 1))
    with pytest.raises(TargetRepoError, match=r"does not parse \(line \d+"):
        open_library(automodel_repo)


def test_registry_without_the_mapping(automodel_repo: Path) -> None:
    (automodel_repo / REGISTRY).write_text('"""empty"""\n')
    with pytest.raises(TargetRepoError, match="no module-level MODEL_ARCH_MAPPING"):
        open_library(automodel_repo)


def test_registry_mapping_of_another_shape(automodel_repo: Path) -> None:
    (automodel_repo / REGISTRY).write_text("MODEL_ARCH_MAPPING = dict(a=1)\n")
    with pytest.raises(TargetRepoError, match=r"is not an OrderedDict\(\[\.\.\.\]\) literal"):
        open_library(automodel_repo)
