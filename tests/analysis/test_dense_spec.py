from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.errors import InvalidConfigError, UnsupportedFeatureError
from onboard.source import load_source
from onboard.spec import ArchitectureSpec
from tests.hub_cache import FIXTURES, fixture_config


def _spec(repo_id: str) -> ArchitectureSpec:
    return analyse(load_source(str(fixture_config(repo_id)))).spec


# (repo, qk_norm, qkv bias, o bias, norm offset, placement, layer kinds, window, embed, scale key)
EXPECTED = [
    (
        "Qwen/Qwen3-0.6B",
        "per_head",
        False,
        False,
        0.0,
        "pre",
        {"full_attention"},
        None,
        "none",
        None,
    ),
    (
        "meta-llama/Llama-3.2-1B",
        "none",
        False,
        False,
        0.0,
        "pre",
        {"full_attention"},
        None,
        "none",
        None,
    ),
    (
        "mistralai/Mistral-7B-v0.1",
        "none",
        False,
        False,
        0.0,
        "pre",
        {"sliding_attention"},
        4096,
        "none",
        None,
    ),
    ("Qwen/Qwen2.5-0.5B", "none", True, False, 0.0, "pre", {"full_attention"}, None, "none", None),
    (
        "google/gemma-3-1b-it",
        "per_head",
        False,
        False,
        1.0,
        "sandwich",
        {"full_attention", "sliding_attention"},
        512,
        "sqrt_hidden",
        "query_pre_attn_scalar",
    ),
    (
        "allenai/OLMo-2-0425-1B",
        "full_width",
        False,
        False,
        0.0,
        "post",
        {"full_attention"},
        None,
        "none",
        None,
    ),
]


@pytest.mark.parametrize(
    (
        "repo_id",
        "qk_norm",
        "qkv_bias",
        "o_bias",
        "offset",
        "placement",
        "kinds",
        "window",
        "embed",
        "scale_key",
    ),
    EXPECTED,
)
def test_dense_features(
    repo_id, qk_norm, qkv_bias, o_bias, offset, placement, kinds, window, embed, scale_key
) -> None:
    spec = _spec(repo_id)
    text = spec.text
    assert spec.kind == "dense"
    assert text.attention.qk_norm == qk_norm
    assert (text.attention.q_bias, text.attention.k_bias, text.attention.v_bias) == (qkv_bias,) * 3
    assert text.attention.o_bias is o_bias
    assert text.norm.weight_offset == offset
    assert text.norm.placement == placement
    assert set(text.layer_types) == kinds
    assert text.sliding_window == window
    assert text.embedding_scale == embed
    assert text.attention.scale_key == scale_key
    assert text.mlp.kind == "gated"
    assert not spec.unresolved


def test_real_sizes_and_rope_are_read_from_the_real_config() -> None:
    text = _spec("meta-llama/Llama-3.2-1B").text
    assert (text.hidden_size, text.num_layers, text.vocab_size) == (2048, 16, 128256)
    assert (text.attention.num_heads, text.attention.num_kv_heads, text.attention.head_dim) == (
        32,
        8,
        64,
    )
    rope = text.rope_for("full_attention")
    assert rope.rope_type == "llama3" and rope.theta == 500000.0
    assert dict(rope.scaling)["factor"] == 32.0
    assert text.tie_word_embeddings is True


def test_gemma3_per_layer_rope_and_scale() -> None:
    text = _spec("google/gemma-3-1b-it").text
    assert text.rope_for("sliding_attention").theta == 10000.0
    assert text.rope_for("full_attention").theta == 1000000.0
    assert text.attention.scale == pytest.approx(256**-0.5)
    assert text.layer_types.count("full_attention") == 4  # every 6th of 26 layers
    assert text.mlp.activation == "gelu_pytorch_tanh"
    assert text.mlp.activation_key == "hidden_activation"


def test_evidence_points_at_hf_source_lines() -> None:
    spec = _spec("Qwen/Qwen3-0.6B")
    qk = spec.evidence_for("text.attention.qk_norm")
    assert any(e.kind == "source" and e.where.startswith("modeling_qwen3.py:") for e in qk)
    assert any(e.kind == "probe" and "q_norm.weight" in e.where for e in qk)
    bias = spec.evidence_for("text.attention.q_bias")
    assert any("bias=config.attention_bias" in e.detail for e in bias)
    assert spec.text.attention.bias_key("q") == "attention_bias"
    qwen2 = _spec("Qwen/Qwen2.5-0.5B").text.attention
    assert qwen2.bias_key("q") is None  # Qwen2 hard-codes bias=True


