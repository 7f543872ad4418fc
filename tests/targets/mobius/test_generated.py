"""Generated mobius code: lint-clean, and proven by parity for every dense re-onboarding."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius import TARGET
from onboard.targets.mobius.plan import STYLE
from tests.analyses import DENSE
from tests.hub_cache import fixture_config
from tests.new_types import default_config_dir
from tests.targets.mobius.checks import assert_default_checks_pass
from tests.targets.mobius.sabotage import config_classes, parity_with


def _new(repo_id: str, out: Path, **options):
    model = str(fixture_config(repo_id).parent)
    return onboard_new(NewOptions(model=model, treat_as_new=True, out=out, **options))


def _new_default(model_type: str, tmp_path: Path, *, parity: bool = True, **overrides):
    """``onboard new --treat-as-new`` on transformers' default config (with ``overrides``)."""
    folder = default_config_dir(model_type, tmp_path / "models", **overrides)
    return onboard_new(
        NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out", parity=parity)
    )


@pytest.mark.parametrize("repo_id", DENSE)
def test_treat_as_new_parity_passes(repo_id: str, tmp_path: Path) -> None:
    result = _new(repo_id, tmp_path / "out")
    report = result.parity
    assert report is not None and report.passed, [
        c for c in report.checks if c.status is Status.FAIL
    ]
    assert report.weights.ok
    providers = {c.provider for c in report.checks}
    assert providers == {"default", "cpu"}
    assert_default_checks_pass(report)
    default = [c for c in report.checks if c.provider == "default"]
    assert {c.name for c in default} >= {
        "weights",
        "prefill",
        "decode",
        "kv-cache",
        "pad-left",
        "pad-right",
    }
    for check in report.checks:
        if check.metrics is not None and check.status is Status.PASS:
            assert check.metrics.max_abs < 1e-5
    xfails = {c.bug for c in report.checks if c.status is Status.XFAIL}
    assert xfails <= {"T8"}
    assert result.rendered is not None and result.rendered.changed
    module = result.root / result.plan.model_file
    assert lint_python(module.read_text(), filename=module.name, style=STYLE) == ""


def test_gemma3_cpu_failure_is_confirmed_as_mobius_bug_t8(tmp_path: Path) -> None:
    report = _new("google/gemma-3-1b-it", tmp_path / "out").parity
    cpu = [c for c in report.checks if c.provider == "cpu" and c.metrics is not None]
    assert cpu and all(c.status is Status.XFAIL and c.bug == "T8" for c in cpu)
    assert [b.id for b in report.bugs] == ["T8"]
    assert "one RoPE theta for every layer" in report.bugs[0].evidence


def _sabotage(repo_id: str, tmp_path: Path, old: str, new: str, *, default_config=False):
    """Write the generated code, break one line of it, and run parity on the broken copy.

    ``repo_id`` is a fixture, or with ``default_config`` a model type (transformers' default
    config)."""
    if default_config:
        result = _new_default(repo_id, tmp_path, parity=False)
    else:
        result = _new(repo_id, tmp_path / "out", parity=False)
    return parity_with(result, old, new)


def test_dropped_qk_norm_is_caught_by_the_weight_account(tmp_path: Path) -> None:
    report = _sabotage("Qwen/Qwen3-0.6B", tmp_path, "attn_qk_norm=True", "attn_qk_norm=False")
    assert not report.passed
    weights = [c for c in report.checks if c.name == "weights"]
    assert weights and all(c.status is Status.FAIL for c in weights)
    dropped = "model.layers.0.self_attn.k_norm.weight"
    assert f"{dropped} (from {dropped}) fills no parameter" in weights[0].detail


def test_wrong_norm_offset_is_caught_by_the_numbers(tmp_path: Path) -> None:
    report = _sabotage(
        "google/gemma-3-1b-it",
        tmp_path,
        "self.norm = OffsetRMSNorm(",
        "self.norm = __import__('mobius').components.RMSNorm(",
    )
    prefill = [c for c in report.checks if c.name == "prefill" and c.provider == "default"]
    assert prefill[0].status is Status.FAIL
    assert prefill[0].metrics.max_abs > 1e-2


