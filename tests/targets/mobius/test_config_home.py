"""The generated config class lives where mobius keeps its own: ``_configs/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.errors import OnboardError
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius import _import_file
from tests.hub_cache import fixture_config
from tests.new_types import default_config_dir


def _new(model: str, out: Path):
    return onboard_new(NewOptions(model=model, treat_as_new=True, out=out, parity=False))


def _added_to(patch: str, path: str) -> list[str]:
    """The lines ``patch`` adds to ``path``."""
    section = patch.split(f"+++ b/{path}\n", 1)[1].split("\n--- ", 1)[0]
    return [line[1:] for line in section.splitlines() if line.startswith("+")]


def test_the_config_class_is_added_to_configs_and_imported_from_there(tmp_path: Path) -> None:
    result = _new(str(fixture_config("Qwen/Qwen3-0.6B").parent), tmp_path / "out")
    module = (result.root / result.plan.model_file).read_text()
    assert "class Qwen3Config" not in module
    assert "from mobius._configs import ArchitectureConfig, Qwen3Config" in module
    patch = (result.root / "onboard.patch").read_text()
    base = _added_to(patch, "src/mobius/_configs/_base.py")
    assert "class Qwen3Config(CausalLMConfig):" in base
    assert "            attn_qk_norm=True," in base
    exports = _added_to(patch, "src/mobius/_configs/__init__.py")
    assert exports == ["    Qwen3Config,", '    "Qwen3Config",']
    # the module imports against the installed mobius with the class the patch adds
    generated = _import_file(result.root / result.plan.model_file)
    config_class = generated.Qwen3CausalLMModel.config_class
    assert config_class.__name__ == "Qwen3Config"
    assert config_class.__module__ == "mobius._configs._base"


def test_without_the_patched_class_the_module_does_not_import(tmp_path: Path) -> None:
    result = _new(str(fixture_config("Qwen/Qwen3-0.6B").parent), tmp_path / "out")
    patch = result.root / "onboard.patch"
    text = patch.read_text()
    patch.write_text(text.replace("+class Qwen3Config(CausalLMConfig):", "+class Renamed:", 1))
    with pytest.raises(OnboardError, match="does not import"):
        _import_file(result.root / result.plan.model_file)


def test_a_library_config_class_is_never_replaced(tmp_path: Path) -> None:
    # mobius' own Gemma2Config is what its Gemma models use: the new one gets its own name,
    # and the model keeps its names (--out)
    result = _new(str(default_config_dir("gemma2", tmp_path / "models")), tmp_path / "out")
    assert result.plan.model_class == "Gemma2CausalLMModel"
    patch = (result.root / "onboard.patch").read_text()
    base = patch.split("+++ b/src/mobius/_configs/_base.py\n", 1)[1].split("\n--- ", 1)[0]
    assert not [line for line in base.splitlines() if line.startswith("-")]
    added = [line for line in _added_to(patch, "src/mobius/_configs/_base.py") if "class " in line]
    assert len(added) == 1 and added[0].startswith("class Gemma2OnboardedConfig(")
    module = (result.root / result.plan.model_file).read_text()
    assert "config_class = Gemma2OnboardedConfig" in module