def test_spec_json_round_trip() -> None:
    for repo_id, *_ in EXPECTED:
        spec = _spec(repo_id)
        assert ArchitectureSpec.from_json(spec.to_json()) == spec


def test_on_disk_tensor_layout_recorded() -> None:
    spec = _spec("Qwen/Qwen3-0.6B")
    names = [n for n, _ in spec.weights.tensors]
    assert "model.layers.0.self_attn.q_norm.weight" in names
    assert "lm_head.weight" not in names  # tied: not saved
    assert spec.weights.tied_keys == ("lm_head.weight",)


def _granite_like(tmp_path) -> Path:
    config = json.loads(fixture_config("meta-llama/Llama-3.2-1B").read_text())
    config.update(
        model_type="granite",
        embedding_multiplier=12.0,
        residual_multiplier=0.22,
        attention_multiplier=0.015,
        logits_scaling=8.0,
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_config_multipliers_are_placed_by_trying_their_known_uses(tmp_path) -> None:
    """Granite divides logits by logits_scaling (HyperCLOVAX multiplies): only the combination
    with which the tiny model matches HF is kept, with the HF lines that apply each one."""
    spec = analyse(load_source(str(_granite_like(tmp_path)))).spec
    assert spec.unresolved == ()
    assert {(s.site, s.key, s.form) for s in spec.text.scales} == {
        ("embedding", "embedding_multiplier", "times"),
        ("residual", "residual_multiplier", "times"),
        ("logits", "logits_scaling", "divided_by"),
    }
    assert (spec.text.attention.scale_key, spec.text.attention.scale) == (
        "attention_multiplier",
        0.015,
    )
    logits_lines = [e.where for e in spec.evidence_for("text.scales.logits")]
    assert any(w.startswith("modeling_granite.py:") for w in logits_lines), logits_lines


def test_unexplained_multiplier_is_unresolved_not_dropped(tmp_path, monkeypatch) -> None:
    """A multiplier used in a way no known use reproduces is a delta at the HF line, not
    silently dropped (here onboard is made to forget that Granite divides the logits)."""
    from onboard.analysis import whole_model

    candidates = dict(whole_model.SCALE_CANDIDATES, logits_scaling=(("logits", "times"), None))
    monkeypatch.setattr(whole_model, "SCALE_CANDIDATES", candidates)
    spec = analyse(load_source(str(_granite_like(tmp_path)))).spec
    found = {d.what: d.where for d in spec.unresolved}
    what = "config multiplier logits_scaling: no known use of it reproduces HF"
    assert what in found
    assert found[what].startswith("modeling_granite.py:")
    assert spec.text.scales == ()


def test_hybrid_whose_pattern_cannot_shrink_is_refused_in_one_line(tmp_path) -> None:
    # Jamba's layer kinds are periods and offsets. Attention at the odd layers and MoE at 2 and 5
    # of 6: kept attention first, as real layers 1, 0, 2, 5, no period marks the last two as MoE.
    config = json.loads((FIXTURES / "ai21labs/AI21-Jamba-1.5-Mini/config.json").read_text())
    config.update(num_hidden_layers=6, attn_layer_period=2, attn_layer_offset=1)
    config.update(expert_layer_period=3, expert_layer_offset=2)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(UnsupportedFeatureError, match=r"no expert_layer_period and"):
        analyse(load_source(str(path)))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("hidden_size", -4, "hidden_size must be a positive integer"),
        ("num_hidden_layers", 10**9, "num_hidden_layers must be a positive integer"),
        ("vocab_size", "many", "vocab_size must be a positive integer"),
        ("num_key_value_heads", 3, "not a multiple"),
    ],
)
def test_hostile_sizes(tmp_path, field, value, message) -> None:
    config = json.loads(fixture_config("Qwen/Qwen3-0.6B").read_text())
    config[field] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InvalidConfigError, match=message):
        analyse(load_source(str(path)))


def test_clipped_activations_are_reported(tmp_path) -> None:
    """The tiny model never reaches a real clip value, so only the config can say it."""
    from tests.new_types import default_config_dir

    folder = default_config_dir("olmo", tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["clip_qkv"] = 8.0
    (folder / "config.json").write_text(json.dumps(config))
    spec = analyse(load_source(str(folder))).spec
    delta = next(d for d in spec.unresolved if "clip_qkv" in d.what)
    assert delta.where.startswith("modeling_olmo.py:")
