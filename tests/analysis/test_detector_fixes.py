"""Detector pieces behind the labelled table's former xfails, each checked on its own."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from onboard.analysis import analyse
from onboard.analysis.moe import _shared_width
from onboard.analysis.probe import probe_model
from onboard.analysis.rope_reader import rope_parameters_of
from onboard.analysis.router import (
    _router_inputs,
    _routing_outputs,
    _source_order,
    correction_bias,
    find_router,
)
from onboard.analysis.spec_check import check_spec
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.source import load_source
from onboard.tiny import MULTIPLIER_KEYS, TINY_TOP_K, multiplier_defaults, shrink_config
from onboard.tiny_model import build_tiny_model, perturb
from tests.new_types import default_config_dir

# -- tiny configs ----------------------------------------------------------------------------


def test_the_layer_count_is_written_where_the_config_keeps_it() -> None:
    """LongcatFlash stores num_layers; its num_hidden_layers is a property (2 x num_layers)."""
    config = {"model_type": "x", "num_layers": 3, "num_attention_heads": 4, "hidden_size": 64}
    tiny = shrink_config(config, None, ["moe|A", "moe|A", "moe|A"]).config
    assert tiny["num_layers"] == 2
    assert "num_hidden_layers" not in tiny


def test_the_usual_layer_count_key_wins() -> None:
    config = {"model_type": "x", "num_hidden_layers": 4, "num_layers": 8, "hidden_size": 64}
    tiny = shrink_config(config, None, ["dense|A"] * 4).config
    assert tiny["num_hidden_layers"] == 2 and tiny["num_layers"] == 8


@pytest.mark.parametrize("key", ["num_experts_per_tok", "moe_topk", "moe_k"])
def test_every_top_k_key_is_shrunk_with_the_experts(key: str) -> None:
    config = {"model_type": "x", "num_hidden_layers": 2, "moe_num_experts": 64, key: 6}
    assert shrink_config(config, None).config[key] == TINY_TOP_K


def test_top_k_never_exceeds_experts_that_are_not_shrunk() -> None:
    """Hunyuan's default: one expert, top-1; top-2 of it could not run."""
    config = {"model_type": "x", "num_hidden_layers": 2, "num_experts": 1, "moe_topk": 1}
    assert shrink_config(config, None).config["moe_topk"] == 1


def test_any_list_with_one_entry_per_layer_shrinks_with_the_layers() -> None:
    """Gemma 3n's activation_sparsity_pattern is per layer though no known key names it."""
    config = {
        "model_type": "x",
        "num_hidden_layers": 4,
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
        "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0],
        "architectures": ["A", "B", "C", "D"],
    }
    tiny = shrink_config(config, config["layer_types"]).config
    assert tiny["num_hidden_layers"] == len(tiny["activation_sparsity_pattern"]) == 3
    assert tiny["activation_sparsity_pattern"] == [0.95, 0.0, 0.0]
    assert tiny["architectures"] == ["A", "B", "C", "D"]


def test_kv_sharing_layers_are_kept_at_the_tail() -> None:
    """Gemma 3n's last num_kv_shared_layers reuse keys and values of earlier layers of their
    kind: the tiny config keeps a shared and an unshared layer of each kind, shared last."""
    kinds = (["sliding_attention"] * 4 + ["full_attention"]) * 7
    config = {"model_type": "x", "num_hidden_layers": 35, "num_kv_shared_layers": 15}
    tiny = shrink_config(config, kinds).config
    count, shared = tiny["num_hidden_layers"], tiny["num_kv_shared_layers"]
    assert (count, shared) == (4, 2)
    unshared = tiny["layer_types"][: count - shared]
    assert set(unshared) == set(tiny["layer_types"][count - shared :]) == set(kinds)


def test_gemma3n_text_is_refused_with_what_it_adds(tmp_path):
    """Its tiny model builds (KV sharing kept consistent, the per-layer table shrunk), and the
    analysis names each addition at its HF line: AltUp, LAuReL, per-layer inputs."""
    analysis = analyse(load_source(str(default_config_dir("gemma3n_text", tmp_path))))
    assert analysis.tiny.config["vocab_size_per_layer_input"] < 1000
    found = " ".join(f"{d.where} {d.detail}" for d in analysis.spec.unresolved)
    for part in ("altup.correction_coefs", "laurel.linear_left", "per_layer_input_gate"):
        assert part in found
    assert "modeling_gemma3n.py:" in found


