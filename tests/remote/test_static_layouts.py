"""The static reader on remote code as it is really written (issue 17): roles found by
structure, class-table dispatch, fused q/k/v projections and ALiBi, read or refused with what
was found. Synthetic sources only (text, never run): kiln-tiny's modeling file edited one idiom
at a time, and an InternLM2-style file written here."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from onboard.analysis.static import StaticReader, StaticResult
from onboard.source import SourceFile
from tests.remote.conftest import REMOTE

KILN = (REMOTE / "kiln-tiny" / "modeling_kiln.py").read_text()
KILN_CONFIG = json.loads((REMOTE / "kiln-tiny" / "config.json").read_text())


def read(text: str, config: dict, causal_lm: str, name: str = "modeling_kiln.py") -> StaticResult:
    file = SourceFile(name, Path(name), "0" * 64, text)
    return StaticReader([file], config, causal_lm).read()


def kiln(*edits: tuple[str, str]) -> StaticResult:
    text = KILN
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return read(text, KILN_CONFIG, "KilnForCausalLM")


def refusals(result: StaticResult) -> str:
    return "\n".join(f"{d.what} @{d.where} {d.detail}" for d in result.deltas)


def test_kiln_is_read_whole() -> None:
    result = kiln()
    assert result.deltas == ()
    roles = dict(result.roles)
    assert (roles["model"], roles["decoder_layer"]) == ("KilnModel", "KilnBlock")
    assert (roles["attention"], roles["mlp"]) == ("KilnAttention", "KilnMLP")


# -- class-table dispatch ------------------------------------------------------------------------

PLAIN_ATTENTION = """
class PlainAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=True)
        self.k_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=True)
        self.v_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=True)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask=None, past_key_value=None, **kwargs):
        q = self.q_proj(hidden_states)
        k = self.k_proj(hidden_states)
        v = self.v_proj(hidden_states)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim) + attention_mask
        return self.o_proj(torch.matmul(nn.functional.softmax(w, dim=-1), v)), None


