from __future__ import annotations

import pytest

from onboard.codemods import CodemodError, add_from_import

INIT = '''# Copyright (c) Microsoft Corporation.

"""Model classes."""

from __future__ import annotations

import dataclasses

from mobius.models.gemma4 import (
    Gemma4CausalLMModel,
    Gemma4Model,
    Gemma4UnifiedModel,
)
from mobius.models.qwen import QwenCausalLMModel
from mobius.models.qwen3_asr import Qwen3ASRForConditionalGeneration
from mobius.models.qwen35 import Qwen35CausalLMModel
from mobius.models.qwen_vl import Qwen25VLCausalLMModel

from . import _helpers

X = 1
'''


def test_new_statement_lands_in_sorted_position() -> None:
    result = add_from_import(INIT, "mobius.models.qwen3", "Qwen3CausalLMModel")
    assert result == INIT.replace(
        "from mobius.models.qwen3_asr",
        "from mobius.models.qwen3 import Qwen3CausalLMModel\nfrom mobius.models.qwen3_asr",
    )


def test_first_in_group_keeps_blank_line_above_group() -> None:
    result = add_from_import(INIT, "mobius.models.bamba", "BambaModel")
    assert result == INIT.replace(
        "import dataclasses\n\nfrom mobius.models.gemma4",
        "import dataclasses\n\nfrom mobius.models.bamba import BambaModel\n"
        "from mobius.models.gemma4",
    )


def test_last_in_group() -> None:
    result = add_from_import(INIT, "mobius.models.zamba", "ZambaModel")
    assert result == INIT.replace(
        "Qwen25VLCausalLMModel\n",
        "Qwen25VLCausalLMModel\nfrom mobius.models.zamba import ZambaModel\n",
    )


def test_adds_name_to_parenthesized_import_one_per_line_sorted() -> None:
    result = add_from_import(INIT, "mobius.models.gemma4", "Gemma4MoEModel")
    # ruff/isort order: case-insensitive, so "Gemma4MoEModel" sorts after "Gemma4Model".
    assert result == INIT.replace(
        "    Gemma4Model,\n    Gemma4UnifiedModel,\n",
        "    Gemma4Model,\n    Gemma4MoEModel,\n    Gemma4UnifiedModel,\n",
    )


def test_appends_name_to_end_of_parenthesized_import() -> None:
    result = add_from_import(INIT, "mobius.models.gemma4", "Gemma4ZModel")
    assert result == INIT.replace(
        "    Gemma4UnifiedModel,\n)", "    Gemma4UnifiedModel,\n    Gemma4ZModel,\n)"
    )


def test_adds_name_to_single_line_import() -> None:
    result = add_from_import(INIT, "mobius.models.qwen", "Qwen2Model")
    assert result == INIT.replace(
        "from mobius.models.qwen import QwenCausalLMModel",
        "from mobius.models.qwen import Qwen2Model, QwenCausalLMModel",
    )


def test_unsorted_names_get_appended() -> None:
    source = "from m import b, a\n"
    assert add_from_import(source, "m", "c") == "from m import b, a, c\n"


def test_parenthesized_import_with_comments() -> None:
    source = "from m import (\n    a,  # first\n    c,  # last\n)\n"
    assert add_from_import(source, "m", "b") == (
        "from m import (\n    a,  # first\n    b,\n    c,  # last\n)\n"
    )
    assert add_from_import(source, "m", "d") == (
        "from m import (\n    a,  # first\n    c,  # last\n    d,\n)\n"
    )


def test_already_imported_is_a_no_op() -> None:
    assert add_from_import(INIT, "mobius.models.gemma4", "Gemma4Model") == INIT
    assert add_from_import(INIT, "mobius.models.qwen35", "Qwen35CausalLMModel") == INIT
    assert add_from_import(INIT, ".", "_helpers") == INIT
    once = add_from_import(INIT, "mobius.models.qwen3", "Qwen3CausalLMModel")
    assert add_from_import(once, "mobius.models.qwen3", "Qwen3CausalLMModel") == once


def test_aliased_import_does_not_count() -> None:
    source = "from m import a as b\n"
    assert add_from_import(source, "m", "a") == "from m import a as b, a\n"


