"""mobius' static-cache build of generated causal LMs (``targets.mobius.static_cache``)."""

from __future__ import annotations

import pytest

from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius import _import_file
from onboard.targets.mobius.static_cache import static_cache_check
from tests.hub_cache import fixture_config
from tests.targets.mobius.sabotage import broken_module

OPT_IN = "_supports_static_cache = True"
DISPATCH = "static_cache=static_cache,"


@pytest.fixture(scope="module")
def qwen3_moe(tmp_path_factory):
    """A generated MoE decoder layer around mobius' own Attention."""
    model = str(fixture_config("Qwen/Qwen3-30B-A3B").parent)
    out = tmp_path_factory.mktemp("qwen3_moe") / "out"
    return onboard_new(NewOptions(model=model, treat_as_new=True, out=out, parity=False))


def _check(result, text: str, tmp_path):
    path = broken_module(result, tmp_path)
    path.write_text(text)
    module_class = getattr(_import_file(path), result.plan.model_class)
    return static_cache_check(module_class, make_hf_config(result.analysis.tiny.config), "default")


def test_generated_layers_build_with_a_static_cache(qwen3_moe, tmp_path) -> None:
    text = (qwen3_moe.root / qwen3_moe.plan.model_file).read_text()
    assert OPT_IN in text and DISPATCH in text
    check = _check(qwen3_moe, text, tmp_path)
    assert check.status is Status.PASS, check.detail


def test_a_layer_that_does_not_opt_in_fails(qwen3_moe, tmp_path) -> None:
    text = (qwen3_moe.root / qwen3_moe.plan.model_file).read_text()
    check = _check(qwen3_moe, text.replace(OPT_IN, "pass"), tmp_path)
    assert check.status is Status.FAIL
    assert "Static cache mode requires" in check.detail


def test_a_layer_that_opts_in_without_passing_the_cache_on_fails(qwen3_moe, tmp_path) -> None:
    text = (qwen3_moe.root / qwen3_moe.plan.model_file).read_text()
    check = _check(qwen3_moe, text.replace(DISPATCH, ""), tmp_path)
    assert check.status is Status.FAIL, check.detail


def test_the_library_classes_are_not_checked(qwen3_moe) -> None:
    from mobius.models import MoECausalLMModel

    hf_config = make_hf_config(qwen3_moe.analysis.tiny.config)
    assert static_cache_check(MoECausalLMModel, hf_config, "default") is None
