"""The static catalog of transformers names equals what importing transformers gives."""

from __future__ import annotations

import ast
import inspect

import pytest

from onboard.lint.hf import load_catalog


@pytest.mark.filterwarnings("ignore")
def test_static_catalog_matches_the_imported_tables() -> None:
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import (
        CONFIG_MAPPING_NAMES,
        model_type_to_module_name,
    )

    catalog = load_catalog()
    assert catalog is not None
    assert catalog.model_types == frozenset(CONFIG_MAPPING_NAMES)
    own = {
        t.id
        for node in ast.parse(inspect.getsource(modeling_auto)).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and t.id.endswith("_MAPPING_NAMES")
    }
    architectures = set()
    for name in own:
        for value in getattr(modeling_auto, name).values():
            architectures.update(value if isinstance(value, tuple | list) else [value])
    assert catalog.architectures == frozenset(architectures)
    for model_type in CONFIG_MAPPING_NAMES:
        assert catalog.module_name(model_type) == model_type_to_module_name(model_type)


def test_source_files_of_a_model_type() -> None:
    catalog = load_catalog()
    assert catalog is not None
    names = [f.name for f in catalog.source_files("qwen3")]
    assert names == ["configuration_qwen3.py", "modeling_qwen3.py", "modular_qwen3.py"]
    assert catalog.source_files("not-a-model") == ()
    assert catalog.modeling_file("modeling_qwen3.py") is not None
    assert catalog.modeling_file("modeling_qwen99.py") is None