def test_per_layer_config_follows_the_kept_layers() -> None:
    """Gemma 4 keys overrides by layer index: the tiny config keys them by the new indices."""
    config = {
        "model_type": "x",
        "num_hidden_layers": 6,
        "per_layer_config": {"02": {"head_dim": 512}, "05": {"head_dim": 512}},
    }
    tiny = shrink_config(config, None).config
    assert tiny["per_layer_config"] == {"1": {"head_dim": 512}}
    assert tiny["num_hidden_layers"] == 2


def test_config_multipliers_get_distinct_tiny_values() -> None:
    """Real configs often hold 1.0 (or equal values), which would hide where HF applies them."""
    config = {"model_type": "x", "num_hidden_layers": 2}
    config |= dict.fromkeys(MULTIPLIER_KEYS, 1.0)
    tiny = shrink_config(config, None).config
    values = [tiny[key] for key in MULTIPLIER_KEYS]
    assert len(set(values)) == len(values) and 1.0 not in values


def test_multiplier_defaults_come_from_the_config_class_but_not_properties() -> None:
    """A key config.json omits still reaches the tiny config; MiniCPM3's logits_scaling is a
    property of hidden_size / dim_model_base and cannot be set."""
    granite = make_hf_config({"model_type": "granite"})
    assert multiplier_defaults(granite)["residual_multiplier"] == 1.0
    minicpm3 = make_hf_config({"model_type": "minicpm3"})
    assert "logits_scaling" not in multiplier_defaults(minicpm3)
    assert "scale_emb" in multiplier_defaults(minicpm3)


def test_a_tiny_model_without_layers_is_refused() -> None:
    config = make_hf_config(
        {
            "model_type": "llama",
            "num_hidden_layers": 0,
            "hidden_size": 64,
            "intermediate_size": 64,
            "num_attention_heads": 4,
            "vocab_size": 32,
        }
    )
    with pytest.raises(UnsupportedFeatureError, match="no decoder layers"):
        probe_model(build_tiny_model(config))


# -- routers ---------------------------------------------------------------------------------


def test_router_outputs_are_told_apart_by_dtype_and_shape() -> None:
    logits, weights = torch.randn(5, 4), torch.rand(5, 2)
    indices = torch.tensor([[0, 1]] * 5)
    assert _routing_outputs((logits, weights, indices), 5) == (weights, indices)
    assert _routing_outputs((indices, weights, logits), 5) == (weights, indices)  # Aria
    assert _routing_outputs((logits, logits), 5) is None
    # One expert, top-1 (HunYuan's default): the logits have the weights' shape; the weights sit
    # beside the indices, as in every router above
    one_logit, one_weight, one_index = torch.randn(5, 1), torch.ones(5, 1), torch.zeros(5, 1).long()
    assert _routing_outputs((one_logit, one_weight, one_index), 5) == (one_weight, one_index)


class _WrappedRouter(torch.nn.Module):  # HunYuan's gate: the linear is gate.wg
    def __init__(self) -> None:
        super().__init__()
        self.wg = torch.nn.Linear(8, 4, bias=False)


def test_a_router_holding_its_linear_inside_is_read_through_it() -> None:
    block = torch.nn.Module()
    block.gate = _WrappedRouter()
    name, router, linear = find_router(block)
    assert (name, router, linear) == ("gate.wg", block.gate, block.gate.wg)
    block.gate.extra = torch.nn.Linear(8, 4)  # two linears: which one routes is not known
    assert find_router(block)[2] is None


def test_moe_layers_get_tiny_experts_even_from_one() -> None:
    """A config with one expert (HunYuan's default) cannot tell routers apart: 4 tiny ones can."""
    config = {"model_type": "x", "num_hidden_layers": 2, "num_experts": 1, "moe_topk": 1}
    tiny = shrink_config(config, None, ["moe|A"] * 2).config
    assert (tiny["num_experts"], tiny["moe_topk"]) == (4, 2)
    dense = shrink_config(config, None, ["dense|A"] * 2).config
    assert (dense["num_experts"], dense["moe_topk"]) == (1, 1)


class _TopKFirst(torch.nn.Module):
    def forward(self, hidden):  # a comment naming softmax first does not count
        values, indices = torch.topk(hidden, 2, dim=-1)
        return torch.softmax(values, dim=-1), indices


class _SoftmaxFirst(torch.nn.Module):
    def forward(self, hidden):
        values, indices = torch.nn.functional.softmax(hidden, dim=-1).topk(2, dim=-1)
        return values, indices


def test_equivalent_routers_follow_the_order_the_source_writes() -> None:
    assert _source_order(_TopKFirst) == "topk_softmax"
    assert _source_order(_SoftmaxFirst) == "softmax_topk"


class _BiasTakingRouter(torch.nn.Module):
    def forward(self, hidden_states, e_score_correction_bias, input_ids=None):
        return hidden_states


