"""DeepSeek Sparse Attention (DeepSeek V3.2's lightning indexer keeps each query's top-k keys of
the latent attention), from the backlog: deepseek_v32, which mobius 0.1.0 lacks, generated into
mobius from transformers' default config with zero edits, the indexer's keys cached beside the
KV cache as HF caches them. The tiny model keeps 4 keys of the 9-token prompt and of every
decode step, so a generated attention that leaves the selection out, keeps one key more or
rotates no indexer key fails parity; AutoModel refuses the feature by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.errors import UnsupportedFeatureError
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, NewResult, onboard_new
from onboard.targets.mobius import TARGET
from onboard.targets.mobius import plan as mobius_plan
from onboard.targets.mobius.plan import STYLE
from tests.targets.mobius.sabotage import parity_with

KEPT_BIAS = "bias = op.Where(kept, attention_bias, op.CastLike(self._lowest, attention_bias))"
TOP_K = "count = op.Min(op.Shape(index, start=3, end=4), op.Constant(value_ints=[self.topk]))"
KEY_ROTATED = "key = op.Concat(self._rotate(op, k_rot, position_embeddings, 1), k_pass, axis=-1)"


def _config(tmp_path: Path, model_type: str, **overrides) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir(model_type, tmp_path / "hub", **overrides)


@pytest.fixture(scope="module")
def deepseek_v32(tmp_path_factory: pytest.TempPathFactory) -> NewResult:
    tmp_path = tmp_path_factory.mktemp("deepseek_v32")
    model = _config(tmp_path, "deepseek_v32")
    return onboard_new(NewOptions(model=str(model), out=tmp_path / "out"))


def _passes(result: NewResult) -> None:
    assert result.proposal.already_supported is None  # from the backlog: mobius lacks it
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    # the indexer's keys are compared with HF's cache after the prefill and every decode step
    states = [c for c in report.checks if c.name == "states"]
    assert states and all("indexer_key" in c.detail for c in states), states


def test_deepseek_v32_generates_into_mobius_with_zero_edits(deepseek_v32: NewResult) -> None:
    result = deepseek_v32
    _passes(result)
    indexer = result.analysis.spec.text.attention.indexer
    assert (indexer.heads, indexer.head_dim, indexer.topk) == (64, 128, 2048)  # the real sizes
    assert not indexer.rope_interleaved and indexer.layers_key is None
    evidence = dict(result.analysis.spec.evidence)["text.attention.indexer"]
    assert any(re.search(r"modeling_deepseek_v32\.py:\d+", e.where) for e in evidence), evidence
    text = (result.root / result.plan.model_file).read_text()
    assert "default_task = DeepseekV32Task()" in text
    assert lint_python(text, filename="deepseek_v32.py", style=STYLE) == ""


def _failed(report, check: str) -> bool:
    return any(c.name == check and c.status is Status.FAIL for c in report.checks)


@pytest.mark.parametrize(
    ("old", "new", "fails"),
    [
        # the selection left out: every key the causal mask allows is attended
        pytest.param(KEPT_BIAS, "bias = attention_bias", ("prefill", "decode"), id="mask-left-out"),
        # one key more than index_topk kept per row
        pytest.param(
            TOP_K,
            TOP_K.replace("[self.topk]", "[self.topk + 1]"),
            ("prefill", "decode"),
            id="top-k-off-by-one",
            marks=pytest.mark.slow,
        ),
        # the indexer's keys without RoPE: other keys are kept, and the cached keys differ
        pytest.param(
            KEY_ROTATED,
            "key = op.Concat(k_rot, k_pass, axis=-1)",
            ("prefill", "states"),
            id="keys-without-rope",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_wrong_selection_fails_parity(
    deepseek_v32: NewResult, old: str, new: str, fails: tuple[str, ...]
) -> None:
    module = deepseek_v32.root / deepseek_v32.plan.model_file
    text = module.read_text()
    try:
        report = parity_with(deepseek_v32, old, new)
    finally:
        module.write_text(text)
    assert not report.passed
    assert all(_failed(report, check) for check in fails), [c.to_dict() for c in report.checks]


def test_automodel_refuses_the_lightning_indexer_by_name(tmp_path: Path) -> None:
    """nemo-automodel 0.7.0 has its own DeepseekV32ForCausalLM: hidden, it is not generated."""
    model = _config(tmp_path, "deepseek_v32")
    options = NewOptions(
        model=str(model), out=tmp_path / "out", target="automodel", treat_as_new=True
    )
    with pytest.raises(UnsupportedFeatureError) as raised:
        onboard_new(options)
    assert any("lightning indexer" in item for item in raised.value.items), raised.value.items
    assert not (tmp_path / "out").exists()


# GLM-MoE-DSA's indexer turns (x0, x1) pairs, gathered into halves first as HF returns them
GATHERED = "x = op.Reshape(op.Transpose(pairs, perm=[0, 1, 2, 4, 3]), [0, 0, -1])"
# Whether a layer runs its own indexer, or reuses the last one's selection
RUNS_INDEXER = 'return config.indexer_types[index] == "full"'


def test_glm_moe_dsa_generates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    """transformers' default config: every layer runs its indexer, on interleaved pairs."""
    model = _config(tmp_path, "glm_moe_dsa")
    result = onboard_new(NewOptions(model=str(model), out=tmp_path / "out"))
    _passes(result)
    indexer = result.analysis.spec.text.attention.indexer
    assert indexer.rope_interleaved and indexer.layers_key is None
    text = (result.root / result.plan.model_file).read_text()
    assert lint_python(text, filename="glm_moe_dsa.py", style=STYLE) == ""
    # the pairs turned where they are: the same scores, but the cached keys in another order
    report = parity_with(result, GATHERED, "x = op.Reshape(pairs, [0, 0, -1])")
    assert _failed(report, "states"), [c.to_dict() for c in report.checks]


@pytest.mark.slow
def test_glm_moe_dsa_layers_without_an_indexer_reuse_the_last_selection(tmp_path: Path) -> None:
    """config.indexer_types marks layers "shared" (GLM-MoE-DSA's IndexShare): the tiny model
    keeps a dense, a full and a shared layer, which reads no indexer and caches no keys."""
    kinds = ["full", "full", "shared", "full", "shared", "shared"]
    model = _config(
        tmp_path,
        "glm_moe_dsa",
        num_hidden_layers=len(kinds),
        mlp_layer_types=["dense"] + ["sparse"] * (len(kinds) - 1),
        layer_types=["indexed_attention"] * len(kinds),
        indexer_types=kinds,
    )
    result = onboard_new(NewOptions(model=str(model), out=tmp_path / "out"))
    _passes(result)
    assert result.analysis.tiny.config["indexer_types"] == ["full", "full", "shared"]
    indexer = result.analysis.spec.text.attention.indexer
    assert (indexer.layers_key, indexer.own) == ("indexer_types", "full")
    text = (result.root / result.plan.model_file).read_text()
    assert lint_python(text, filename="glm_moe_dsa.py", style=STYLE) == ""
    # mobius' tiny test config: small indexer sizes, and the layer list its config class reads
    entry = mobius_plan.test_config_entry(
        TARGET.design(result.analysis.spec, result.proposal), result.analysis.spec
    )
    assert '"index_topk": 4' in entry and '"indexer_types": ["full", "full"]' in entry, entry
    # an indexer in every layer: the shared layer's is filled by no checkpoint tensor
    report = parity_with(result, RUNS_INDEXER, "return True")
    assert not report.passed
    assert any("layers.2.self_attn.indexer." in p for p in report.weights.problems), report.weights
