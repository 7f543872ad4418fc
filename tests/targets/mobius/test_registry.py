from __future__ import annotations

import pytest

from onboard.errors import TargetRepoError
from onboard.targets.mobius.registry import open_library


def test_installed_registry_is_read_statically() -> None:
    library = open_library(None)
    assert not library.is_checkout
    assert len(library.variants) > 250
    assert library.variant("qwen3").class_name == "Qwen3CausalLMModel"
    assert library.variant("llama").class_name == "CausalLMModel"
    assert library.variant("gemma3").task == "vision-language"


def test_checkout(mobius_repo) -> None:
    library = open_library(mobius_repo)
    assert library.is_checkout
    assert library.package_dir == mobius_repo / "src" / "mobius"
    assert library.variant("gemma3_text").class_name == "Gemma3CausalLMModel"


def test_not_a_checkout(tmp_path) -> None:
    with pytest.raises(TargetRepoError, match="is not a mobius checkout"):
        open_library(tmp_path)


def test_registry_with_syntax_error(mobius_repo) -> None:
    registry = mobius_repo / "src" / "mobius" / "_registry.py"
    registry.write_text(
        registry.read_text().replace("_REGISTRATIONS: dict", "_REGISTRATIONS: dict[", 1)
    )
    with pytest.raises(TargetRepoError, match=r"does not parse \(line \d+"):
        open_library(mobius_repo)


def test_registry_without_registrations(mobius_repo) -> None:
    registry = mobius_repo / "src" / "mobius" / "_registry.py"
    registry.write_text('"""empty"""\n')
    with pytest.raises(TargetRepoError, match="no _REGISTRATIONS"):
        open_library(mobius_repo)