def test_rounded_embedding_scale_is_over_the_gate(tmp_path: Path) -> None:
    """mobius' own Gemma rounding (bug M2) is small but real: the fp32 gate must see it."""
    report = _sabotage(
        "google/gemma-3-1b-it",
        tmp_path,
        "embed_scale=config.hidden_size**0.5",
        "embed_scale=round(config.hidden_size**0.5, 2)",
    )
    prefill = [c for c in report.checks if c.name == "prefill" and c.provider == "default"]
    assert prefill[0].status is Status.FAIL
    assert 1e-4 < prefill[0].metrics.max_abs < 1e-1


@pytest.mark.parametrize(
    ("model_type", "old", "new"),
    [
        # Granite divides the logits by logits_scaling; multiplying instead must fail
        ("granite", "logit_scale=1.0 / config.logits_scaling", "logit_scale=config.logits_scaling"),
        ("granite", "residual_multiplier=config.residual_multiplier", "residual_multiplier=1.0"),
        # mobius' DeepSeekMLA would build the latent norms with rms_norm_eps (1e-5 here)
        (
            "minicpm3",
            "RMSNorm(config.kv_lora_rank, eps=1e-06)",
            "RMSNorm(config.kv_lora_rank, eps=config.rms_norm_eps)",
        ),
        # q and k rows swapped when splitting (same shapes: only the numbers can tell)
        ("phi3", 'zip("qkv", parts', 'zip("kqv", parts'),
        # mobius' default epsilon instead of the one OLMo fixes in code
        ("olmo", "rms_norm_eps=1e-05", "rms_norm_eps=1e-06"),
        # a sequential layer instead of Cohere's parallel one
        ("cohere", "self.mlp(op, hidden_states)", "self.mlp(op, op.Add(residual, attn_output))"),
    ],
)
@pytest.mark.slow
def test_wrong_multiplier_or_latent_eps_is_caught(tmp_path: Path, model_type, old, new) -> None:
    report = _sabotage(model_type, tmp_path, old, new, default_config=True)
    prefill = [c for c in report.checks if c.name == "prefill" and c.provider == "default"]
    assert prefill[0].status is Status.FAIL
    assert not report.bugs


@pytest.mark.slow
def test_mlp_layer_types_rule_passes_and_ignoring_it_fails(tmp_path: Path) -> None:
    """GLM-4 MoE Lite (mobius lacks it) says which layers are MoE in config.mlp_layer_types."""
    result = _new_default("glm4_moe_lite", tmp_path / "ok")
    assert result.parity.passed and result.analysis.spec.text.moe.dense_rule == "mlp_layer_types"
    report = _sabotage(
        "glm4_moe_lite",
        tmp_path / "broken",
        'return config.mlp_layer_types[index] == "sparse"',
        'return config.mlp_layer_types[index] == "dense"',
        default_config=True,
    )
    assert not report.passed and not report.weights.ok


def test_missing_window_fails_and_is_not_excused(tmp_path: Path) -> None:
    # the generated config leaves the window to mobius' base config: override it with none
    anchor = "return dataclasses.replace(\n            base,\n"
    report = _sabotage(
        "mistralai/Mistral-7B-v0.1",
        tmp_path,
        anchor,
        f"{anchor}            sliding_window=None,\n",
    )
    default = [c for c in report.checks if c.provider == "default" and c.name == "prefill"]
    assert default[0].status is Status.FAIL  # T9 is never blamed for generated code
    assert not report.bugs