class _HashRouter(torch.nn.Module):
    def forward(self, hidden_states, input_ids):
        return hidden_states


def test_router_inputs_come_from_the_block_or_are_named_as_missing() -> None:
    """MiniMax-M2's block passes its own correction bias; DeepSeek-V4 hashes the input ids."""
    block = torch.nn.Module()
    block.register_buffer("e_score_correction_bias", torch.zeros(4))
    inputs, missing = _router_inputs(_BiasTakingRouter(), block)
    assert missing is None and inputs[0] is block.e_score_correction_bias
    assert correction_bias(_BiasTakingRouter(), block) is block.e_score_correction_bias
    assert _router_inputs(_HashRouter(), block) == ([], "input_ids")


def test_shared_expert_width_of_several_fused_experts() -> None:
    """EXAONE-MoE: moe_intermediate_size * num_shared_experts."""
    tiny = SimpleNamespace(moe_intermediate_size=32, num_shared_experts=2)
    real = SimpleNamespace(moe_intermediate_size=1024, num_shared_experts=2)
    assert _shared_width(64, tiny, real) == (2048, "moe_intermediate_size * num_shared_experts")
    assert _shared_width(48, tiny, real)[0] is None


# -- RoPE ------------------------------------------------------------------------------------


def test_rope_parameters_fall_back_to_the_config_attributes() -> None:
    config = SimpleNamespace(rope_parameters=None, rope_theta=5e5, partial_rotary_factor=0.5)
    assert rope_parameters_of(config) == {"rope_theta": 5e5, "partial_rotary_factor": 0.5}