ATTENTION_CLASSES = {"""


def test_the_tables_eager_entry_is_the_class_read() -> None:
    """Another class under "eager" changes what is read: separate, biased q/k/v."""
    result = kiln(
        ("ATTENTION_CLASSES = {", PLAIN_ATTENTION),
        ('"eager": KilnAttention,', '"eager": PlainAttention,'),
    )
    assert result.deltas == ()
    assert dict(result.roles)["attention"] == "PlainAttention"
    attention = result.text.attention
    assert attention.fused_qkv is None and attention.q_bias and not attention.o_bias


def test_a_table_without_eager_reads_the_class_the_others_derive_from() -> None:
    result = kiln(('"eager": KilnAttention,', '"plain": KilnAttention,'))
    assert dict(result.roles)["attention"] == "KilnAttention"
    assert result.text.attention.fused_qkv == "W_pack"


def test_a_table_keyed_by_something_else_is_refused_with_what_was_found() -> None:
    result = kiln(
        (
            "ATTENTION_CLASSES[config._attn_implementation](",
            "ATTENTION_CLASSES[config.attention_kind](",
        )
    )
    assert result.text is None
    message = refusals(result)
    assert "decoder layer KilnBlock: found children ln_1 (KilnRMSNorm)" in message
    assert "self_attn (ATTENTION_CLASSES[...])" in message and "mlp (KilnMLP)" in message
    assert "0 attentions" in message
    assert "keyed by something else than the attention kind" in message


def test_an_eager_entry_from_elsewhere_is_refused_naming_it() -> None:
    result = kiln(('"eager": KilnAttention,', '"eager": ImportedAttention,'))
    assert result.text is None
    assert "ATTENTION_CLASSES['eager'] is ImportedAttention, not a class of the file" in (
        refusals(result)
    )


# -- fused q/k/v ---------------------------------------------------------------------------------

SPLIT = "query_states, key_states, value_states = proj.split(self.hidden_size, dim=-1)"


def test_a_per_head_view_of_w_pack_is_read_per_head() -> None:
    result = kiln(
        (
            SPLIT,
            "proj = proj.view(bsz, q_len, self.num_heads, 3 * self.head_dim)\n"
            "        query_states, key_states, value_states = proj.split(self.head_dim, dim=-1)",
        )
    )
    assert result.deltas == ()
    assert result.text.attention.fused_qkv_layout == "per_head"


def test_a_view_with_three_before_the_heads_is_concatenated() -> None:
    result = kiln(
        (
            SPLIT,
            "proj = proj.unflatten(-1, (3, self.hidden_size))\n"
            "        query_states, key_states, value_states = proj.unbind(-2)",
        )
    )
    assert result.deltas == ()
    assert result.text.attention.fused_qkv_layout == "concatenated"


SLICES = (
    "query_states = proj[..., : self.hidden_size]\n"
    "        key_states = proj[..., self.hidden_size : 2 * self.hidden_size]\n"
    "        value_states = proj[..., 2 * self.hidden_size :]"
)


def test_slices_of_w_pack_in_q_k_v_order_are_concatenated() -> None:
    result = kiln((SPLIT, SLICES))
    assert result.deltas == ()
    assert result.text.attention.fused_qkv_layout == "concatenated"


UNFLATTEN = (
    "proj = proj.unflatten(-1, (3, self.hidden_size)).unsqueeze(0).transpose(0, -2)\n"
    "        proj = proj.squeeze(-2)\n"
    "        query_states = proj[0]\n"
    "        key_states = proj[1]\n"
    "        value_states = proj[2]"
)


def test_baichuan_style_unflatten_and_indices_are_concatenated() -> None:
    result = kiln((SPLIT, UNFLATTEN))
    assert result.deltas == ()
    assert result.text.attention.fused_qkv_layout == "concatenated"


@pytest.mark.parametrize(
    ("replacement", "why"),
    [
        (  # GPT-NeoX's per-head rows hidden behind a shape variable, then split
            "proj = proj.view(hidden_shape)\n"
            "        query_states, key_states, value_states = proj.chunk(3, dim=-1)",
            "split after a reshape onboard cannot read",
        ),
        (
            "query_states, value_states, key_states = proj.split(self.hidden_size, dim=-1)",
            "the order of q, k and v is not readable",
        ),
        ("query_states, key_states, value_states = self._pieces(proj)", "no split of it read"),
        (
            UNFLATTEN.replace("proj[1]", "proj[_K]").replace("proj[2]", "proj[1]"),
            "its pieces are taken in another order than q, k, v",
        ),
        (  # v's rows in the middle: no slice order says q, k, v
            SLICES.replace("value_states = proj[..., 2", "key_states_ = proj[..., 2")
            .replace("key_states = proj[..., self", "value_states = proj[..., self")
            .replace("key_states_", "key_states"),
            "no split of it read",
        ),
    ],
)
def test_a_fused_projection_never_becomes_separate_projections_silently(
    replacement: str, why: str
) -> None:
    result = kiln((SPLIT, replacement))
    message = refusals(result)
    assert "fused q/k/v projection W_pack" in message and why in message
    assert "@modeling_kiln.py:9" in message  # the line of the forward that shows it


# -- ALiBi ---------------------------------------------------------------------------------------


def test_no_alibi_and_no_rope_is_refused_not_read_as_rope() -> None:
    result = kiln(
        ("first = 2 ** (-(2 ** -(math.log2(n) - 3)))", "first = 0.5"),
        ("def _alibi_slopes(", "def _slopes("),
        ("_alibi_slopes(num_heads)", "_slopes(num_heads)"),
        ("alibi = slopes", "bias_ = slopes"),
        ("torch.where(allowed, alibi[None]", "torch.where(allowed, bias_[None]"),
        ("_alibi_attention_bias", "_attention_bias"),
        ("alibi_mask", "bias_mask"),
    )
    message = refusals(result)
    assert "applies no RoPE function and the file computes no ALiBi slopes" in message
    assert not result.text.attention.alibi


def test_alibi_with_other_slopes_is_refused() -> None:
    result = kiln(("first = 2 ** (-(2 ** -(math.log2(n) - 3)))", "first = 2 ** (-8 / n)"))
    assert "ALiBi with slopes onboard cannot read" in refusals(result)
    assert not result.text.attention.alibi


def test_alibi_beside_rope_is_refused() -> None:
    result = kiln(
        (
            "        if past_key_value is not None:\n            key_states, value_states",
            "        query_states, key_states = apply_rotary_pos_emb(query_states, key_states)\n"
            "        if past_key_value is not None:\n            key_states, value_states",
        )
    )
    assert "ALiBi slopes and RoPE in one file" in refusals(result)


# -- InternLM2's names and grouped wqkv ----------------------------------------------------------

INTERNLM2 = textwrap.dedent(
    """
    import torch
    from torch import nn
    from einops import rearrange


    class TinyRMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, x):
            v = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(v + self.variance_epsilon))


    class TinyRotaryEmbedding(nn.Module):
        pass


    def apply_rotary_pos_emb(q, k, cos, sin):
        return q, k


    class TinyAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.num_heads = config.num_attention_heads
            self.head_dim = config.hidden_size // self.num_heads
            self.num_key_value_heads = config.num_key_value_heads
            self.num_key_value_groups = self.num_heads // self.num_key_value_heads
            self.wqkv = nn.Linear(
                config.hidden_size,
                (self.num_heads + 2 * self.num_key_value_heads) * self.head_dim,
                bias=config.bias,
            )
            self.wo = nn.Linear(
                self.num_heads * self.head_dim, config.hidden_size, bias=config.bias
            )

        def forward(self, hidden_states, attention_mask=None, position_embeddings=None):
            bsz, q_len, _ = hidden_states.size()
            qkv_states = self.wqkv(hidden_states)
            qkv_states = rearrange(
                qkv_states,
                "b q (h gs d) -> b q h gs d",
                gs=2 + self.num_key_value_groups,
                d=self.head_dim,
            )
            query_states = qkv_states[..., : self.num_key_value_groups, :]
            query_states = rearrange(query_states, "b q h gs d -> b q (h gs) d").transpose(1, 2)
            key_states = qkv_states[..., -2, :].transpose(1, 2)
            value_states = qkv_states[..., -1, :].transpose(1, 2)
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / (
                self.head_dim**0.5
            )
            attn_weights = nn.functional.softmax(attn_weights, dim=-1)
            attn_output = torch.matmul(attn_weights, value_states)
            attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
            return self.wo(attn_output), None


    class TinyMLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.w1 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
            self.w3 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
            self.w2 = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
            self.act_fn = ACT2FN[config.hidden_act]

        def forward(self, x):
            return self.w2(self.act_fn(self.w1(x)) * self.w3(x))


    ATTENTION_CLASSES = {"eager": TinyAttention}


    class TinyDecoderLayer(nn.Module):
        def __init__(self, config, layer_idx):
            super().__init__()
            self.attention = ATTENTION_CLASSES[config.attn_implementation](config=config)
            self.feed_forward = TinyMLP(config)
            self.attention_norm = TinyRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
            self.ffn_norm = TinyRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

        def forward(self, hidden_states, attention_mask=None, position_embeddings=None):
            residual = hidden_states
            hidden_states = self.attention_norm(hidden_states)
            hidden_states, _ = self.attention(
                hidden_states=hidden_states,
                attention_mask=attention_mask,
                position_embeddings=position_embeddings,
            )
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.ffn_norm(hidden_states)
            hidden_states = self.feed_forward(hidden_states)
            return residual + hidden_states


    class TinyModel(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
            self.layers = nn.ModuleList(
                [TinyDecoderLayer(config, i) for i in range(config.num_hidden_layers)]
            )
            self.norm = TinyRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
            self.rotary_emb = TinyRotaryEmbedding(config)


    class TinyForCausalLM(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.model = TinyModel(config)
            self.output = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
    """
)
INTERNLM2_CONFIG = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "bias": False,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}


def test_internlm2_names_are_found_by_structure() -> None:
    result = read(INTERNLM2, INTERNLM2_CONFIG, "TinyForCausalLM", "modeling_tiny.py")
    assert result.deltas == (), refusals(result)
    text = result.text
    assert dict(result.roles)["attention"] == "TinyAttention"
    assert result.renames == (
        ("model.tok_embeddings.", "model.embed_tokens."),
        (".attention.", ".self_attn."),
        (".feed_forward.", ".mlp."),
        ("output.", "lm_head."),
    )
    assert dict(text.norm.names) == {"attn_in": "attention_norm", "mlp_in": "ffn_norm"}
    assert text.norm.placement == "pre"
    assert text.mlp.kind == "gated" and text.mlp.projections == ("w1", "w3", "w2")
    assert dict(text.names) == {"o_proj": "wo"}
    # one query head per key/value head: (head, q/k/v, head_dim) rows
    assert (text.attention.fused_qkv, text.attention.fused_qkv_layout) == ("wqkv", "per_head")
    assert [rope.rope_type for _, rope in text.rope] == ["default"]


def test_internlm2_grouped_wqkv_with_shared_heads_is_kv_grouped() -> None:
    """Two query heads per key/value head: rows (kv head, 2 q + k + v, head_dim)."""
    config = {**INTERNLM2_CONFIG, "num_key_value_heads": 2}
    result = read(INTERNLM2, config, "TinyForCausalLM", "modeling_tiny.py")
    assert result.deltas == (), refusals(result)
    assert result.text.attention.fused_qkv_layout == "kv_grouped"


def test_internlm2_grouped_wqkv_with_k_and_v_swapped_is_refused() -> None:
    swapped = INTERNLM2.replace("qkv_states[..., -2, :]", "qkv_states[..., -1_, :]")
    swapped = swapped.replace("qkv_states[..., -1, :]", "qkv_states[..., -2, :]")
    swapped = swapped.replace("-1_", "-1")
    config = {**INTERNLM2_CONFIG, "num_key_value_heads": 2}
    result = read(swapped, config, "TinyForCausalLM", "modeling_tiny.py")
    message = refusals(result)
    assert "fused q/k/v projection wqkv" in message
    assert "k and v are not read as [-2], [-1]" in message and "@modeling_tiny.py:" in message


def test_internlm2_mlp_order_comes_from_the_forward() -> None:
    """w3 inside the activation makes w3 the gate: names do not decide."""
    swapped = INTERNLM2.replace(
        "self.w2(self.act_fn(self.w1(x)) * self.w3(x))",
        "self.w2(self.w1(x) * self.act_fn(self.w3(x)))",
    )
    result = read(swapped, INTERNLM2_CONFIG, "TinyForCausalLM", "modeling_tiny.py")
    assert result.text.mlp.projections == ("w3", "w1", "w2")


def test_a_layer_with_two_attentions_is_refused_listing_its_children() -> None:
    text = INTERNLM2.replace(
        "self.feed_forward = TinyMLP(config)",
        "self.feed_forward = TinyMLP(config)\n        self.cross = TinyAttention(config)",
    )
    result = read(text, INTERNLM2_CONFIG, "TinyForCausalLM", "modeling_tiny.py")
    assert result.text is None
    message = refusals(result)
    assert (
        "decoder layer TinyDecoderLayer: found children attention (ATTENTION_CLASSES[...] -> "
        "TinyAttention), feed_forward (TinyMLP), cross (TinyAttention)"
    ) in message
    assert "2 attentions" in message


def test_a_model_without_a_layer_list_is_refused_with_its_children() -> None:
    text = INTERNLM2.replace("self.layers = nn.ModuleList(", "self.layers = nn.Sequential(")
    result = read(text, INTERNLM2_CONFIG, "TinyForCausalLM", "modeling_tiny.py")
    assert result.text is None
    assert (
        "causal LM TinyForCausalLM: no child holds an nn.ModuleList of decoder layers "
        "(found children model (TinyModel), output (Linear))"
    ) in refusals(result)


def test_logits_scaled_by_a_config_value_onboard_does_not_read_are_refused() -> None:
    """MiniCPM divides the hidden states by hidden_size / dim_model_base before its head."""
    result = kiln(
        (
            "logits = self.lm_head(hidden_states[:, -logits_to_keep:, :])",
            "hidden_states = hidden_states / (self.config.hidden_size / self.config.dim_model_base)"
            "\n        logits = self.lm_head(hidden_states[:, -logits_to_keep:, :])",
        )
    )
    message = refusals(result)
    assert "KilnForCausalLM.forward scales by config.dim_model_base" in message
    assert "@modeling_kiln.py:33" in message


def test_an_attention_whose_softmax_sits_in_a_child_is_found_and_the_child_refused() -> None:
    """ChatGLM computes the softmax in a core_attention module of its attention."""
    text = (
        INTERNLM2.replace(
            "attn_weights = nn.functional.softmax(attn_weights, dim=-1)",
            "attn_weights = self.core(attn_weights)",
        )
        .replace(
            "self.wo = nn.Linear(",
            "self.core = TinyCore()\n        self.wo = nn.Linear(",
        )
        .replace(
            "class TinyAttention(nn.Module):",
            "class TinyCore(nn.Module):\n"
            "    def forward(self, scores):\n"
            "        return nn.functional.softmax(scores, dim=-1)\n\n\n"
            "class TinyAttention(nn.Module):",
        )
    )
    result = read(text, INTERNLM2_CONFIG, "TinyForCausalLM", "modeling_tiny.py")
    assert dict(result.roles)["attention"] == "TinyAttention"
    assert "TinyAttention.core has no role in the spec" in refusals(result)
