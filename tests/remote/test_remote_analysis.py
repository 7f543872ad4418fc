"""Remote code is analysed from its text alone: the features equal each fixture's FEATURES.md."""

from __future__ import annotations

import sys

import pytest

from onboard.analysis import analyse
from onboard.analysis.features import feature_values, features
from onboard.errors import InvalidConfigError
from onboard.source import load_source
from tests.remote.conftest import REMOTE

# The hand-written truth of tests/fixtures/remote/*/FEATURES.md, in the catalogue's terms.
PLAIN = {
    "attention.kind": "standard",
    "attention.scale": "head_dim",
    "attention.softcap": False,
    "rope.type": "default",
    "rope.per_layer_theta": False,
    "rope.interleaved": False,
    "moe.router": "none",
}
TRUTH = {
    "ember-tiny": {
        **PLAIN,
        "attention.qk_norm": "per_head",  # 3, 4: per-head RMSNorm before RoPE
        "attention.qkv_bias": True,  # 1
        "attention.o_bias": False,  # 2
        "attention.sliding_window": "none",  # 7
        "mlp.kind": "gated",  # 14
        "mlp.activation": "gelu_pytorch_tanh",  # 15
        "mlp.bias": False,  # 14
        "norm.kind": "rms",  # 11
        "norm.placement": "sandwich",  # 12
        "embedding.scale": "sqrt_hidden",  # 16
        "logits.final_softcap": True,  # 18
        "rope.partial": True,  # 9
        "embeddings.tied": True,  # 17
    },
    "quill-tiny": {
        **PLAIN,
        "attention.qk_norm": "none",  # 10
        "attention.qkv_bias": True,  # 9
        "attention.o_bias": True,  # 9
        "attention.sliding_window": "uniform",  # 12
        "mlp.kind": "plain",  # 6
        "mlp.activation": "relu2",  # 8
        "mlp.bias": True,  # 7
        "norm.kind": "layer",  # 1
        "norm.placement": "post",  # 2, 3, 4
        "embedding.scale": "none",  # 15
        "logits.final_softcap": False,  # 16
        "rope.partial": False,  # 14
        "embeddings.tied": False,  # 16
    },
    "kiln-tiny": {
        **PLAIN,
        "attention.qk_norm": "none",  # 11
        "attention.fused_qkv": "concatenated",  # 8
        "attention.qkv_bias": False,  # 8
        "attention.o_bias": False,  # 9
        "attention.sliding_window": "none",  # 11
        "mlp.kind": "gated",  # 13
        "mlp.activation": "silu",  # 14
        "mlp.bias": False,  # 13
        "norm.kind": "rms",  # 5
        "norm.placement": "pre",  # 6
        "norm.final": True,  # 7
        "embedding.scale": "none",  # 15
        "logits.final_softcap": False,  # 16
        "logits.bias": False,  # 16
        "positions": "alibi",  # 12
        "rope.type": "none",  # 12
        "rope.partial": False,  # 12
        "embeddings.tied": False,  # 16
    },
    "internlm2-tiny": {
        **PLAIN,
        "attention.qk_norm": "none",  # 6
        "attention.fused_qkv": "kv_grouped",  # 4
        "attention.qkv_bias": False,  # 4 (bias off in the tiny config)
        "attention.o_bias": False,  # 5
        "attention.sliding_window": "none",
        "mlp.kind": "gated",  # 8
        "mlp.activation": "silu",  # 8
        "mlp.bias": False,  # 8
        "norm.kind": "rms",  # 9
        "norm.placement": "pre",  # 3
        "norm.final": True,  # 1
        "embedding.scale": "none",
        "logits.final_softcap": False,
        "positions": "rope",  # 7
        "rope.partial": False,  # 7
        "embeddings.tied": False,
    },
}


MODELS = ("ember", "quill", "kiln", "internlm2")


@pytest.fixture(scope="module")
def analyses():
    before = set(sys.modules)
    found = {name: analyse(load_source(str(REMOTE / name))) for name in TRUTH}
    remote = {f"{kind}_{model}" for kind in ("modeling", "configuration") for model in MODELS}
    imported = {
        m
        for m in set(sys.modules) - before
        if m.rpartition(".")[2] in remote
        or m.startswith(("onboard_remote_", "transformers_modules"))
    }
    assert not imported, f"analysis imported remote code: {imported}"
    return found


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_features_equal_the_hand_written_list(analyses, name: str) -> None:
    found = feature_values(analyses[name].spec)
    assert {k: found[k] for k in TRUTH[name]} == TRUTH[name]
    assert analyses[name].spec.unresolved == ()


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_read_values_are_cited_and_marked_read_not_measured(analyses, name: str) -> None:
    spec = analyses[name].spec
    for feature in features(spec):
        if feature.name.startswith("moe."):
            continue
        assert feature.evidence, feature.name
        assert feature.confidence == 0.8
    assert analyses[name].probe is None
    assert [n for n, _ in spec.source.remote_files] == [
        f"configuration_{name.split('-')[0]}.py",
        f"modeling_{name.split('-')[0]}.py",
    ]


def test_values_read_from_the_config_and_the_source(analyses) -> None:
    ember = analyses["ember-tiny"].spec.text
    ((_, rope),) = ember.rope
    assert (rope.theta, rope.partial_rotary_factor) == (20000.0, 0.5)
    assert ember.final_logit_softcap == 20.0 and ember.norm.eps == 1e-6
    assert ember.attention.q_bias and not ember.attention.o_bias
    quill = analyses["quill-tiny"].spec.text
    assert quill.sliding_window == 4 and set(quill.layer_types) == {"sliding_attention"}
    assert dict(quill.norm.names) == {
        "attn_out": "post_attention_layernorm",
        "mlp_out": "post_feedforward_layernorm",
    }
    assert quill.mlp.projections == ("up_proj", "down_proj") and quill.mlp.bias_key == "mlp_bias"