def test_global_nope_layers_are_measured_and_checked(tmp_path) -> None:
    """EXAONE 4 skips RoPE in its full-attention layers; rotating them there is caught."""
    analysis = analyse(load_source(str(default_config_dir("exaone4", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert text.rope_for("full_attention").rope_type is None
    assert text.rope_for("sliding_attention").rope_type == "default"
    rotated = dataclasses.replace(text.rope_for("sliding_attention"))
    wrong = dataclasses.replace(text, rope=tuple((kind, rotated) for kind, _ in text.rope))
    config = make_hf_config(analysis.tiny.config)
    deltas = check_spec(wrong, perturb(build_tiny_model(config)), config)
    assert deltas and "Exaone4Attention computes something" in deltas[0].what
    assert deltas[0].where.startswith("modeling_exaone4.py:")


def test_parts_the_llama_layout_cannot_hold_are_refused_by_name(tmp_path):
    """A decoder part with weights and no place in the layout is named, never skipped."""
    from onboard.analysis.layout import llama_view

    config = make_hf_config(load_source(str(default_config_dir("gpt2", tmp_path))).config)
    model = build_tiny_model(make_hf_config(shrink_config(config.to_dict(), None).config))
    model.transformer.extra = torch.nn.Linear(4, 4)
    with pytest.raises(UnsupportedFeatureError, match=r"transformer\.extra \(Linear\)"):
        llama_view(model)


def test_a_head_saved_under_another_name_is_renamed() -> None:
    """GPT-NeoX keeps lm_head in memory and saves it as embed_out."""
    from onboard.analysis.layout import checkpoint_renames

    disk = (("embed_out.weight", (256, 96)), ("gpt_neox.embed_in.weight", (256, 96)))
    memory = (("lm_head.weight", (256, 96)), ("gpt_neox.embed_in.weight", (256, 96)))
    assert checkpoint_renames(disk, memory) == (("embed_out.", "lm_head."),)


def test_a_prefix_saved_under_another_name_is_renamed_first() -> None:
    """NemotronH saves model.* as backbone.*: one prefix rename, told by names and shapes; the
    head, saved under its own name, is not touched."""
    from onboard.analysis.layout import checkpoint_renames, prefix_renames

    memory = (
        ("model.embeddings.weight", (256, 96)),
        ("model.layers.0.norm.weight", (96,)),
        ("lm_head.weight", (256, 96)),
    )
    disk = tuple((n.replace("model.", "backbone.", 1), s) for n, s in memory)
    assert prefix_renames(disk, memory) == (("backbone.", "model."),)
    assert checkpoint_renames(disk, memory) == ()
    # a shape that does not fit, or a second prefix that would fit as well: no rename
    wrong = (("backbone.embeddings.weight", (256, 95)), disk[1], disk[2])
    assert prefix_renames(wrong, memory) == ()
    twice = (*memory, *((n.replace("model.", "shadow.", 1), s) for n, s in memory[:2]))
    assert prefix_renames(disk, twice) == ()


def _checked_against(analysis, text):
    """The spec check of ``text`` on the analysed architecture's tiny model, seen the Llama way."""
    from onboard.analysis.layout import llama_view

    config = make_hf_config(analysis.tiny.config)
    model = build_tiny_model(config)
    view = llama_view(model)
    return check_spec(text, perturb(view.model if view else model), config)


def test_opt_nested_decoder_inline_mlp_and_offset_positions(tmp_path):
    analysis = analyse(load_source(str(default_config_dir("opt", tmp_path))))
    spec = analysis.spec
    assert spec.unresolved == ()
    assert spec.text.positions is not None and spec.text.positions.offset == 2
    assert spec.text.mlp.projections == ("fc1", "fc2")
    assert spec.text.mlp.width_expr == "config.ffn_dim"
    assert ("model.decoder.layers.", "model.layers.") in spec.weights.renames
    assert (".fc1.", ".mlp.fc1.") in spec.weights.renames
    # Reading the table from row 0 would be off by two positions: the spec check sees it.
    shifted = dataclasses.replace(
        spec.text, positions=dataclasses.replace(spec.text.positions, offset=0)
    )
    assert _checked_against(analysis, shifted)
    assert _checked_against(analysis, spec.text) == ()


def test_gpt2_conv1d_weights_are_read_transposed(tmp_path):
    analysis = analyse(load_source(str(default_config_dir("gpt2", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert text.transposed_linears == (
        "mlp.c_fc",
        "mlp.c_proj",
        "self_attn.c_attn",
        "self_attn.c_proj",
    )
    assert text.mlp.width_expr == "config.n_inner or 4 * config.hidden_size"
    assert text.positions is not None and text.positions.offset == 0
    assert analysis.probe.param_shape("model.layers.0.self_attn.c_attn.weight") == (288, 96)
    # Without the transposes the spec cannot even run on the tiny model.
    assert _checked_against(analysis, dataclasses.replace(text, transposed_linears=()))


def test_an_epsilon_fixed_in_code_wins_over_the_config(tmp_path):
    """BioGPT's config says layer_norm_eps 1e-12; its nn.LayerNorms use the default 1e-5."""
    analysis = analyse(load_source(str(default_config_dir("biogpt", tmp_path))))
    norm = analysis.spec.text.norm
    assert (norm.eps, norm.eps_key) == (1e-5, None)
    assert analysis.spec.unresolved == ()


@pytest.mark.parametrize(
    ("model_type", "rule"),
    [
        ("gpt_bigcode", "1 if config.multi_query else config.num_attention_heads"),
        (
            "falcon",
            "config.num_kv_heads if (config.new_decoder_architecture or not config.multi_query)"
            " else 1",
        ),
    ],
)
def test_multi_query_reads_one_kv_head_by_hf_rule(tmp_path, model_type, rule):
    """num_key_value_heads does not say it: config.multi_query makes k and v one head wide."""
    analysis = analyse(load_source(str(default_config_dir(model_type, tmp_path))))
    attention = analysis.spec.text.attention
    assert analysis.spec.unresolved == ()
    assert (attention.multi_query, attention.num_kv_heads, attention.kv_heads_expr) == (
        True,
        1,
        rule,
    )
    assert attention.fused_qkv is not None


def test_gpt_neo_global_local_layers_unscaled_wrapped_attention(tmp_path):
    """GPT-Neo: attention_layers (global/local) with window_size, q.k never scaled, and its
    projections one module down (attn.attention)."""
    analysis = analyse(load_source(str(default_config_dir("gpt_neo", tmp_path))))
    spec = analysis.spec
    assert spec.unresolved == ()
    assert spec.text.layer_types[:2] == ("full_attention", "sliding_attention")
    assert spec.text.sliding_window == 256
    assert analysis.tiny.config["attention_types"] == [[["global", "local"], 1]]
    assert analysis.tiny.config["window_size"] == 4
    assert spec.text.attention.unscaled
    assert (".attn.attention.", ".self_attn.") in spec.weights.renames
    # With the usual head_dim ** -0.5 every attention module disagrees with HF.
    scaled = dataclasses.replace(
        spec.text, attention=dataclasses.replace(spec.text.attention, unscaled=False)
    )
    assert _checked_against(analysis, scaled)


def test_xglm_sinusoidal_positions_are_recognised_by_their_values(tmp_path):
    """XGLM keeps Llama's model.layers, but its positions are a sinusoidal buffer at row
    position + 2 whose padding row is zero, its final norm is layer_norm, its MLP inline."""
    analysis = analyse(load_source(str(default_config_dir("xglm", tmp_path))))
    spec = analysis.spec
    assert spec.unresolved == ()
    positions = spec.text.positions
    assert (positions.kind, positions.offset, positions.zero_row_key) == (
        "sinusoidal",
        2,
        "pad_token_id",
    )
    assert ("model.layer_norm.", "model.norm.") in spec.weights.renames
    assert spec.text.mlp.projections == ("fc1", "fc2")
    # No positions, or the table read from row 0, and the whole model disagrees with HF.
    assert _checked_against(analysis, dataclasses.replace(spec.text, positions=None))
    shifted = dataclasses.replace(positions, offset=0)
    assert _checked_against(analysis, dataclasses.replace(spec.text, positions=shifted))


def test_gptj_rotary_inside_the_attention(tmp_path):
    """GPT-J rotates the first rotary_dim (64 of 256) of each head with a sin/cos table kept in
    the attention, on interleaved pairs; the tiny model keeps that share (4 of 16)."""
    analysis = analyse(load_source(str(default_config_dir("gptj", tmp_path))))
    spec = analysis.spec
    assert spec.unresolved == ()
    assert analysis.tiny.config["rotary_dim"] == 4
    rope = spec.text.rope_for("full_attention")
    assert (rope.rope_type, rope.theta, rope.partial_rotary_factor, rope.interleaved) == (
        "default",
        10000.0,
        0.25,
        True,
    )
    assert spec.text.norm.placement == "parallel"
    assert spec.text.lm_head_bias
    # Rotating halves instead of pairs, every attention disagrees with HF.
    halves = dataclasses.replace(rope, interleaved=False)
    text = dataclasses.replace(spec.text, rope=(("full_attention", halves),))
    assert _checked_against(analysis, text)


@pytest.mark.parametrize(
    ("model_type", "inside", "embedding_norm"),
    [
        ("bloom", ("self_attn", "mlp"), True),  # both blocks take the residual; embeddings normed
        ("mpt", ("mlp",), False),  # only MptMLP takes it; its block is called ffn
    ],
)
def test_alibi_models(tmp_path, model_type, inside, embedding_norm):
    """BLOOM and MPT: ALiBi (found by trial, no config flag), blocks that add the residual
    themselves (still pre-norm), an activation module no config key names."""
    analysis = analyse(load_source(str(default_config_dir(model_type, tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert text.attention.alibi
    assert text.blocks_add_residual == inside
    assert text.embedding_norm is embedding_norm
    assert text.norm.placement == "pre"
    assert text.mlp.activation_key is None
    assert text.mlp.activation == ("gelu_pytorch_tanh" if model_type == "bloom" else "gelu")
    # Without the ALiBi biases every attention disagrees with HF.
    plain = dataclasses.replace(text.attention, alibi=False)
    assert _checked_against(analysis, dataclasses.replace(text, attention=plain))


def test_ministral3_position_dependent_query_scale(tmp_path):
    """q x (1 + beta log(1 + floor(position / original))): the tiny config's span of 4 puts the
    spec check's positions (and the parity prompt) where the scale is not 1."""
    analysis = analyse(load_source(str(default_config_dir("ministral3", tmp_path))))
    spec = analysis.spec
    assert spec.unresolved == ()
    assert spec.text.attention.position_scale
    assert analysis.tiny.config["rope_parameters"]["original_max_position_embeddings"] == 4
    unscaled = dataclasses.replace(spec.text.attention, position_scale=False)
    assert _checked_against(analysis, dataclasses.replace(spec.text, attention=unscaled))


def test_nanochat_reversed_rope_and_reused_final_norm(tmp_path):
    """NanoChat's rotate_half flips the signs, and its one weight-free norm also normalises the
    embeddings: both found by trial, each kept only because the tiny model then matches HF."""
    analysis = analyse(load_source(str(default_config_dir("nanochat", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert text.rope_for("full_attention").reversed
    assert text.embedding_norm and not text.norm.weight
    assert text.attention.qk_norm == "per_head"
    forward = dataclasses.replace(text.rope_for("full_attention"), reversed=False)
    assert _checked_against(
        analysis, dataclasses.replace(text, rope=(("full_attention", forward),))
    )
    assert _checked_against(analysis, dataclasses.replace(text, embedding_norm=False))


def test_hunyuan_qk_norms_after_rope(tmp_path):
    """HunYuan normalises q and k (learned weights) after RoPE, where the order matters."""
    folder = default_config_dir("hunyuan_v1_dense", tmp_path, head_dim=128)
    analysis = analyse(load_source(str(folder)))
    attention = analysis.spec.text.attention
    assert analysis.spec.unresolved == ()
    assert (attention.qk_norm, attention.qk_norm_after_rope) == ("per_head", True)
    before = dataclasses.replace(attention, qk_norm_after_rope=False)
    assert _checked_against(analysis, dataclasses.replace(analysis.spec.text, attention=before))


def test_codegen_grouped_qkv_on_eight_tiny_heads(tmp_path):
    """CodeGen splits its heads into 4 groups (6 tiny heads do not divide, so the tiny model
    gets 8), and each group's fused rows hold its heads' q, v and k; RoPE on pairs."""
    analysis = analyse(load_source(str(default_config_dir("codegen", tmp_path))))
    attention = analysis.spec.text.attention
    assert analysis.spec.unresolved == ()
    assert analysis.tiny.config["num_attention_heads"] == 8
    assert (attention.fused_qkv_layout, attention.fused_qkv_groups) == ("grouped", 4)
    assert analysis.spec.text.rope_for("full_attention").interleaved
    assert analysis.spec.evidence_for("text.rope.interleaved")  # cited, though tried together
    two = dataclasses.replace(attention, fused_qkv_groups=2)
    assert _checked_against(analysis, dataclasses.replace(analysis.spec.text, attention=two))


def test_apertus_learned_xielu_activation(tmp_path):
    """Apertus' xIELU learns alpha_p and alpha_n in every layer: they are the activation's, not
    parameters without a role, and the spec check computes it from them."""
    analysis = analyse(load_source(str(default_config_dir("apertus", tmp_path))))
    mlp = analysis.spec.text.mlp
    assert analysis.spec.unresolved == ()
    assert (mlp.kind, mlp.activation, mlp.learned_activation) == ("plain", "xielu", "act_fn")
    fixed = dataclasses.replace(mlp, learned_activation=None)  # xIELU at its initial values
    assert _checked_against(analysis, dataclasses.replace(analysis.spec.text, mlp=fixed))


def test_openai_gpt_norms_after_each_residual_add_and_no_final_norm(tmp_path):
    """n = ln_1(x + attn(x)), ln_2(n + mlp(n)): the norms read residual sums (told by values),
    and the last layer feeds the head with no norm between."""
    analysis = analyse(load_source(str(default_config_dir("openai-gpt", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert text.norm.placement == "post_residual" and not text.final_norm
    assert dict(text.norm.names) == {"attn_add": "ln_1", "mlp_add": "ln_2"}
    swapped = dataclasses.replace(text.norm, names=(("attn_add", "ln_2"), ("mlp_add", "ln_1")))
    assert _checked_against(analysis, dataclasses.replace(text, norm=swapped))


def test_ctrl_names_positions_buffer_and_embeddings_scaled_after_the_module(tmp_path):
    """CTRL: q, k, v as Wq, Wk, Wv; sinusoidal positions kept as a buffer with frequencies
    10000 ** (-i / (hidden / 2)); the embeddings x sqrt(hidden) in the decoder's forward."""
    analysis = analyse(load_source(str(default_config_dir("ctrl", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert {r: text.name_of(r) for r in ("q_proj", "k_proj", "v_proj", "o_proj")} == {
        "q_proj": "Wq",
        "k_proj": "Wk",
        "v_proj": "Wv",
        "o_proj": "dense",
    }
    assert (text.positions.kind, text.positions.divisor) == ("sinusoidal", "half")
    assert text.embedding_scale == "sqrt_hidden" and text.mlp.width_expr == "config.dff"
    xglm = dataclasses.replace(text.positions, divisor="half-1")
    assert _checked_against(analysis, dataclasses.replace(text, positions=xglm))
    assert _checked_against(analysis, dataclasses.replace(text, embedding_scale="none"))


def test_a_parameter_of_the_mlp_itself_is_not_taken_for_an_activation(tmp_path):
    """JetMoE's MoE block holds a bare bias beside its modules: the learned-activation search
    looks at child modules only (it raised AttributeError on the bias)."""
    analysis = analyse(load_source(str(default_config_dir("jetmoe", tmp_path))))
    assert analysis.spec.text.mlp.learned_activation is None


def test_gpt_neox_japanese_output_bias_in_the_last_layer_and_width_from_the_source(tmp_path):
    """dense_bias exists in the last layer only and is added beside the attention's output; the
    MLP width is int(hidden_size * intermediate_multiple_size), read from the source."""
    analysis = analyse(load_source(str(default_config_dir("gpt_neox_japanese", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert text.attention.last_layer_o_bias == "dense_bias" and not text.attention.o_bias
    assert text.mlp.width_expr == "int(config.hidden_size * config.intermediate_multiple_size)"
    assert text.mlp.intermediate_size == 4 * 2560
    unbiased = dataclasses.replace(text.attention, last_layer_o_bias=None)
    assert _checked_against(analysis, dataclasses.replace(text, attention=unbiased))


def test_granite_moe_experts_saved_fused_under_other_names(tmp_path):
    """Granite MoE saves its experts 3-D, as in memory, as input_linear / output_linear and its
    router as router.layer: found by value, and the spec check runs its block_sparse_moe."""
    analysis = analyse(load_source(str(default_config_dir("granitemoe", tmp_path))))
    moe = analysis.spec.text.moe
    assert analysis.spec.unresolved == ()
    assert moe.block_name == "block_sparse_moe"
    assert dict(moe.fused_on_disk) == {
        "gate_up": "block_sparse_moe.input_linear.weight",
        "down": "block_sparse_moe.output_linear.weight",
    }
    assert moe.router_on_disk == "block_sparse_moe.router.layer.weight"


def test_ernie_moe_layers_by_interval_and_its_correction_bias_names(tmp_path):
    """Ernie 4.5: layer i is MoE iff (i + 1) % moe_layer_interval == 0 within
    [moe_layer_start_index, moe_layer_end_index]; its choice bias sits in gate.moe_statics in
    memory and in moe_statics on disk, shaped [1, experts]."""
    analysis = analyse(load_source(str(default_config_dir("ernie4_5_moe", tmp_path))))
    moe = analysis.spec.text.moe
    assert analysis.spec.unresolved == ()
    assert moe.dense_rule == "moe_layer_interval" and analysis.spec.text.mlp_kinds[:2] == (
        "dense",
        "moe",
    )
    assert moe.correction_names == (
        "mlp.moe_statics.e_score_correction_bias",
        "mlp.gate.moe_statics.e_score_correction_bias",
    )


def test_the_interval_rule_reproduces_its_layers() -> None:
    from onboard.analysis.decoder import dense_rule

    config = SimpleNamespace(moe_layer_interval=2, moe_layer_start_index=1, moe_layer_end_index=4)
    kinds = ["dense", "moe", "dense", "moe", "dense", "dense"]
    assert dense_rule(config, kinds) == "moe_layer_interval"
    assert dense_rule(config, ["dense", "moe", "dense", "moe", "dense", "moe"]) is None


def test_a_per_layer_mlp_list_or_a_dense_count_reproduces_its_layers() -> None:
    """The backlog's top mobius blocker (6 types): transformers' mlp_layer_types ("dense" /
    "sparse": GLM-4 MoE Lite, MiMo-V2-Flash, Laguna, HY-V3) and AFMoE's num_dense_layers."""
    from onboard.analysis.decoder import dense_rule

    kinds = ["dense", "moe", "dense", "moe"]
    listed = SimpleNamespace(mlp_layer_types=["dense", "sparse", "dense", "sparse"])
    assert dense_rule(listed, kinds) == "mlp_layer_types"
    assert dense_rule(listed, ["dense", "moe", "moe", "moe"]) is None
    counted = SimpleNamespace(num_dense_layers=2)
    assert dense_rule(counted, ["dense", "dense", "moe", "moe"]) == "num_dense_layers"
    assert dense_rule(counted, kinds) is None


def test_cross_attention_is_refused_as_one_finding(tmp_path):
    """TrOCR's layers cross-attend to encoder states (encoder_attn and its norm): one finding
    that says what it is, not one "parameter with no role" per tensor."""
    analysis = analyse(load_source(str(default_config_dir("trocr", tmp_path))))
    found = [f"{d.what} at {d.where}" for d in analysis.spec.unresolved]
    assert found == [
        "cross-attention to encoder states (the decoder of an encoder-decoder model: a "
        "decoder-only graph would leave these weights unused) at model.layers.*.encoder_attn "
        "(TrOCRAttention)"
    ]


class _BatchRouter(torch.nn.Module):  # AFMoE's router unpacks (batch, tokens, hidden)
    def forward(self, hidden_states):
        _, tokens, _ = hidden_states.shape
        return hidden_states.reshape(tokens, -1)


def test_a_router_that_wants_a_batch_gets_one() -> None:
    from onboard.analysis.router import _call_router

    hidden = torch.randn(5, 8)
    assert torch.equal(_call_router(_BatchRouter(), hidden, []), hidden)


def test_modernbert_decoder_embeddings_block_first_layer_and_prediction_head(tmp_path):
    """ModernBERT decoder: model.embeddings holds the token table and its norm; layer 0's
    attn_norm is an identity (the layers are read on layer 1); Wi is gate and up fused; a dense,
    activation and norm transform the final hidden states before the head."""
    analysis = analyse(load_source(str(default_config_dir("modernbert-decoder", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert text.embedding_norm and text.first_layer_without == ("attn_in",)
    assert (text.mlp.kind, text.mlp.projections) == ("fused_gate_up", ("Wi", "Wo"))
    transform = text.head_transform
    assert (transform.activation, transform.activation_key) == ("gelu", "classifier_activation")
    assert transform.bias_key == "classifier_bias"
    assert _checked_against(analysis, dataclasses.replace(text, head_transform=None))
    assert _checked_against(analysis, dataclasses.replace(text, first_layer_without=()))


def test_doge_dynamic_mask_and_residual_gates(tmp_path):
    """Doge: A and dt_proj make each key's mask entry from the values, the cut to the highest
    keep_window_size keys per row runs on the tiny model (5 < 9 tokens), and two learned
    vectors scale the residual at each add. The spec check rejects each reading left out or
    swapped."""
    analysis = analyse(load_source(str(default_config_dir("doge", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    mask = text.attention.dynamic_mask
    assert (mask.decay, mask.proj, mask.keep_window_key) == ("A", "dt_proj", "keep_window_size")
    assert analysis.tiny.config["keep_window_size"] < 9
    assert text.residual_gates == (("attn", "input_residual"), ("mlp", "post_attention_residual"))
    uncut = dataclasses.replace(mask, keep_window_key=None)
    for attention in (
        dataclasses.replace(text.attention, dynamic_mask=None),
        dataclasses.replace(text.attention, dynamic_mask=uncut),
    ):
        assert _checked_against(analysis, dataclasses.replace(text, attention=attention))
    swapped = (("attn", "post_attention_residual"), ("mlp", "input_residual"))
    assert _checked_against(analysis, dataclasses.replace(text, residual_gates=swapped))
    assert _checked_against(analysis, dataclasses.replace(text, residual_gates=()))


def test_diffllama_differential_attention(tmp_path):
    """DiffLlama: four lambda vectors, a pair norm with nothing to learn and lambda_init from
    the source's formula over the layer index; a wrong formula or no reading fails the check."""
    analysis = analyse(load_source(str(default_config_dir("diffllama", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    differential = text.attention.differential
    assert differential.lambda_init == "0.8 - 0.6 * math.exp(-0.3 * layer_idx)"
    assert (differential.norm, differential.eps_key) == ("groupnorm", "rms_norm_eps")
    constant = dataclasses.replace(differential, lambda_init="0.8")
    for attention in (
        dataclasses.replace(text.attention, differential=None),
        dataclasses.replace(text.attention, differential=constant),
    ):
        assert _checked_against(analysis, dataclasses.replace(text, attention=attention))


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "layer_idx.__class__", "open('x')", "1 +"],
)
def test_a_per_layer_formula_is_vetted_before_it_runs(expression) -> None:
    from onboard.analysis.variants import evaluate

    with pytest.raises(ValueError, match="not a formula"):
        evaluate(expression, 1)
    assert evaluate("0.8 - 0.6 * math.exp(-0.3 * layer_idx)", 0) == pytest.approx(0.2)


def test_phimoe_sparsemixer_router(tmp_path):
    """PhiMoE routes with sparsemixer: two experts, each weighted by a softmax over the logits
    within a relative 2 x router_jitter_noise of it. The tiny margin (0.3) makes tokens mix
    experts, so a router without the margin, or with another, fails the check."""
    from onboard.tiny import TINY_ROUTER_MARGIN

    analysis = analyse(load_source(str(default_config_dir("phimoe", tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    router = text.moe.router
    assert (router.order, router.jitter_key) == ("sparsemixer", "router_jitter_noise")
    assert router.jitter_eps == TINY_ROUTER_MARGIN
    for eps in (0.0, 0.05):
        wrong = dataclasses.replace(router, jitter_eps=eps)
        moe = dataclasses.replace(text.moe, router=wrong)
        assert _checked_against(analysis, dataclasses.replace(text, moe=moe))


def test_sparsemixer_weights_within_the_margin() -> None:
    from onboard.analysis.router import sparsemixer

    logits = torch.tensor([[2.0, 1.9, 0.0, -3.0]])
    weights, indices = sparsemixer(logits, 0.05)  # 1.9 is within 10% of 2.0; 0.0 is not
    assert indices.tolist() == [[0, 1]]
    expected_first = torch.softmax(torch.tensor([2.0, 1.9]), dim=0)[0]
    assert torch.allclose(weights[0, 0], expected_first)
    assert weights[0, 1].item() == pytest.approx(1.0)  # alone within the margin of 1.9
