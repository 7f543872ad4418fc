"""HunYuan MoE keeps its router's weight under another name (``mlp.gate.wg.weight``, a linear
inside HF's gate module) and its shared expert as ``mlp.shared_mlp``: AutoModel's ``Gate`` holds
``mlp.gate.weight``, its MoE ``mlp.shared_experts``, and the generated adapter renames both ways.
Its tests catch an adapter that leaves the router's name as it is."""

from __future__ import annotations

from pathlib import Path

from onboard.pipeline import NewOptions, onboard_new
from tests.new_types import default_config_dir
from tests.targets.automodel.sabotage import assert_generated_tests_catch

# HunYuanMoEV1Config's default head_dim is None, which its modeling cannot build with
HEAD_DIM = {"head_dim": 128}
RENAME = '    (r"\\.mlp\\.gate\\.wg\\.weight$", r".mlp.gate.weight"),\n'


def test_hunyuan_router_weight_renamed_by_the_adapter(tmp_path: Path) -> None:
    folder = default_config_dir("hunyuan_v1_moe", tmp_path / "models", **HEAD_DIM)
    out = tmp_path / "out"
    options = NewOptions(
        model=str(folder), target="automodel", treat_as_new=True, out=out, parity=False
    )
    result = onboard_new(options)
    adapter = (result.root / result.plan.model_file).parent / "state_dict_adapter.py"
    assert r'(r"\.mlp\.gate\.weight$", r".mlp.gate.wg.weight"),' in adapter.read_text()
    assert_generated_tests_catch(
        out,
        adapter,
        RENAME,
        "",
        "test_logits_match_hf",
    )
