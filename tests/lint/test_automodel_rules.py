"""OB301-OB304: tie policy and capabilities of every class in MODEL_ARCH_MAPPING."""

from __future__ import annotations

from onboard.lint import check
from tests.lint.conftest import MakeRepo, line_in
from tests.lint.repos import AUTOMODEL_REGISTRY

MODEL = "nemo_automodel/components/models/foo/model.py"
FOO_ENTRY = """
(
    "FooForCausalLM",
    ("nemo_automodel.components.models.foo.model", "FooForCausalLM"{tags}),
),
"""


def foo_repo(make: MakeRepo, body: str, tags: str = "", extra: dict[str, str] | None = None):
    files = {
        "nemo_automodel/components/models/foo/__init__.py": "",
        MODEL: f"""
from dataclasses import dataclass

from torch import nn

from nemo_automodel.components.models.common import TieSupport
from nemo_automodel.components.models.llama.model import LlamaForCausalLM


class FooBase(nn.Module):
    def tie_weights(self):
        pass


{body}
""",
        **(extra or {}),
    }
    return make(FOO_ENTRY.format(tags=tags), extra=files)


CAPS = """
    @dataclass(frozen=True)
    class ModelCapabilities:
        supports_tp: bool = True
"""


def test_class_without_a_tie_policy(automodel_repo: MakeRepo) -> None:
    repo = foo_repo(automodel_repo, f"class FooForCausalLM(nn.Module):\n{CAPS}")
    [finding] = check(repo, select=["OB3"]).findings
    class_line = line_in(repo / MODEL, "class FooForCausalLM")
    assert (finding.code, finding.path, finding.line) == (
        "OB301",
        AUTOMODEL_REGISTRY,
        line_in(repo / AUTOMODEL_REGISTRY, '"FooForCausalLM",'),
    )
    assert finding.message == (
        f"'FooForCausalLM' -> FooForCausalLM ({MODEL}:{class_line}) declares no "
        "tie_word_embeddings_support; AutoModel then assumes TieSupport.BOTH"
    )
    assert finding.related == (MODEL,)


def test_tie_policy_exemptions_and_inheritance(automodel_repo: MakeRepo) -> None:
    undeclared = f"class FooForCausalLM(nn.Module):\n{CAPS}"
    retrieval = foo_repo(automodel_repo, undeclared, tags=', {"retrieval"}')
    assert check(retrieval, select=["OB301"]).findings == ()
    exempt_test = {
        "tests/unit_tests/_transformers/test_tie_support_registry.py": """
            _TIE_SUPPORT_EXEMPT: dict[str, str] = {"FooForCausalLM": "encoder; no lm_head"}
            """
    }
    exempt = foo_repo(automodel_repo, undeclared, extra=exempt_test)
    assert check(exempt, select=["OB301"]).findings == ()
    inherited = foo_repo(automodel_repo, f"class FooForCausalLM(LlamaForCausalLM):\n{CAPS}")
    assert check(inherited, select=["OB301", "OB302"]).findings == ()


def test_tied_policy_without_tie_weights(automodel_repo: MakeRepo) -> None:
    policy = "    tie_word_embeddings_support = TieSupport.TIED_ONLY\n"
    body = f"class FooForCausalLM(nn.Module):\n{CAPS}\n{policy}"
    repo = foo_repo(automodel_repo, body)
    [finding] = check(repo, select=["OB302"]).findings
    assert finding.message.endswith(
        "declares tie_word_embeddings_support = TieSupport.TIED_ONLY but defines no "
        f"tie_weights() ({MODEL}:{line_in(repo / MODEL, 'class FooForCausalLM')})"
    )
    untied = body.replace("TIED_ONLY", "UNTIED_ONLY")
    assert check(foo_repo(automodel_repo, untied), select=["OB302"]).findings == ()
    from_base = body.replace("(nn.Module)", "(FooBase)")
    assert check(foo_repo(automodel_repo, from_base), select=["OB302"]).findings == ()


def test_capabilities_neither_or_both(automodel_repo: MakeRepo) -> None:
    policy = "    tie_word_embeddings_support = TieSupport.UNTIED_ONLY\n"
    neither = foo_repo(automodel_repo, f"class FooForCausalLM(nn.Module):\n{policy}")
    [finding] = check(neither, select=["OB303", "OB304"]).findings
    assert finding.code == "OB303"
    assert "has neither a nested ModelCapabilities nor a get_capabilities" in finding.message
    method = "    @classmethod\n    def get_capabilities(cls, config):\n        return None\n"
    both = foo_repo(automodel_repo, f"class FooForCausalLM(nn.Module):\n{policy}{CAPS}{method}")
    [finding] = check(both, select=["OB303", "OB304"]).findings
    assert finding.code == "OB304"
    assert "has both a nested ModelCapabilities and a get_capabilities" in finding.message
    one = foo_repo(automodel_repo, f"class FooForCausalLM(nn.Module):\n{policy}{method}")
    assert check(one, select=["OB303", "OB304"]).findings == ()


def test_conditional_class_definition_reads_the_first_branch(automodel_repo: MakeRepo) -> None:
    body = f"""
try:
    import missing_dependency
    HAVE = True
except ImportError:
    HAVE = False

if HAVE:

    class FooForCausalLM(nn.Module):
        tie_word_embeddings_support = TieSupport.UNTIED_ONLY
{CAPS.replace("    ", "        ")}
else:

    class FooForCausalLM:
        pass
"""
    assert check(foo_repo(automodel_repo, body), select=["OB3"]).findings == ()


def test_one_finding_per_class_shared_by_several_architectures(automodel_repo: MakeRepo) -> None:
    undeclared = f"class FooForCausalLM(nn.Module):\n{CAPS}"
    twice = FOO_ENTRY.format(tags="") + FOO_ENTRY.format(tags="").replace(
        '"FooForCausalLM",\n', '"FooForConditionalGeneration",\n', 1
    )
    files = {
        "nemo_automodel/components/models/foo/__init__.py": "",
        MODEL: f"from torch import nn\nfrom dataclasses import dataclass\n\n\n{undeclared}",
    }
    [finding] = check(automodel_repo(twice, extra=files), select=["OB301"]).findings
    assert finding.message.startswith(
        "'FooForCausalLM' (also 'FooForConditionalGeneration') -> FooForCausalLM"
    )
