"""Hand-checked labels of the feature catalogue for causal-LM types of transformers 5.18.

Every label was read from the transformers 5.18 source installed in ``.venv``
(``transformers/models/<type>/modeling_<type>.py`` and the config class in
``configuration_<type>.py``), never from onboard's output. Each entry is one dict:

- ``type``: the ``model_type``;
- ``config``: the real Hub fixture under ``tests/fixtures/hub`` (``org/name``; its ``auto_map``,
  if any, is dropped, since the labels describe transformers' own class) or ``DEFAULT``:
  transformers' default config written the way ``tests.new_types.default_config_dir`` writes it,
  with the entry's ``overrides`` (only where transformers' own default config cannot build or run
  a model, said in a comment);
- a key per catalogue feature whose value differs from ``BASELINE`` (what a plain Llama has),
  each with the ``file:line`` that proves it; features not listed were read too and equal the
  baseline;
- ``Unresolved("substring")`` as a feature's value where the HF code does something the catalogue
  cannot express (NoPE layers not tied to a layer kind, parallel attention and MLP, a scale
  given directly ...): onboard must then report a delta containing the substring
  (matched against ``"<what> <where> <detail>"``) instead of emitting a value;
- ``unresolved``: further delta substrings onboard must report for things no catalogue feature
  covers (attention sinks, logit multipliers, extra norms ...). An entry that expects nothing
  unresolved expects a complete spec;
- ``bugs``: where the detector disagrees with a label that the source proves right, the precise
  detector bug, per feature (``"unresolved"`` for the unresolved/complete check, ``"*"`` for
  every check of the type, when the analysis itself fails). The tests mark those cases
  ``xfail(strict=True)``.

Conventions: for a model whose every layer is MoE, ``mlp.*`` describe the routed experts (onboard
builds its MLPSpec from them); ``moe.dense_layers`` names the config rule the HF decoder layer
applies (``none``: every layer is MoE whatever the config says). onboard runs its full numerical
spec check (``spec_check``) only on a spec with no other delta; the attention modules and the
routed experts are checked on their own either way, so a behavioural mismatch of those ("<Class>
computes something the spec does not describe") is expected whatever else is unresolved.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT = "default"  # transformers' default config for the type


@dataclass(frozen=True)
class Unresolved:
    """The catalogue cannot express what HF does: expect a delta containing ``reason``."""

    reason: str


Value = str | bool | int | float | None | Unresolved

BASELINE: dict[str, Value] = {
    "attention.kind": "standard",
    "attention.qk_norm": "none",
    "attention.qk_norm_each_head": False,
    "attention.fused_qkv": "none",
    "attention.qk_norm_after_rope": False,
    "attention.qkv_bias": False,
    "attention.o_bias": False,
    "attention.scale": "head_dim",
    "attention.softcap": False,
    "attention.position_scale": False,
    "attention.sinks": False,
    "attention.indexer": "none",
    "attention.latent_query_gate": "none",
    "attention.per_kind": "none",
    "attention.v_head_dim": "head_dim",
    "attention.value_scale": "none",
    "attention.output_gate_proj": "none",
    "attention.sub_norm": False,
    "attention.sliding_window": "none",
    "layers.mixers": "none",
    "layers.recurrence": "none",
    "mlp.kind": "gated",
    "mlp.activation": "silu",
    "mlp.bias": False,
    "mlp.sub_norm": False,
    "norm.kind": "rms",
    "norm.affine": "weight",
    "norm.placement": "pre",
    "norm.gated": "none",
    "residual.gates": False,
    "norm.final": True,
    "norm.first_layer_without": "none",
    "head.transform": False,
    "embedding.scale": "none",
    "embedding.norm": False,
    "logits.final_softcap": False,
    "scales": "none",
    "positions": "rope",
    "rope.type": "default",
    "rope.partial": False,
    "rope.per_layer_theta": False,
    "rope.interleaved": False,
    "rope.reversed": False,
    "rope.reordered": False,
    "rope.layers": "all",
    "embeddings.tied": False,
    "logits.bias": False,
    "moe.router": "none",
    "moe.renormalize": False,
    "moe.routed_scaling": False,
    "moe.shared_experts": "none",
    "moe.clamped_glu": "none",
    "moe.post_norm": False,
    "moe.dense_layers": "all",
}

LABELS: list[dict[str, Any]] = [
    # ---------------------------------------------------------------- dense ----------------
    {
        "type": "llama",
        "config": "meta-llama/Llama-3.2-1B",
        "rope.type": "llama3",  # fixture rope_scaling.rope_type llama3
        "embeddings.tied": True,  # fixture tie_word_embeddings true; modeling_llama.py:422
    },
    {
        "type": "mistral",
        "config": "mistralai/Mistral-7B-v0.1",
        # fixture sliding_window 4096; modeling_mistral.py:172 sliding_window in every layer
        "attention.sliding_window": "uniform",
    },
    {
        "type": "ministral",
        "config": DEFAULT,
        # MinistralConfig.head_dim defaults to None and modeling_ministral.py:147 computes
        # head_dim ** -0.5: the default config cannot build, so head_dim = 4096 / 32.
        "overrides": {"head_dim": 128},
        # configuration_ministral.py:83,92 sliding_window 4096, every layer sliding_attention;
        # modeling_ministral.py:155
        "attention.sliding_window": "uniform",
    },
    {
        "type": "ministral3",
        "config": DEFAULT,
        "rope.type": "yarn",  # configuration_ministral3.py:97 "type": "yarn"
        # modeling_ministral3.py:146-150 multiplies q, after RoPE, by 1 + beta * log(1 +
        # floor(pos / original_max_position_embeddings)) (llama_4_scaling_beta 0.1, :106)
        "attention.position_scale": True,
    },
    {
        "type": "qwen2",
        "config": "Qwen/Qwen2.5-0.5B",
        "attention.qkv_bias": True,  # modeling_qwen2.py:189-191 bias=True; o_proj :192 bias=False
        "embeddings.tied": True,  # fixture tie_word_embeddings true
    },
    {
        "type": "lfm2",
        "config": "LiquidAI/LFM2-1.2B",
        "attention.qk_norm": "per_head",  # modeling_lfm2.py:225 Lfm2RMSNorm(self.head_dim)
        "embeddings.tied": True,  # configuration_lfm2.py:71 tie_word_embeddings True
        # modeling_lfm2.py:400 self.conv = Lfm2ShortConv(...) in the layers that do not attend
        # (fixture full_attn_idxs: 6 of 16 attend); :324-389 in_proj, depthwise Conv1d, out_proj
        "layers.mixers": "short_conv",
    },
    {
        "type": "qwen3",
        "config": "Qwen/Qwen3-0.6B",
        "attention.qk_norm": "per_head",  # modeling_qwen3.py:237 Qwen3RMSNorm(self.head_dim)
        "embeddings.tied": True,  # fixture tie_word_embeddings true
    },
    {
        "type": "gemma",
        "config": DEFAULT,
        "mlp.activation": "gelu_pytorch_tanh",  # configuration_gemma.py:74; modeling_gemma.py:93
        "norm.kind": "rms+1",  # modeling_gemma.py:77 output * (1.0 + self.weight.float())
        "embedding.scale": "sqrt_hidden",  # modeling_gemma.py:374 embed_scale=hidden_size**0.5
        "embeddings.tied": True,  # configuration_gemma.py:82
    },
    {
        "type": "gemma2",
        "config": DEFAULT,
        "attention.scale": "query_pre_attn_scalar",  # modeling_gemma2.py:229
        "attention.softcap": True,  # modeling_gemma2.py:245,282; configuration_gemma2.py:91 50.0
        # configuration_gemma2.py:95-97 alternating sliding/full; modeling_gemma2.py:246
        "attention.sliding_window": "per_layer",
        "mlp.activation": "gelu_pytorch_tanh",  # modeling_gemma2.py:78 config.hidden_activation
        "norm.kind": "rms+1",  # modeling_gemma2.py:62
        "norm.placement": "sandwich",  # modeling_gemma2.py:298-302, forward 316-333
        "embedding.scale": "sqrt_hidden",  # modeling_gemma2.py:388
        "logits.final_softcap": True,  # modeling_gemma2.py:527-530; configuration_gemma2.py:90
        "embeddings.tied": True,  # configuration_gemma2.py:83
    },
    {
        "type": "gemma3_text",
        "config": "google/gemma-3-1b-it",
        "attention.qk_norm": "per_head",  # modeling_gemma3.py:338 Gemma3RMSNorm(dim=head_dim)
        "attention.scale": "query_pre_attn_scalar",  # modeling_gemma3.py:318
        # fixture attn_logit_softcapping null (modeling_gemma3.py:334): no attention softcap
        "attention.sliding_window": "per_layer",  # configuration_gemma3.py:111-113 pattern 6
        "mlp.activation": "gelu_pytorch_tanh",  # modeling_gemma3.py:129
        "norm.kind": "rms+1",  # modeling_gemma3.py:149
        "norm.placement": "sandwich",  # modeling_gemma3.py:394-397
        "embedding.scale": "sqrt_hidden",  # modeling_gemma3.py:496
        # fixture final_logit_softcapping null: no final softcap
        # fixture rope_theta 1e6 (full), rope_local_base_freq 1e4 (sliding):
        # configuration_gemma3.py:152-158
        "rope.per_layer_theta": True,
        "embeddings.tied": True,  # configuration_gemma3.py:92 (fixture does not set it)
    },
    {
        "type": "vaultgemma",
        "config": DEFAULT,
        "attention.scale": "query_pre_attn_scalar",  # modeling_vaultgemma.py:172
        "attention.softcap": True,  # modeling_vaultgemma.py:188,225; configuration :90 50.0
        "attention.sliding_window": "per_layer",  # configuration_vaultgemma.py:93-95
        "mlp.activation": "gelu_pytorch_tanh",  # modeling_vaultgemma.py:75
        "norm.kind": "rms+1",  # modeling_vaultgemma.py:59
        # modeling_vaultgemma.py:241,243 input + pre_feedforward only: pre-norm
        "embedding.scale": "sqrt_hidden",  # modeling_vaultgemma.py:379
        "logits.final_softcap": True,  # modeling_vaultgemma.py:518-521
        "embeddings.tied": True,  # configuration_vaultgemma.py:82
    },
    {
        "type": "olmo2",
        "config": "allenai/OLMo-2-0425-1B",
        # modeling_olmo2.py:221 q_norm = Olmo2RMSNorm(num_attention_heads * head_dim)
        "attention.qk_norm": "full_width",
        "norm.placement": "post",  # modeling_olmo2.py:292-293 post_attention/post_feedforward only
    },
    {
        "type": "olmo3",
        "config": DEFAULT,
        "attention.qk_norm": "full_width",  # modeling_olmo3.py:162
        # configuration_olmo3.py:95 3 sliding + 1 full; modeling_olmo3.py:165
        "attention.sliding_window": "per_layer",
        "norm.placement": "post",  # modeling_olmo3.py:236-237
        # configuration_olmo3.py:117-120: both kinds get the same default theta (500000)
    },
    {
        "type": "stablelm",
        "config": DEFAULT,
        "norm.kind": "layer",  # modeling_stablelm.py:337 nn.LayerNorm
        "norm.affine": "weight+bias",  # nn.LayerNorm's default bias=True
        # use_parallel_residual False (configuration_stablelm.py:60): modeling_stablelm.py:375-381
        "rope.partial": True,  # configuration_stablelm.py:68 0.25; modeling_stablelm.py:88-90
    },
    {
        "type": "arcee",
        "config": DEFAULT,
        "mlp.kind": "plain",  # modeling_arcee.py:56-57 up_proj / down_proj only
        "mlp.activation": "relu2",  # configuration_arcee.py:68
    },
    {
        "type": "nemotron",
        "config": DEFAULT,
        "mlp.kind": "plain",  # modeling_nemotron.py:189-190
        "mlp.activation": "relu2",  # configuration_nemotron.py:53
        "norm.kind": "layer+1",  # modeling_nemotron.py:62,77 F.layer_norm(..., self.weight + 1.0)
        "norm.affine": "weight+bias",  # modeling_nemotron.py:68 bias=True passed to nn.LayerNorm
        "rope.partial": True,  # configuration_nemotron.py:69 0.5; modeling_nemotron.py:116-118
    },
    {
        "type": "seed_oss",
        "config": DEFAULT,
        # modeling_seed_oss.py:171-177 bias=config.attention_bias (True, configuration :79);
        # o_proj :180 bias=config.attention_out_bias (False, configuration :80)
        "attention.qkv_bias": True,
    },
    {
        "type": "helium",
        "config": DEFAULT,
        # modeling_helium.py:174-177 rotate_half on x[..., 0::2] / x[..., 1::2] and :203-204
        # repeat_interleave: interleaved RoPE with no config flag
        "rope.interleaved": True,
    },
    {
        "type": "ernie4_5",
        "config": DEFAULT,
        # modeling_ernie4_5.py:117-118, 184-185: interleaved RoPE, no config flag
        "rope.interleaved": True,
        "embeddings.tied": True,  # configuration_ernie4_5.py:78
    },
    {
        "type": "exaone4",
        "config": DEFAULT,
        "attention.qk_norm": "per_head",  # modeling_exaone4.py:217 Exaone4RMSNorm(self.head_dim)
        # configuration_exaone4.py:96-106 window 4096, pattern 4: 3 sliding + 1 full
        "attention.sliding_window": "per_layer",
        "norm.placement": "post",  # modeling_exaone4.py:291-292, forward 314-321
        # modeling_exaone4.py:241 RoPE only in sliding layers (global NoPE)
        "rope.type": "default/none",
    },
    {
        "type": "smollm3",
        "config": "HuggingFaceTB/SmolLM3-3B",
        # fixture no_rope_layers [1, 1, 1, 0, ...] on all-full layers; modeling_smollm3.py:200,221
        # skip RoPE every 4th layer: NoPE not tied to a layer kind, read from that config list
        "rope.layers": "no_rope_layers",
        "embeddings.tied": True,  # configuration_smollm3.py:95 (fixture does not set it)
    },
    {
        "type": "glm",
        "config": DEFAULT,
        "attention.qkv_bias": True,  # modeling_glm.py:223-229; configuration_glm.py:74 True
        # o_proj modeling_glm.py:231 bias=False
        "mlp.kind": "fused_gate_up",  # modeling_glm.py:53 gate_up_proj
        "rope.partial": True,  # configuration_glm.py:77 0.5; modeling_glm.py:97-99
        # modeling_glm.py:164-165, 191-192 interleaved RoPE, no config flag
        "rope.interleaved": True,
    },
    {
        "type": "glm4",
        "config": DEFAULT,
        "attention.qkv_bias": True,  # modeling_glm4.py:211-217; configuration_glm4.py:74 True
        "mlp.kind": "fused_gate_up",  # modeling_glm4.py:54
        # modeling_glm4.py:74-77, forward 101-109: input, post_self_attn, post_attention, post_mlp
        "norm.placement": "sandwich",
        "rope.partial": True,  # configuration_glm4.py:77 0.5
        "rope.interleaved": True,  # modeling_glm4.py:152-153, 179-180
    },
    {
        "type": "granite",
        "config": DEFAULT,
        # modeling_granite.py:124 scaling = config.attention_multiplier (1.0 by default): a
        # scale given directly, not head_dim ** -0.5 nor query_pre_attn_scalar ** -0.5.
        "attention.scale": "attention_multiplier",
        # modeling_granite.py:397 inputs_embeds * embedding_multiplier; :273, :278 residual +
        # hidden_states * residual_multiplier; :497 logits / logits_scaling (all 1.0 by default)
        "scales": "embedding=config.embedding_multiplier; logits=1.0 / config.logits_scaling; "
        "residual=config.residual_multiplier",
    },
    {
        "type": "phi",
        "config": DEFAULT,
        # modeling_phi.py:175-178 q/k/v_proj and dense (the output projection), all bias=True
        "attention.qkv_bias": True,
        "attention.o_bias": True,
        # :252-254 fc1 -> gelu_new (configuration_phi.py:72) -> fc2, nn.Linear's default bias
        "mlp.kind": "plain",
        "mlp.activation": "gelu_new",
        "mlp.bias": True,
        "norm.kind": "layer",  # :268, :335 nn.LayerNorm
        "norm.affine": "weight+bias",
        "norm.placement": "parallel",  # :297 attn_outputs + feed_forward_hidden_states + residual
        "rope.partial": True,  # configuration_phi.py:88 partial_rotary_factor 0.5
        "logits.bias": True,  # :409 lm_head bias=True
    },
    {
        "type": "persimmon",
        "config": DEFAULT,
        # modeling_persimmon.py:213 query_key_value (bias=True), :240 viewed as
        # (heads, 3, head_dim): q, k, v head by head; :214 dense, the output projection
        "attention.fused_qkv": "per_head",
        "attention.qkv_bias": True,
        "attention.o_bias": True,
        # :219-224 q_layernorm / k_layernorm over head_dim (qk_layernorm True by default,
        # configuration_persimmon.py:54), applied before RoPE (forward :262-264)
        "attention.qk_norm": "per_head",
        # :154-155 dense_h_to_4h -> relu2 (configuration :47) -> dense_4h_to_h, default bias
        "mlp.kind": "plain",
        "mlp.activation": "relu2",
        "mlp.bias": True,
        "norm.kind": "layer",  # :317-318, :393 nn.LayerNorm
        "norm.affine": "weight+bias",
        "rope.partial": True,  # configuration_persimmon.py:62 partial_rotary_factor 0.5
    },
    {
        "type": "gpt_neox",
        "config": DEFAULT,
        # gpt_neox.embed_in / layers / final_layer_norm, read through the Llama layout.
        # modeling_gpt_neox.py:192 query_key_value, :204-207 viewed as (heads, 3 * head_size) and
        # chunked: q, k, v head by head; :193 dense; bias=config.attention_bias (True, config :80)
        "attention.fused_qkv": "per_head",
        "attention.qkv_bias": True,
        "attention.o_bias": True,
        # :41-42 dense_h_to_4h -> gelu (configuration :66) -> dense_4h_to_h, default bias
        "mlp.kind": "plain",
        "mlp.activation": "gelu",
        "mlp.bias": True,
        "norm.kind": "layer",  # :243-244, :313 nn.LayerNorm
        "norm.affine": "weight+bias",
        # :271-274 use_parallel_residual (True, configuration :78): mlp(post_attention_layernorm(x))
        # + attn(input_layernorm(x)) + x, two norms of the same input
        "norm.placement": "parallel",
        "rope.partial": True,  # configuration_gpt_neox.py:98 partial_rotary_factor 0.25
    },
    {
        "type": "gpt2",
        "config": DEFAULT,
        # transformer.wte / wpe / h / ln_f, read through the Llama layout; wpe at :493, added to
        # the embeddings at the position ids
        "positions": "learned",
        "rope.type": "none",
        # modeling_gpt2.py:106 c_attn = Conv1D(3 * embed_dim, ...) split into q, k, v in order;
        # :107 c_proj; Conv1D always adds a bias (pytorch_utils.py:111)
        "attention.fused_qkv": "concatenated",
        "attention.qkv_bias": True,
        "attention.o_bias": True,
        # :233-235 c_fc -> ACT2FN[activation_function] (gelu_new, configuration :84) -> c_proj
        "mlp.kind": "plain",
        "mlp.activation": "gelu_new",
        "mlp.bias": True,
        "norm.kind": "layer",  # :252, :254, :497 nn.LayerNorm
        "norm.affine": "weight+bias",
        "embeddings.tied": True,  # configuration_gpt2.py:103
    },
    {
        "type": "openai-gpt",
        "config": DEFAULT,
        # transformer.tokens_embed / positions_embed / h, read through the Llama layout;
        # modeling_openai.py:377 positions added to the embeddings, no final norm after :306's h
        "positions": "learned",
        "rope.type": "none",
        "norm.final": False,
        # :148 n = ln_1(x + a), :150 h = ln_2(n + m): norms after each residual add
        "norm.placement": "post_residual",
        "norm.kind": "layer",  # :136, :138 nn.LayerNorm
        "norm.affine": "weight+bias",
        # :60 c_attn = Conv1D(n_state * 3, nx), split q, k, v in order; Conv1D adds biases
        "attention.fused_qkv": "concatenated",
        "attention.qkv_bias": True,
        "attention.o_bias": True,
        # :120-122 c_fc -> ACT_FNS[afn] ("gelu" is gelu_new, :43) -> c_proj; no config key the
        # analysis reads names it, so the module is measured: gelu_new is gelu_pytorch_tanh
        "mlp.kind": "plain",
        "mlp.activation": "gelu_pytorch_tanh",
        "mlp.bias": True,
        "embeddings.tied": True,  # configuration_openai.py:100
    },
    {
        "type": "bert-generation",
        "config": DEFAULT,
        # bert.embeddings / bert.encoder.layer, layers split across attention.self,
        # attention.output, intermediate, output: read through the Llama layout's BERT table.
        # modeling_bert_generation.py:566 causal mask only when config.is_decoder (the tiny
        # config sets it: the causal LM is a decoder only with it, :615-616 warns otherwise)
        "positions": "learned",  # :400 position_embeddings, :422 added to the embeddings
        "rope.type": "none",
        "embedding.norm": True,  # :423 embeddings.LayerNorm after the positions
        "norm.final": False,  # :378-385 the encoder's last layer feeds the head
        # :55 LayerNorm(dense(attn) + input), :290 LayerNorm(dense(mlp) + input)
        "norm.placement": "post_residual",
        "norm.kind": "layer",  # :49, :284 nn.LayerNorm
        "norm.affine": "weight+bias",
        "attention.qkv_bias": True,  # :104-106 nn.Linear, bias by default
        "attention.o_bias": True,  # :48
        # :267-269 dense -> ACT2FN[config.hidden_act] ("gelu", configuration :48), :283 dense
        "mlp.kind": "plain",
        "mlp.activation": "gelu",
        "mlp.bias": True,
        "embeddings.tied": True,  # configuration :60; modeling :608 decoder.weight tied
        "logits.bias": True,  # :593 decoder with bias, tied to :594 lm_head.bias (:609)
    },
    {
        "type": "modernbert-decoder",
        "config": DEFAULT,
        # configuration_modernbert_decoder.py:104-108 every 3rd layer full, the rest sliding;
        # modeling_modernbert_decoder.py:257 the window on sliding layers
        "attention.sliding_window": "per_layer",
        # modeling :81 Wi = 2 x intermediate, :87-88 input, gate = chunk; act(input) * gate
        "mlp.kind": "fused_gate_up",
        "mlp.activation": "gelu",  # :82 ACT2FN[config.hidden_activation], configuration :75
        "norm.kind": "layer",  # :58, :312, :439 nn.LayerNorm, bias=config.norm_bias (False)
        "norm.first_layer_without": "attn_in",  # :306-310 nn.Identity() for layer_idx 0
        # :347-356 dense, ACT2FN[classifier_activation], norm; :591 decoder(lm_head(h))
        "head.transform": True,
        "embedding.norm": True,  # :58 embeddings.norm after tok_embeddings
        "rope.per_layer_theta": True,  # configuration :68 160000 full, 10000 sliding
        "embeddings.tied": True,  # configuration :98; modeling :524 decoder.weight tied
        "logits.bias": True,  # modeling :531 decoder bias=config.decoder_bias (configuration :91)
    },
    {
        "type": "bloom",
        "config": DEFAULT,
        # modeling_bloom.py:45 build_alibi_tensor: slope_h x key position added to the scores
        # (:438 in the model), no rotary embedding
        "positions": "alibi",
        "rope.type": "none",
        # :425 word_embeddings_layernorm normalises the embeddings before the first block
        "embedding.norm": True,
        # :196 query_key_value with bias, viewed (heads, 3, head_dim) at :214; :197 dense, bias
        "attention.fused_qkv": "per_head",
        "attention.qkv_bias": True,
        "attention.o_bias": True,
        # :320-326 dense_h_to_4h -> BloomGelu (tanh approximation, :111-120) -> dense_4h_to_h
        "mlp.kind": "plain",
        "mlp.activation": "gelu_pytorch_tanh",
        "mlp.bias": True,
        "norm.kind": "layer",  # :349, :425, :431 LayerNorm(eps=layer_norm_epsilon)
        "norm.affine": "weight+bias",
        "embeddings.tied": True,  # configuration_bloom.py:73
    },
    {
        "type": "opt",
        "config": DEFAULT,
        # model.decoder.* read through the Llama layout; modeling_opt.py:53 offset = 2: row
        # position + 2 of the learned table
        "positions": "learned+offset",
        "rope.type": "none",
        # :130-133 q/k/v/out_proj with bias=enable_bias (True, configuration :72)
        "attention.qkv_bias": True,
        "attention.o_bias": True,
        # :193, :198-199 fc1 -> ACT2FN[activation_function] (relu, configuration :65) -> fc2,
        # written in the layer's forward
        "mlp.kind": "plain",
        "mlp.activation": "relu",
        "mlp.bias": True,
        "norm.kind": "layer",  # :195, :200 nn.LayerNorm, before attention and the MLP (:214)
        "norm.affine": "weight+bias",
        "embeddings.tied": True,  # configuration_opt.py:74
    },
    {
        "type": "nanochat",
        "config": DEFAULT,
        # modeling_nanochat.py:214-215 q_norm / k_norm: NanoChatRMSNorm (:45-54) learns nothing,
        # applied per head after RoPE (:236-237), the same as before it (a rotation keeps norms)
        "attention.qk_norm": "per_head",
        # :180-184 rotate_half returns cat(x2, -x1): q and k turn the other way
        "rope.reversed": True,
        # :361 the one norm, applied to the embeddings (:406) and after the last layer (:417)
        "embedding.norm": True,
        "norm.affine": "none",  # every norm is a NanoChatRMSNorm
        # :262-273 fc1 -> ACT2FN[hidden_act] (relu2, configuration :61) -> fc2, no bias
        "mlp.kind": "plain",
        "mlp.activation": "relu2",
        "logits.final_softcap": True,  # :494-497, final_logit_softcapping 15.0 (configuration :67)
    },
    {
        "type": "olmo",
        "config": DEFAULT,
        # modeling_olmo.py:49-60 OlmoLayerNorm: F.layer_norm(..., None, None, eps=1e-5), nothing
        # to learn; :287-288, :352 every norm is one. clip_qkv None by default (configuration :84)
        "norm.kind": "layer",
        "norm.affine": "none",
    },
    {
        "type": "minicpm3",
        "config": DEFAULT,
        # modeling_minicpm3.py:239 MiniCPM3Attention: DeepSeek-V2's latent attention
        "attention.kind": "mla",
        # modeling_minicpm3.py:314 yarn_apply_mscale on default RoPE: qk_head_dim ** -0.5
        "attention.scale": "qk_head_dim",
        # :453-455 embed_scale=config.scale_emb; :390 scale_depth / sqrt(num_hidden_layers) on each
        # residual branch; :581 hidden_states / config.logits_scaling before the LM head
        "scales": "embedding=config.scale_emb; logits=1.0 / config.logits_scaling; "
        "residual=config.scale_depth / math.sqrt(config.num_hidden_layers)",
        "embeddings.tied": True,  # configuration_minicpm3.py:103
    },
    {
        "type": "cohere",
        "config": DEFAULT,
        "norm.kind": "layer",  # modeling_cohere.py:51-66 CohereLayerNorm subtracts the mean
        # modeling_cohere.py:343-344 residual + attention + mlp of one normed input
        "norm.placement": "parallel",
        # modeling_cohere.py:115 repeat_interleave(freqs, 2) and :177-178 x[..., ::2]
        "rope.interleaved": True,
        "embeddings.tied": True,  # configuration_cohere.py:82
        "scales": "logits=config.logit_scale",  # modeling_cohere.py:503 logits * logit_scale
    },
    {
        "type": "cohere2",
        "config": DEFAULT,
        # configuration_cohere2.py:96-100 pattern 4; modeling_cohere2.py:198
        "attention.sliding_window": "per_layer",
        "norm.kind": "layer",  # modeling_cohere2.py:96-112
        "norm.placement": "parallel",  # modeling_cohere2.py:317-318
        "rope.type": "default/none",  # modeling_cohere2.py:229 RoPE only if sliding_window
        "rope.interleaved": True,  # modeling_cohere2.py:89, 152-153 (the sliding layers)
        "embeddings.tied": True,  # configuration_cohere2.py:81
        "scales": "logits=config.logit_scale",  # modeling_cohere2.py:481
    },
    {
        "type": "apertus",
        "config": DEFAULT,
        "attention.qk_norm": "per_head",  # modeling_apertus.py:233 ApertusRMSNorm(self.head_dim)
        "mlp.kind": "plain",  # modeling_apertus.py:49-50
        # configuration_apertus.py:70 xielu; modeling_apertus.py:52-53 ACT2CLS["xielu"], whose
        # alpha_p / alpha_n are learned (activations.py:249-252), beta and eps kept as buffers
        "mlp.activation": "xielu",
        # modeling_apertus.py:287-288 attention_layernorm / feedforward_layernorm before each block
        "rope.type": "llama3",  # configuration_apertus.py:89
    },
    {
        "type": "cwm",
        "config": DEFAULT,
        # configuration_cwm.py:84,98-101 window 8192, every 4th layer full; modeling_cwm.py:187
        "attention.sliding_window": "per_layer",
        "rope.type": "llama3",  # configuration_cwm.py:95
    },
    {
        "type": "jais2",
        "config": DEFAULT,
        "attention.qkv_bias": True,  # modeling_jais2.py:143-149; configuration_jais2.py:78 True
        "attention.o_bias": True,  # modeling_jais2.py:152 bias=config.attention_bias
        "mlp.kind": "plain",  # modeling_jais2.py:50-51
        "mlp.activation": "relu2",  # configuration_jais2.py:69
        "mlp.bias": True,  # modeling_jais2.py:50-51 mlp_bias (True, configuration_jais2.py:80)
        "norm.kind": "layer",  # modeling_jais2.py:204 nn.LayerNorm
        "norm.affine": "weight+bias",
    },
    {
        "type": "hyperclovax",
        "config": DEFAULT,
        # modeling_hyperclovax.py:203 scaling = config.attention_multiplier (0.0884 by default,
        # not recomputed from head_dim)
        # use_post_norm True by default (configuration_hyperclovax.py:108): post_norm1 / post_norm2
        # after each sub-block (modeling_hyperclovax.py:288-293, forward 336-344) besides
        # input_layernorm / post_attention_layernorm
        "norm.placement": "sandwich",
        "attention.scale": "attention_multiplier",
        # :406 inputs_embeds * embedding_multiplier; :338, :345 residual + hidden_states *
        # residual_multiplier; :505-506 logits * logits_scaling (Granite divides; this multiplies)
        "scales": "embedding=config.embedding_multiplier; logits=config.logits_scaling; "
        "residual=config.residual_multiplier",
    },
    {
        "type": "diffllama",
        "config": DEFAULT,
        # modeling_diffllama.py:249-252 lambda_q1 ... lambda_k2, :253 groupnorm without weight,
        # :248 lambda_init_fn(layer_idx); forward :286-319 two softmax maps, one subtracted
        "attention.kind": "differential",
    },
    {
        "type": "doge",
        "config": DEFAULT,
        # modeling_doge.py:273-274 A and dt_proj; :305-313 the mask from the values, :366-370
        # the cut to keep_window_size keys per row
        "attention.kind": "dynamic_mask",
        "attention.qk_norm": "per_head",  # modeling_doge.py:280-281, :294-295 on each head
        # modeling_doge.py:455 input_residual, :459 post_attention_residual; forward :484, :493
        "residual.gates": True,
    },
    {
        "type": "phi3",
        "config": DEFAULT,
        "mlp.kind": "fused_gate_up",  # modeling_phi3.py:54 gate_up_proj
        # configuration_phi3.py:81 sliding_window None; partial_rotary_factor 1.0
        # modeling_phi3.py:216 one qkv_proj; forward :232-235 slices q, then k, then v
        "attention.fused_qkv": "concatenated",
    },
    {
        "type": "starcoder2",
        "config": DEFAULT,
        # modeling_starcoder2.py:153-156 bias=config.use_bias (True, configuration :80)
        "attention.qkv_bias": True,
        "attention.o_bias": True,
        "mlp.kind": "plain",  # modeling_starcoder2.py:57-58 c_fc / c_proj
        "mlp.activation": "gelu_pytorch_tanh",  # configuration_starcoder2.py:67
        "mlp.bias": True,  # modeling_starcoder2.py:57-58 bias=config.use_bias
        "norm.kind": "layer",  # modeling_starcoder2.py:211 nn.LayerNorm
        "norm.affine": "weight+bias",
        "embeddings.tied": True,  # configuration_starcoder2.py:81
    },
    {
        "type": "youtu",
        "config": DEFAULT,
        "attention.kind": "mla",  # modeling_youtu.py:272 MLA, kv_a_proj_with_mqa
        # modeling_youtu.py:327 yarn_apply_mscale: default rope_type, so qk_head_dim ** -0.5
        "attention.scale": "qk_head_dim",
        "rope.interleaved": True,  # configuration_youtu.py:92; modeling_youtu.py:374-375
        "embeddings.tied": True,  # configuration_youtu.py:90
    },
    {
        "type": "bitnet",
        "config": DEFAULT,
        "mlp.activation": "relu2",  # configuration_bitnet.py:50
        "attention.sub_norm": True,  # modeling_bitnet.py:177, :216 attn_sub_norm before o_proj
        "mlp.sub_norm": True,  # modeling_bitnet.py:74, :77 ffn_sub_norm before down_proj
    },
    {
        "type": "hunyuan_v1_dense",
        "config": DEFAULT,
        # HunYuanDenseV1Config.head_dim defaults to None and modeling :164 computes
        # head_dim ** -0.5: the default config cannot build, so head_dim = 4096 / 32.
        "overrides": {"head_dim": 128},
        # modeling_hunyuan_v1_dense.py:180-181 query_layernorm / key_layernorm per head, applied
        # after RoPE (:199-201: apply_rotary_pos_emb, then query_layernorm)
        "attention.qk_norm": "per_head",
        "attention.qk_norm_after_rope": True,
    },
    # ---------------------------------------------------------------- MoE ------------------
    {
        "type": "mixtral",
        "config": "mistralai/Mixtral-8x7B-v0.1",
        # fixture sliding_window null
        "moe.router": "softmax_then_topk",  # modeling_mixtral.py:106-107 softmax, topk
        "moe.renormalize": True,  # modeling_mixtral.py:108 router_top_value /= sum
        "moe.dense_layers": "none",  # modeling_mixtral.py:119 every layer MixtralSparseMoeBlock
    },
    {
        "type": "qwen2_moe",
        "config": DEFAULT,
        # modeling_qwen2_moe.py:230-232 bias=config.qkv_bias (True, configuration :103);
        # o_proj :233 bias=False
        "attention.qkv_bias": True,
        "moe.router": "softmax_then_topk",  # modeling_qwen2_moe.py:330-331
        # norm_topk_prob False by default (modeling_qwen2_moe.py:332): no renormalisation
        "moe.shared_experts": "gated",  # modeling_qwen2_moe.py:344-345, 354 sigmoid gate
        "moe.dense_layers": "mlp_only_layers",  # modeling_qwen2_moe.py:365-366
    },
    {
        "type": "qwen3_moe",
        "config": "Qwen/Qwen3-30B-A3B",
        "attention.qk_norm": "per_head",  # modeling_qwen3_moe.py:147
        "moe.router": "softmax_then_topk",  # modeling_qwen3_moe.py:261-262
        "moe.renormalize": True,  # fixture norm_topk_prob true; modeling_qwen3_moe.py:263
        "moe.dense_layers": "mlp_only_layers",  # modeling_qwen3_moe.py:309-310
    },
    {
        "type": "olmoe",
        "config": "allenai/OLMoE-1B-7B-0924",
        "attention.qk_norm": "full_width",  # modeling_olmoe.py:233 OlmoeRMSNorm(hidden_size)
        "moe.router": "softmax_then_topk",  # modeling_olmoe.py:340-341
        # fixture norm_topk_prob false (modeling_olmoe.py:342)
        "moe.dense_layers": "none",  # modeling_olmoe.py:370 every layer OlmoeSparseMoeBlock
    },
    {
        "type": "flex_olmo",
        "config": DEFAULT,
        "attention.qk_norm": "full_width",  # modeling_flex_olmo.py:233
        "norm.placement": "post",  # modeling_flex_olmo.py:364-365
        "moe.router": "softmax_then_topk",  # modeling_flex_olmo.py:293-294
        # norm_topk_prob False by default (modeling_flex_olmo.py:295)
        "moe.dense_layers": "none",  # modeling_flex_olmo.py:363 every layer sparse
    },
    {
        "type": "dots1",
        "config": DEFAULT,
        # Dots1Config leaves n_routed_experts and num_experts_per_tok None, and
        # modeling_dots1.py:368 Dots1Experts calls torch.empty(None, ...): the default config
        # cannot build. dots.llm1's values: 128 experts, top 6, 2 shared.
        "overrides": {"n_routed_experts": 128, "num_experts_per_tok": 6, "n_shared_experts": 2},
        "attention.qk_norm": "per_head",  # modeling_dots1.py:217 q_norm on head_dim
        # :295-296 sigmoid scores, choice shifted by e_score_correction_bias; n_group 1 (no
        # group-limited choice); norm_topk_prob False, routed_scaling_factor 1.0 (config)
        "moe.router": "sigmoid_then_topk+bias",
        "moe.shared_experts": "ungated",  # :370 shared_experts, added without a gate
        "moe.dense_layers": "first_k_dense_replace",  # :391 layer_idx >= first_k_dense_replace
    },
    {
        "type": "hunyuan_v1_moe",
        "config": DEFAULT,
        # HunYuanMoEV1Config.head_dim defaults to None and the attention computes
        # head_dim ** -0.5: the default config cannot build, so head_dim = 4096 / 32.
        "overrides": {"head_dim": 128},
        # modeling_hunyuan_v1_moe.py:178 query_layernorm per head, applied after RoPE (:198)
        "attention.qk_norm": "per_head",
        "attention.qk_norm_after_rope": True,
        # :231 the router is the gate's one linear, wg; :238-240 softmax, top-k, renormalised
        # (one expert by default: the tiny model gets 4 so the variants differ)
        "moe.router": "softmax_then_topk",
        "moe.renormalize": True,
        "moe.shared_experts": "ungated",  # :290 shared_mlp, added without a gate (:300)
        "moe.dense_layers": "none",  # :308 every layer HunYuanMoEV1Moe
    },
    {
        "type": "deepseek_v2",
        "config": DEFAULT,
        # DeepseekV2Config.num_experts_per_tok defaults to None and modeling :103 calls
        # torch.topk(k=None): the default config cannot run; 6 is DeepSeek-V2's value.
        "overrides": {"num_experts_per_tok": 6},
        "attention.kind": "mla",  # modeling_deepseek_v2.py:336-342 kv_a_proj_with_mqa
        "attention.scale": "qk_head_dim",  # modeling_deepseek_v2.py:355, default rope: no mscale
        # modeling_deepseek_v2.py:272-279 view_as_complex on (x0, x1) pairs, no config flag
        "rope.interleaved": True,
        "moe.router": "softmax_then_topk",  # modeling_deepseek_v2.py:101-103 (greedy)
        # the router never renormalises (modeling_deepseek_v2.py:86-117); routed_scaling 1.0
        "moe.shared_experts": "ungated",  # modeling_deepseek_v2.py:126-136
        # modeling_deepseek_v2.py:436 layer_idx >= first_k_dense_replace (0 by default)
        "moe.dense_layers": "first_k_dense_replace",
    },
    {
        "type": "deepseek_v3",
        "config": "deepseek-ai/DeepSeek-V3",
        "attention.kind": "mla",  # modeling_deepseek_v3.py:396-404
        # modeling_deepseek_v3.py:417 yarn_apply_mscale: fixture yarn factor 40, mscale_all_dim 1
        "attention.scale": "qk_head_dim_yarn",
        "rope.type": "yarn",  # fixture rope_scaling.type yarn
        # configuration_deepseek_v3.py:114 rope_interleave True; modeling_deepseek_v3.py:464
        "rope.interleaved": True,
        # modeling_deepseek_v3.py:147-163 sigmoid, + e_score_correction_bias, group top-k
        "moe.router": "sigmoid_then_topk+bias+groups",
        "moe.renormalize": True,  # fixture norm_topk_prob true; modeling_deepseek_v3.py:165
        "moe.routed_scaling": True,  # fixture 2.5; modeling_deepseek_v3.py:168
        "moe.shared_experts": "ungated",  # modeling_deepseek_v3.py:222, 232
        "moe.dense_layers": "first_k_dense_replace",  # modeling_deepseek_v3.py:504
    },
    {
        "type": "deepseek_v32",
        "config": DEFAULT,
        "attention.kind": "mla",  # modeling_deepseek_v32.py:376 kv_a_proj_with_mqa
        # modeling_deepseek_v32.py:394 yarn_apply_mscale: default RoPE, no mscale
        "attention.scale": "qk_head_dim",
        # modeling_deepseek_v32.py:395 an indexer in every layer; :233 its RoPE on halves
        "attention.indexer": "halves",
        # modeling_deepseek_v32.py:438 apply_rotary_pos_emb_interleave, no config flag
        "rope.interleaved": True,
        # modeling_deepseek_v32.py:526-528 sigmoid, + e_score_correction_bias, n_group 8
        "moe.router": "sigmoid_then_topk+bias+groups",
        "moe.renormalize": True,  # norm_topk_prob True by default; :545
        "moe.routed_scaling": True,  # routed_scaling_factor 2.5 by default; :547
        "moe.shared_experts": "ungated",  # modeling_deepseek_v32.py:601
        "moe.dense_layers": "mlp_layer_types",  # modeling_deepseek_v32.py:621
    },
    {
        "type": "axk2",
        "config": DEFAULT,
        "attention.kind": "mla",  # modeling_axk2.py:545 kv_a_proj_with_mqa
        # modeling_axk2.py:563 yarn_apply_mscale: default RoPE, no mscale
        "attention.scale": "qk_head_dim",
        # modeling_axk2.py:564 an indexer in every layer; :267 its RoPE on halves
        "attention.indexer": "halves",
        # modeling_axk2.py:541 q_gate_proj in q_b_proj's place; :601 it reads
        # cat([q_resid, q_compressed]); :667 the output x sigmoid(gate)
        "attention.latent_query_gate": "normed+raw",
        # modeling_axk2.py:87-101 GatedRMSNorm; :679-684 input_layernorm gated in every layer,
        # post_attention_layernorm only where mlp_layer_types says sparse
        "norm.gated": "attn_in:dense/moe,mlp_in:moe",
        "rope.interleaved": True,  # modeling_axk2.py:615, no config flag
        # modeling_axk2.py:307-311 sigmoid, + e_score_correction_bias; n_group None
        "moe.router": "sigmoid_then_topk+bias",
        "moe.renormalize": True,  # norm_topk_prob True by default; :318
        "moe.routed_scaling": True,  # routed_scaling_factor 2.5 by default; :319
        "moe.shared_experts": "ungated",  # modeling_axk2.py:408
        "moe.dense_layers": "mlp_layer_types",  # modeling_axk2.py:678
    },
    {
        "type": "glm_moe_dsa",
        "config": DEFAULT,
        "attention.kind": "mla",  # modeling_glm_moe_dsa.py:339 kv_a_proj_with_mqa
        # modeling_glm_moe_dsa.py:357 yarn_apply_mscale: default RoPE, no mscale
        "attention.scale": "qk_head_dim",
        # modeling_glm_moe_dsa.py:232 the indexer's RoPE on interleaved pairs; :359-360 every
        # layer "full" by default (index_topk_freq 1)
        "attention.indexer": "pairs",
        "rope.interleaved": True,  # modeling_glm_moe_dsa.py:405, no config flag
        # modeling_glm_moe_dsa.py:497-498 sigmoid, + e_score_correction_bias; n_group 1
        "moe.router": "sigmoid_then_topk+bias",
        "moe.renormalize": True,  # norm_topk_prob True by default; :516
        "moe.routed_scaling": True,  # routed_scaling_factor 2.5 by default; :518
        "moe.shared_experts": "ungated",  # modeling_glm_moe_dsa.py:572
        "moe.dense_layers": "mlp_layer_types",  # modeling_glm_moe_dsa.py:592
    },
    {
        "type": "glm4_moe",
        "config": DEFAULT,
        # attention_bias False by default; o_proj modeling_glm4_moe.py:208 bias=False
        # use_qk_norm False by default (modeling_glm4_moe.py:209-212)
        "rope.partial": True,  # configuration_glm4_moe.py:123 0.5; modeling_glm4_moe.py:77-79
        # n_group 1: no group-limited choice; modeling_glm4_moe.py:290-311
        "moe.router": "sigmoid_then_topk+bias",
        "moe.renormalize": True,  # norm_topk_prob True by default; modeling_glm4_moe.py:313
        # routed_scaling_factor 1.0 by default
        "moe.shared_experts": "ungated",  # modeling_glm4_moe.py:391, 401
        "moe.dense_layers": "first_k_dense_replace",  # modeling_glm4_moe.py:412
    },
    {
        "type": "gpt_oss",
        "config": "openai/gpt-oss-20b",
        "attention.qkv_bias": True,  # fixture attention_bias true; modeling_gpt_oss.py:281-287
        "attention.o_bias": True,  # modeling_gpt_oss.py:290
        "attention.sliding_window": "per_layer",  # fixture layer_types; modeling_gpt_oss.py:292
        "mlp.bias": True,  # modeling_gpt_oss.py:76,78 gate_up_proj_bias / down_proj_bias
        "rope.type": "yarn",  # fixture rope_scaling.rope_type yarn
        "moe.router": "topk_then_softmax",  # modeling_gpt_oss.py:128-129
        # modeling_gpt_oss.py:82-87 experts: gate = rows 0::2, up = rows 1::2, gate.clamp(max=7),
        # up.clamp(+-7), gate * sigmoid(1.702 gate) * (up + 1) (7 and 1.702 fixed at :79-80)
        "moe.clamped_glu": "interleaved, up + 1",
        "moe.dense_layers": "none",  # every layer GptOssMLP
        "attention.sinks": True,  # modeling_gpt_oss.py:293 a learned logit per head
    },
    {
        "type": "phimoe",
        "config": DEFAULT,
        "norm.kind": "layer",  # modeling_phimoe.py:538 nn.LayerNorm
        "norm.affine": "weight+bias",
        # modeling_phimoe.py:472-489 sparsemixer (:349-440): masked top-2 with jitter threshold
        "moe.router": "sparsemixer",
        "moe.dense_layers": "none",  # every layer PhimoeSparseMoeBlock
    },
    {
        "type": "mellum",
        "config": DEFAULT,
        "attention.qk_norm": "per_head",  # modeling_mellum.py:237
        # configuration_mellum.py:112-113 all layers full_attention (window unused)
        "moe.router": "softmax_then_topk",  # modeling_mellum.py:335-336
        "moe.renormalize": True,  # configuration_mellum.py:101 True; modeling_mellum.py:337
        # configuration_mellum.py:114-115 mlp_layer_types all "sparse"; modeling_mellum.py:379
        "moe.dense_layers": "mlp_layer_types",
    },
    {
        "type": "afmoe",
        "config": DEFAULT,
        "attention.qk_norm": "per_head",  # modeling_afmoe.py:346-347, :366-367
        # modeling_afmoe.py:348 gate_proj, :394 output * sigmoid(gate_states) before o_proj
        "attention.output_gate_proj": "sigmoid",
        # configuration_afmoe.py:103-105 every 4th layer full; modeling_afmoe.py:343-344
        "attention.sliding_window": "per_layer",
        "norm.placement": "sandwich",  # modeling_afmoe.py:415-420, :442-459
        "rope.type": "default/none",  # modeling_afmoe.py:370 RoPE only in sliding layers
        # modeling_afmoe.py:158-160 sigmoid, the block's expert_bias (:222, :229) shifts the choice
        "moe.router": "sigmoid_then_topk+bias",
        "moe.renormalize": True,  # modeling_afmoe.py:162-163
        "moe.shared_experts": "ungated",  # modeling_afmoe.py:232, :236
        "moe.dense_layers": "num_dense_layers",  # modeling_afmoe.py:423
    },
    {
        "type": "cohere2_moe",
        "config": DEFAULT,
        # configuration_cohere2_moe.py:140-150 pattern 4; modeling_cohere2_moe.py:285
        "attention.sliding_window": "per_layer",
        # rms_norm_eps None by default (configuration :126): modeling_cohere2_moe.py:356-360
        # Cohere2MoeLayerNorm, which subtracts the mean (:68-82)
        "norm.kind": "layer",
        "norm.placement": "parallel",  # modeling_cohere2_moe.py:399-400
        # modeling_cohere2_moe.py:319-320 RoPE only if sliding (force_rope only for dense layers)
        "rope.type": "default/none",
        "rope.interleaved": True,  # modeling_cohere2_moe.py:239, 451
        "embeddings.tied": True,  # configuration_cohere2_moe.py:110
        "moe.router": "topk_then_softmax",  # modeling_cohere2_moe.py:152-154 (softmax default)
        # num_shared_experts 0 by default (configuration :118): no shared expert
        # configuration_cohere2_moe.py:154-156 mlp_layer_types all sparse (first_k_dense 0)
        "moe.dense_layers": "mlp_layer_types",
        "scales": "logits=config.logit_scale",  # modeling_cohere2_moe.py:632
    },
    {
        "type": "exaone_moe",
        "config": DEFAULT,
        "attention.qk_norm": "per_head",  # modeling_exaone_moe.py:160
        "attention.sliding_window": "per_layer",  # configuration_exaone_moe.py:130-133
        "rope.type": "default/none",  # modeling_exaone_moe.py:184-185 RoPE only when sliding
        # modeling_exaone_moe.py:243-259 sigmoid + e_score_correction_bias, n_group 1
        "moe.router": "sigmoid_then_topk+bias",
        "moe.renormalize": True,  # configuration_exaone_moe.py:118; modeling :261
        "moe.routed_scaling": True,  # routed_scaling_factor 2.5; modeling_exaone_moe.py:264
        "moe.shared_experts": "ungated",  # modeling_exaone_moe.py:318-319, 328
        # configuration_exaone_moe.py:124-126 mlp_layer_types from first_k_dense_replace (1),
        # and modeling_exaone_moe.py:338 reads the list
        "moe.dense_layers": "mlp_layer_types",
    },
    {
        "type": "ernie4_5_moe",
        "config": DEFAULT,
        # use_bias False by default (configuration_ernie4_5_moe.py:108): no projection biases
        # modeling_ernie4_5_moe.py:142-143, 172-173 interleaved RoPE, no config flag
        "rope.interleaved": True,
        "embeddings.tied": True,  # configuration_ernie4_5_moe.py:106
        # modeling_ernie4_5_moe.py:359-365 softmax, top-k on probs + moe_statics bias, gather,
        # divide by clamp(sum, norm_min)
        "moe.router": "softmax_then_topk+bias",
        "moe.renormalize": True,
        "moe.shared_experts": "ungated",  # modeling_ernie4_5_moe.py:379-392
        # modeling_ernie4_5_moe.py:406-409 MoE iff (i + 1) % moe_layer_interval == 0 and
        # moe_layer_start_index <= i <= moe_layer_end_index
        "moe.dense_layers": "moe_layer_interval",
    },
    {
        "type": "minimax_m2",
        "config": DEFAULT,
        # modeling_minimax_m2.py:303 q_norm = RMSNorm(num_attention_heads * head_dim)
        "attention.qk_norm": "full_width",
        # modeling_minimax_m2.py:58-62 sigmoid, + e_score_correction_bias (held by the block,
        # :114, passed in :121), gather, /= sum
        "moe.router": "sigmoid_then_topk+bias",
        "moe.renormalize": True,
        "moe.dense_layers": "none",  # modeling_minimax_m2.py:358 every layer sparse
    },
    {
        "type": "minimax_m3_vl_text",
        "config": DEFAULT,
        # modeling_minimax_m3_vl.py:431 q_norm = RMSNorm(head_dim), on each head
        "attention.qk_norm": "per_head",
        "norm.kind": "rms+1",  # modeling_minimax_m3_vl.py:162 output * (1.0 + weight)
        # modeling_minimax_m3_vl.py:241-245 sigmoid, + e_score_correction_bias, top-k, gather,
        # /= sum; :265 the routed sum x routed_scaling_factor
        "moe.router": "sigmoid_then_topk+bias",
        "moe.renormalize": True,
        "moe.routed_scaling": True,
        "moe.shared_experts": "ungated",  # :255 shared_experts, added at :266 without a gate
        # :219-225 _apply_gate: gate, up = chunk(2), clamped at swiglu_limit, (up + 1.0) *
        # gate * sigmoid(gate * swiglu_alpha); the shared expert's forward alike (:180-184)
        "moe.clamped_glu": "halves, up + 1",
        "moe.dense_layers": "mlp_layer_types",  # :652 sparse iff mlp_layer_types[i] == "sparse"
        # rotary_dim (config) is not read: :305 partial_rotary_factor from rope_parameters
    },
    {
        "type": "granitemoe",
        "config": DEFAULT,
        # modeling_granitemoe.py:283 scaling = config.attention_multiplier
        "attention.scale": "attention_multiplier",
        # :457 embedding, :368/:372 residual, :620 logits multipliers
        "scales": "embedding=config.embedding_multiplier; logits=1.0 / config.logits_scaling; "
        "residual=config.residual_multiplier",
        "moe.router": "topk_then_softmax",  # modeling_granitemoe.py:141-142
        "moe.dense_layers": "none",  # modeling_granitemoe.py:348 every layer block_sparse_moe
    },
]


# -- helpers shared by the tests and benchmarks/feature_accuracy.py ---------------------------

_SPECIAL_KEYS = {"type", "config", "overrides", "unresolved", "bugs"}


def expected_features(entry: dict[str, Any]) -> dict[str, Value]:
    """Every catalogue feature of ``entry``: the baseline with the entry's own labels on top."""
    unknown = set(entry) - _SPECIAL_KEYS - set(BASELINE)
    if unknown:
        raise KeyError(f"{entry['type']}: unknown label keys {sorted(unknown)}")
    return {name: entry.get(name, base) for name, base in BASELINE.items()}


