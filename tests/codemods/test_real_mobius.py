"""Run every codemod on the installed mobius sources: only added lines, still parses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from onboard.codemods import add_from_import, add_to_all, upsert_dict_entry

Check = Callable[[str, str], list[str]]
REGISTRATION = 'ModelRegistration(Qwen9CausalLMModel, task="text-generation")'


def test_registry_edits_only_add_lines(mobius_dir: Path, assert_only_added: Check) -> None:
    before = (mobius_dir / "_registry.py").read_text()
    after = upsert_dict_entry(before, "_REGISTRATIONS", "qwen9", REGISTRATION)
    after = upsert_dict_entry(after, "_TEST_MODEL_IDS", "qwen9", '"Qwen/Qwen9-0.5B"')
    after = add_from_import(after, "mobius.models", "Qwen9CausalLMModel")
    after = add_from_import(after, "mobius.models.qwen9", "Qwen9VisionModel")
    assert assert_only_added(before, after) == [
        "    Qwen9CausalLMModel,",
        "from mobius.models.qwen9 import Qwen9VisionModel",
        '    "qwen9": ModelRegistration(Qwen9CausalLMModel, task="text-generation"),',
        '    "qwen9": "Qwen/Qwen9-0.5B",',
    ]
    assert "    Qwen3VLTextModel,\n    Qwen9CausalLMModel,\n    Qwen25VLCausalLMModel," in after
    assert after.index("\n# fmt: on") > after.index('"qwen9": "Qwen/Qwen9-0.5B"')
    again = upsert_dict_entry(after, "_REGISTRATIONS", "qwen9", REGISTRATION)
    again = upsert_dict_entry(again, "_TEST_MODEL_IDS", "qwen9", '"Qwen/Qwen9-0.5B"')
    again = add_from_import(again, "mobius.models", "Qwen9CausalLMModel")
    assert add_from_import(again, "mobius.models.qwen9", "Qwen9VisionModel") == after


def test_models_init_edits_only_add_lines(mobius_dir: Path, assert_only_added: Check) -> None:
    before = (mobius_dir / "models" / "__init__.py").read_text()
    after = add_to_all(before, "Qwen3NewCausalLMModel")
    after = add_from_import(after, "mobius.models.qwen3", "Qwen3NewCausalLMModel")
    assert assert_only_added(before, after) == [
        '    "Qwen3NewCausalLMModel",',
        "from mobius.models.qwen3 import Qwen3NewCausalLMModel",
    ]
    assert (
        "from mobius.models.qwen3 import Qwen3NewCausalLMModel\nfrom mobius.models.qwen3_asr"
        in after
    )
    again = add_to_all(after, "Qwen3NewCausalLMModel")
    assert add_from_import(again, "mobius.models.qwen3", "Qwen3NewCausalLMModel") == after