@pytest.mark.parametrize(
    ("model_type", "expected_xfail"),
    [
        ("arcee", set()),  # non-gated MLP with relu2
        ("nemotron", {"M3"}),  # LayerNorm (1 + w) with bias, partial RoPE
        ("stablelm", {"M3"}),  # LayerNorm, partial RoPE
        ("olmo2", set()),  # post-norm, full-width qk-norm
        ("gemma2", {"T8"}),  # softcaps, query_pre_attn_scalar, alternating windows
        # MoE generated on DeepSeekV3's class (its weight renames must not apply); mobius keys
        # interleaved RoPE on model_type "glm4_moe", HF rotates halves: rope_interleave is forced.
        ("glm4_moe", {"M3"}),
        # interleaved RoPE that no config key announces (found by the analysis), partial 0.5
        ("glm", {"M3"}),
        ("helium", set()),
        # config multipliers: embedding, residual, logits (divided), attention scale given
        ("granite", set()),
        # the same multipliers on a sandwich-norm layer; logits multiplied, not divided
        ("hyperclovax", set()),
        # latent attention with a fixed latent-norm epsilon; scale_depth / sqrt(layers)
        ("minicpm3", set()),
        # parallel attention and MLP, LayerNorm without bias, interleaved RoPE, logit_scale
        ("cohere", set()),
        # the same, plus sliding layers with RoPE and full layers without
        ("cohere2", {"T8"}),
        # post-norm; full-attention layers skip RoPE
        ("exaone4", {"T8"}),
        # LayerNorms with nothing to learn, epsilon fixed in code (measured: 1e-5)
        ("olmo", set()),
        # one fused qkv_proj, split when loading; fused gate_up_proj
        ("phi3", set()),
        # Phi's names (dense, final_layernorm), lm_head bias, parallel layer, partial RoPE
        ("phi", {"M3"}),
        # query_key_value rows head by head, q/k LayerNorms named q_layernorm, relu2
        ("persimmon", {"M3"}),
        # gpt_neox.* names read through the Llama layout, lm_head saved as embed_out, two norms
        # of the same input feeding attention and the MLP
        ("gpt_neox", {"M3"}),
        # learned positions (wpe), Conv1D weights stored (in, out), width n_inner or 4 x hidden
        ("gpt2", set()),
        # decoder nested under model.decoder, positions at row + 2, fc1/fc2 written in the layer
        ("opt", set()),
        # scaled embeddings, positions at row + 2, LayerNorm epsilon fixed in code (1e-5)
        ("biogpt", set()),
        # multi-query attention from config.multi_query, fused c_attn of q and one k/v head
        ("gpt_bigcode", set()),
        # global/local layers from attention_layers and window_size, q.k unscaled, attn.attention
        ("gpt_neo", {"T8"}),
        # sinusoidal positions computed in the graph (row + 2, padding row zero), layer_norm
        ("xglm", set()),
        # RoPE inside the attention on the first rotary_dim, interleaved; one norm, parallel
        ("gptj", {"M3"}),
        # ALiBi (the cpu EP's GroupQueryAttention rewrite drops it: M5), an embedding norm
        ("bloom", {"M5"}),
        # ALiBi, LayerNorms without bias, MptMLP adds the residual itself
        ("mpt", {"M5"}),
        # position-dependent query scale (the cpu EP's GroupQueryAttention path drops it: M6)
        ("ministral3", {"M6"}),
        # RoPE turned the other way, q/k norms and embedding norm with nothing to learn, softcap
        ("nanochat", set()),
        # fused q/v/k rows in 4 groups of heads (8 tiny heads), RoPE inside the attention
        ("codegen", {"M3"}),
        # xIELU activation learning alpha_p and alpha_n in every layer, a generated component
        ("apertus", set()),
        # norms after each residual add, no final norm; HF keeps no KV cache (decode reruns it)
        ("openai-gpt", set()),
        # Wq/Wk/Wv, sinusoidal positions from a buffer, embeddings x sqrt(hidden) after lookup
        ("ctrl", set()),
        # an output bias in the last layer only (zeros elsewhere), MLP width from the source
        ("gpt_neox_japanese", set()),
        # embeddings block with a norm, no attention norm in layer 0, Wi/Wo fused gate-up,
        # a prediction head before the (tied, biased) head; per-kind RoPE and windows (T8)
        ("modernbert-decoder", {"T8"}),
        # a mask from the values added to the scores, cut to the highest keys per row (one
        # attention over the cached keys, which no GroupQueryAttention rewrite touches), learned
        # residual scales
        ("doge", set()),
        # differential attention, lambda_init per layer from HF's formula
        ("diffllama", set()),
    ],
)
@pytest.mark.slow
def test_default_configs_of_more_architectures(tmp_path: Path, model_type, expected_xfail) -> None:
    report = _new_default(model_type, tmp_path).parity
    assert report.passed, [c for c in report.checks if c.status is Status.FAIL]
    assert {c.bug for c in report.checks if c.status is Status.XFAIL} == expected_xfail
    default = [c for c in report.checks if c.provider == "default"]
    # nothing excused on the default EP; latent attention skips kv-cache (the detail says why)
    assert all(c.status is Status.PASS or (c.status is Status.SKIP and c.detail) for c in default)