def expected_unresolved(entry: dict[str, Any]) -> tuple[str, ...]:
    """Every delta substring the entry expects: per-feature ``Unresolved`` and ``unresolved``."""
    reasons = [v.reason for v in expected_features(entry).values() if isinstance(v, Unresolved)]
    return tuple(dict.fromkeys([*reasons, *entry.get("unresolved", ())]))


def delta_texts(spec: Any) -> list[str]:
    return [f"{d.what} {d.where} {d.detail}" for d in spec.unresolved]


def reported(spec: Any, reason: str) -> bool:
    return any(reason in text for text in delta_texts(spec))


def detected_features(spec: Any, entry: dict[str, Any]) -> dict[str, Value]:
    """The detector's catalogue values, with ``Unresolved`` where an expected delta was reported."""
    from onboard.analysis.features import feature_values

    values: dict[str, Value] = dict(feature_values(spec))
    for name, label in expected_features(entry).items():
        if isinstance(label, Unresolved) and reported(spec, label.reason):
            values[name] = label
    return values


def source_for(entry: dict[str, Any]) -> Any:
    """The ``ModelSource`` of the entry's config (a fixture, or a default config written out).

    ``load_source`` reads config.json into memory, so the temporary folder can go at once.
    """
    from onboard.source import load_source

    with tempfile.TemporaryDirectory(prefix="onboard-labels-") as tmp:
        if entry["config"] == DEFAULT:
            from tests.new_types import default_config_dir

            folder = default_config_dir(entry["type"], Path(tmp), **entry.get("overrides", {}))
            return load_source(str(folder))
        from tests.hub_cache import fixture_config

        path = fixture_config(entry["config"])
        config = json.loads(path.read_text())
        if "auto_map" not in config:
            return load_source(str(path))
        # The labels were read from transformers' own modeling file, not from the checkpoint's
        # remote code (which the fixture folder does not carry): analyse it as transformers does
        # without trust_remote_code.
        del config["auto_map"]
        copy = Path(tmp) / "config.json"
        copy.write_text(json.dumps(config))
        return load_source(str(copy))