def test_other_package_goes_after_last_import() -> None:
    result = add_from_import(INIT, "transformers", "AutoConfig")
    assert result == INIT.replace(
        "from . import _helpers\n",
        "from . import _helpers\n\nfrom transformers import AutoConfig\n",
    )


def test_no_imports_goes_after_docstring() -> None:
    source = '# header\n"""Doc."""\n\nX = 1\n'
    result = add_from_import(source, "m", "a")
    assert result == '# header\n"""Doc."""\n\nfrom m import a\n\nX = 1\n'


def test_no_docstring_no_imports_goes_first() -> None:
    assert add_from_import("X = 1\n", "m", "a") == "from m import a\nX = 1\n"


def test_imports_inside_blocks_are_ignored() -> None:
    source = "from __future__ import annotations\n\nif True:\n    from m import a\n"
    result = add_from_import(source, "m", "a")
    assert result == (
        "from __future__ import annotations\n\nfrom m import a\n\nif True:\n    from m import a\n"
    )


def test_syntax_error_raises() -> None:
    with pytest.raises(CodemodError, match="cannot parse Python source at line"):
        add_from_import("from m import (\n", "m", "a")


@pytest.mark.parametrize(("module", "name"), [("m", "a.b"), ("m import x;", "a"), ("1m", "a")])
def test_bad_arguments_are_caller_errors(module: str, name: str) -> None:
    with pytest.raises(ValueError, match="not"):
        add_from_import("X = 1\n", module, name)


REGISTRY = """\
from mobius.models import (
    BambaCausalLMModel,
    NemotronHCausalLMModel,
    OLMoCausalLMModel,
)
from mobius.models import Qwen3Model, Zoo
from mobius.models.olmo3 import Olmo3Model

_REGISTRATIONS = {
    "nemotron_h": NemotronHCausalLMModel,
    "olmo": OLMoCausalLMModel,
    "qwen": Qwen3Model,
    "olmo3": Olmo3Model,
}
"""


def test_an_import_the_edit_orphaned_is_dropped_and_nothing_else() -> None:
    from onboard.codemods import drop_orphaned_imports

    after = REGISTRY.replace(
        '"nemotron_h": NemotronHCausalLMModel', '"nemotron_h": BambaCausalLMModel'
    )
    dropped = drop_orphaned_imports(REGISTRY, after, "mobius.models")
    assert "NemotronHCausalLMModel" not in dropped
    # Zoo was unused before the edit too: not the edit's to remove
    assert "    BambaCausalLMModel,\n    OLMoCausalLMModel,\n)" in dropped and "Zoo" in dropped
    compile(dropped, "registry", "exec")
    assert drop_orphaned_imports(REGISTRY, REGISTRY, "mobius.models") == REGISTRY
    # imported from a module inside the package (mobius' own registry does so)
    after = REGISTRY.replace('"olmo3": Olmo3Model', '"olmo3": Zoo')
    assert "Olmo3Model" not in drop_orphaned_imports(REGISTRY, after, "mobius.models")


def test_an_unparenthesized_import_keeps_no_trailing_comma() -> None:
    from onboard.codemods import drop_orphaned_imports

    after = REGISTRY.replace('"qwen": Qwen3Model', '"qwen": Zoo')
    dropped = drop_orphaned_imports(REGISTRY, after, "mobius.models")
    assert "from mobius.models import Zoo\n" in dropped
    compile(dropped, "registry", "exec")
    # a statement whose one name is orphaned goes as a whole
    single = "from mobius.models import Qwen3Model\n\nX = {'qwen': Qwen3Model}\n"
    dropped = drop_orphaned_imports(single, single.replace("Qwen3Model}", "None}"), "mobius.models")
    assert dropped == "\nX = {'qwen': None}\n"


def test_orphans_of_several_statements_all_go() -> None:
    from onboard.codemods import drop_orphaned_imports

    before = (
        "from mobius.models import A, B\n"
        "from mobius.models.x import C, D\n\n"
        "X = {'a': A, 'b': B, 'c': C, 'd': D}\n"
    )
    after = before.replace("'a': A, ", "").replace("'c': C, ", "")
    assert drop_orphaned_imports(before, after, "mobius.models") == (
        "from mobius.models import B\nfrom mobius.models.x import D\n\nX = {'b': B, 'd': D}\n"
    )