def test_qk_norms_after_rope_get_a_generated_attention(tmp_path: Path) -> None:
    """HunYuan: a generated Attention normalises q and k after RoPE; both EPs pass."""
    result = _new_default("hunyuan_v1_dense", tmp_path, head_dim=128)
    assert result.parity.passed and all(c.status is not Status.XFAIL for c in result.parity.checks)
    text = (result.root / result.plan.model_file).read_text()
    assert "class HunYuanDenseV1Attention(Attention)" in text
    assert lint_python(text, filename=Path(result.plan.model_file).name, style=STYLE) == ""


def test_gpt_neox_without_parallel_residual_is_sequential(tmp_path: Path) -> None:
    """The same two norms wired one after the other: the data flow, not the names, decides."""
    result = _new_default("gpt_neox", tmp_path, use_parallel_residual=False)
    assert result.analysis.spec.text.norm.placement == "pre"
    assert result.parity.passed


def test_a_config_flag_that_makes_layers_parallel(tmp_path: Path) -> None:
    """StableLM's use_parallel_residual turns its layers into Cohere-style parallel ones (one norm
    for both): the analysis follows the flag, not the model_type."""
    result = _new_default("stablelm", tmp_path, use_parallel_residual=True)
    assert result.analysis.spec.text.norm.placement == "parallel"
    assert result.parity.passed
    assert {c.bug for c in result.parity.checks if c.status is Status.XFAIL} == {"M3"}


MOE = (
    ("mistralai/Mixtral-8x7B-v0.1", "fixture"),
    ("Qwen/Qwen3-30B-A3B", "fixture"),
    ("allenai/OLMoE-1B-7B-0924", "fixture"),
    ("qwen2_moe", "default config"),
    ("deepseek-ai/DeepSeek-V3", "fixture"),
)


def _moe_model(source: str, kind: str, tmp_path: Path) -> str:
    if kind == "fixture":
        return str(fixture_config(source).parent)
    return str(default_config_dir(source, tmp_path / "models"))


@pytest.mark.parametrize(("source", "kind"), MOE)
def test_moe_treat_as_new_parity_passes(source: str, kind: str, tmp_path: Path) -> None:
    result = onboard_new(
        NewOptions(
            model=_moe_model(source, kind, tmp_path), treat_as_new=True, out=tmp_path / "out"
        )
    )
    report = result.parity
    assert report.passed, [c for c in report.checks if c.status is Status.FAIL]
    # Flipped flags (checks marked +) may open a sliding window the cpu EP drops (bug T8)
    excused = [c for c in report.checks if c.status is Status.XFAIL]
    assert all(c.name.endswith("+") and c.bug == "T8" for c in excused), excused
    assert report.weights.ok and report.weights.checkpoint_tensors == report.weights.parameters
    experts = [row for row in report.weights.rows if row.group.endswith("experts")]
    assert experts and all(row.placed == row.checkpoint for row in experts)
    module = result.root / result.plan.model_file
    assert lint_python(module.read_text(), filename=module.name, style=STYLE) == ""


def test_a_router_inside_its_gate_and_an_ungated_shared_mlp(tmp_path: Path) -> None:
    """HunYuan MoE: the router is gate.wg, the shared expert shared_mlp; one expert by default,
    four in the tiny model. Every tensor is placed and both EPs pass."""
    result = _new_default("hunyuan_v1_moe", tmp_path, head_dim=128)
    report = result.parity
    assert report.passed, [c for c in report.checks if c.status is Status.FAIL]
    assert report.weights.ok and report.weights.checkpoint_tensors == report.weights.parameters
    assert result.analysis.spec.text.moe.router_name == "gate.wg"
    assert '(".mlp.gate.wg.", ".mlp.gate.")' in (result.root / result.plan.model_file).read_text()


def test_experts_saved_fused_are_split_for_every_expert(tmp_path: Path) -> None:
    """Granite MoE saves each layer's experts as two 3-D tensors (input_linear, output_linear):
    each fills every expert's projections, and the proof sees all of them placed."""
    report = _new_default("granitemoe", tmp_path).parity
    assert report.passed, [c for c in report.checks if c.status is Status.FAIL]
    assert report.weights.ok and report.weights.checkpoint_tensors == 21
    experts = [row for row in report.weights.rows if row.group.endswith("experts")]
    assert [(r.checkpoint, r.placed, r.detail) for r in experts] == [(2, 2, "experts 0..3")] * 2