def test_kiln_layout_and_names_are_the_checkpoints(analyses) -> None:
    """FEATURES.md 1-4, 8, 10: transformer.wte/h/ln_f renamed onto the Llama layout, the blocks'
    own norm names, W_pack as one fused projection, multi-head, ALiBi instead of RoPE."""
    spec = analyses["kiln-tiny"].spec
    assert spec.weights.renames == (
        ("transformer.wte.", "model.embed_tokens."),
        ("transformer.h.", "model.layers."),
        ("transformer.ln_f.", "model.norm."),
    )
    text = spec.text
    assert dict(text.norm.names) == {"attn_in": "ln_1", "mlp_in": "ln_2"}
    assert text.names == ()  # self_attn, o_proj, mlp and gate/up/down_proj are Llama's names
    attention = text.attention
    assert (attention.fused_qkv, attention.fused_qkv_layout) == ("W_pack", "concatenated")
    assert (attention.num_heads, attention.num_kv_heads, attention.head_dim) == (4, 4, 16)
    assert attention.alibi and attention.scale == 16**-0.5
    assert [(kind, rope.rope_type) for kind, rope in text.rope] == [("full_attention", None)]
    assert text.mlp.projections == ("gate_proj", "up_proj", "down_proj")
    cited = {path: {e.where for e in evidence} for path, evidence in spec.evidence}
    assert {"modeling_kiln.py:89", "modeling_kiln.py:95"} <= cited["text.attention.fused_qkv"]
    assert "modeling_kiln.py:24" in cited["text.attention.alibi"]
    assert {"modeling_kiln.py:163", "modeling_kiln.py:152"} <= cited["text.layout.dispatch"]


def test_internlm2_names_and_grouped_wqkv_are_read(analyses) -> None:
    """Its FEATURES.md 1, 2, 4, 5, 7, 8: InternLM2's names kept through renames, wqkv's rows
    per key/value head, RoPE theta 1e6 from rope_theta with rope_scaling null."""
    spec = analyses["internlm2-tiny"].spec
    assert spec.weights.renames == (
        ("model.tok_embeddings.", "model.embed_tokens."),
        (".attention.", ".self_attn."),
        (".feed_forward.", ".mlp."),
        ("output.", "lm_head."),
    )
    text = spec.text
    assert dict(text.names) == {"o_proj": "wo"}
    assert dict(text.norm.names) == {"attn_in": "attention_norm", "mlp_in": "ffn_norm"}
    assert text.mlp.projections == ("w1", "w3", "w2")
    attention = text.attention
    assert (attention.fused_qkv, attention.num_heads, attention.num_kv_heads) == ("wqkv", 4, 2)
    ((_, rope),) = text.rope
    assert (rope.rope_type, rope.theta) == ("default", 1e6)
    cited = {path: {e.where for e in evidence} for path, evidence in spec.evidence}
    assert {"modeling_internlm2.py:135", "modeling_internlm2.py:171"} <= cited[
        "text.attention.fused_qkv"
    ]
    assert "modeling_internlm2.py:214" in cited["text.layout.dispatch"]


def test_evidence_cites_the_lines_features_md_cites(analyses) -> None:
    cited = {
        path: {e.where for e in evidence} for path, evidence in analyses["ember-tiny"].spec.evidence
    }
    assert {"modeling_ember.py:205", "modeling_ember.py:206"} <= cited["text.attention.qk_norm"]
    assert "modeling_ember.py:180" in cited["text.attention.q_bias"]
    assert "modeling_ember.py:189" in cited["text.attention.o_bias"]
    assert "modeling_ember.py:314" in cited["text.embedding_scale"]
    assert "modeling_ember.py:422" in cited["text.final_logit_softcap"]


def test_a_qk_norm_after_rope_is_reported_not_generated(checkpoint) -> None:
    folder = checkpoint("ember-tiny")
    modeling = folder / "modeling_ember.py"
    lines = modeling.read_text().splitlines(keepends=True)
    # Move RoPE before the q/k norms (FEATURES.md 4 says they come first).
    text = "".join(lines)
    text = text.replace(
        "query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)",
        "query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
    ).replace(
        "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)",
        "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)\n"
        "        query_states = self.q_norm(query_states)",
    )
    modeling.write_text(text)
    spec = analyse(load_source(str(folder))).spec
    assert any("after RoPE" in d.what for d in spec.unresolved)


def test_a_modeling_file_with_a_syntax_error_is_one_clear_error(checkpoint) -> None:
    folder = checkpoint("quill-tiny")
    modeling = folder / "modeling_quill.py"
    modeling.write_text(modeling.read_text() + "\ndef broken(:\n")
    with pytest.raises(InvalidConfigError, match=r"modeling_quill\.py cannot be read"):
        analyse(load_source(str(folder)))


@pytest.mark.parametrize("name", ["kiln-tiny", "internlm2-tiny"])
def test_the_text_reading_equals_the_trusted_probe(analyses, checkpoint, name: str) -> None:
    """The same checkpoint built from its own classes and probed (--trust-remote-code) gives
    the same catalogue features, weight renames and names as the reading of its text."""
    from onboard.remote_code import register_remote_classes

    source = load_source(str(checkpoint(name)))
    register_remote_classes(source.config, source.remote_files)
    trusted = analyse(source, run_remote_code=True).spec
    static = analyses[name].spec
    assert feature_values(static) == feature_values(trusted)
    assert static.weights.renames == trusted.weights.renames
    assert static.text.names == trusted.text.names
    assert static.text.norm.names == trusted.text.norm.names
    assert static.text.mlp.projections == trusted.text.mlp.projections