def test_moe_layers_by_interval_with_a_correction_bias_kept_elsewhere(tmp_path: Path) -> None:
    """Ernie 4.5 MoE: layer 0 dense by moe_layer_start_index, a generated router whose choice
    bias the checkpoint keeps in moe_statics, [1, experts]; both EPs pass."""
    result = _new_default("ernie4_5_moe", tmp_path)
    report = result.parity
    assert report.passed, [c for c in report.checks if c.status is Status.FAIL]
    assert report.weights.ok and not [c for c in report.checks if c.status is Status.XFAIL]
    text = (result.root / result.plan.model_file).read_text()
    assert "config.moe_layer_start_index <= index <= end" in text
    assert lint_python(text, filename=Path(result.plan.model_file).name, style=STYLE) == ""


def test_a_sparsemixer_router_is_generated(tmp_path: Path) -> None:
    """PhiMoE: a generated router picks two experts, each weighted within sparsemixer's margin
    (config.router_jitter_noise, 0.3 in the tiny model so tokens mix experts); both EPs pass."""
    result = _new_default("phimoe", tmp_path)
    report = result.parity
    assert report.passed, [c for c in report.checks if c.status is Status.FAIL]
    assert report.weights.ok and not [c for c in report.checks if c.status is Status.XFAIL]
    text = (result.root / result.plan.model_file).read_text()
    assert "def _sparsemixer(self, op: OpBuilder, logits: ir.Value)" in text
    assert "router_jitter_noise=config.router_jitter_noise" in config_classes(result)
    assert lint_python(text, filename=Path(result.plan.model_file).name, style=STYLE) == ""


def test_swapped_experts_are_caught_before_parity(tmp_path: Path) -> None:
    """Renames that exchange experts 0 and 1 keep every name valid: only provenance shows it."""
    swap = (
        '(".experts.0.", ".experts.9."),\n'
        '                (".experts.1.", ".experts.0."),\n'
        '                (".experts.9.", ".experts.1."),\n'
        '                (".w1.", ".gate_proj.")'
    )
    report = _sabotage("mistralai/Mixtral-8x7B-v0.1", tmp_path, '(".w1.", ".gate_proj.")', swap)
    weights = next(c for c in report.checks if c.name == "weights")
    assert weights.status is Status.FAIL
    assert (
        "model.layers.0.block_sparse_moe.experts.0.w1.weight landed in "
        "model.layers.0.mlp.experts.1.gate_proj.weight, expected "
        "model.layers.0.mlp.experts.0.gate_proj.weight" in report.weights.problems
    )


def test_dropped_shared_expert_is_caught_before_parity(tmp_path: Path) -> None:
    """A MoE layer that never calls its shared expert: the graph has no parameters for it."""
    report = _sabotage(
        "deepseek-ai/DeepSeek-V3", tmp_path, "return op.Add(routed, shared)", "return routed"
    )
    weights = next(c for c in report.checks if c.name == "weights")
    assert weights.status is Status.FAIL
    assert (
        "model.layers.1.mlp.shared_experts.gate_proj.weight "
        "(from model.layers.1.mlp.shared_experts.gate_proj.weight) fills no parameter"
        in report.weights.problems
    )


@pytest.mark.parametrize(("model_type", "prefix"), [("gpt2", "transformer."), ("opt", "model.")])
def test_checkpoints_saved_from_the_base_model_load_too(tmp_path: Path, model_type, prefix):
    """Hub GPT-2 and OPT checkpoints are saved from GPT2Model / OPTModel: their names lack the
    causal LM's base_model_prefix. The generated preprocess_weights adds it back."""
    from onboard.checkpoint import tensors
    from onboard.hf_config import make_hf_config
    from onboard.targets.mobius import _import_file
    from onboard.targets.mobius.parity import mobius_config
    from onboard.tiny_model import build_tiny_model

    result = _new_default(model_type, tmp_path)
    assert result.analysis.spec.weights.base_prefix == prefix.rstrip(".")
    design = TARGET.design(result.analysis.spec, result.proposal)
    module_class = getattr(_import_file(result.root / result.plan.model_file), design.model_class)
    hf_config = make_hf_config(result.analysis.tiny.config)
    module = module_class(mobius_config(module_class, hf_config))
    saved = tensors(build_tiny_model(hf_config))
    base = {name.removeprefix(prefix): tensor for name, tensor in saved.items()}
    assert base.keys() != saved.keys()
    assert module.preprocess_weights(base).keys() == module.preprocess_weights(saved).keys()
