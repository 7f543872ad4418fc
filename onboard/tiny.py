"""Shrink a real config.json to a tiny one that keeps every layer kind.

The probe and the parity run both need a model small enough to build in milliseconds but with
the same structure as the real one: every distinct per-layer signature survives (a sliding and a
full layer, in the order the real model has them, except that a hybrid's first kept layer is an
attention layer), windows stay smaller than the test prompt so
they are exercised, and MHA stays MHA, MQA stays MQA. Hybrids whose config class derives the
layer kinds from other keys (Bamba's attn_layer_indices, Jamba's periods and offsets, NemotronH's
hybrid_override_pattern) get those keys rewritten for the kept layers.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onboard.spec import LEADING_DENSE_KEYS
from onboard.tiny_patterns import block_types, restate_pattern

# 96 rather than 64: sqrt(96) is not a round number, so a rounded embedding scale shows.
# 6 heads of 16: onnxruntime's GroupQueryAttention needs head sizes that are multiples of 16.
TINY_HIDDEN = 96
TINY_INTERMEDIATE = 128
TINY_HEADS = 6
# Heads to retry with when HF cannot run 6 (CodeGen splits its heads into 4 groups).
TINY_HEADS_FALLBACK = 8
TINY_HEAD_DIM = 16
TINY_VALUE_HEAD_DIM = 8  # value heads narrower than TINY_HEAD_DIM stay narrower
TINY_VOCAB = 256
# How far a padded or unpadded second vocabulary size sits from the tiny vocab_size
TINY_VOCAB_PAD = 16
_VOCAB_SUFFIX = "vocab_size"
_VOCAB_KEYS = frozenset({"vocab_size", "vocab_size_per_layer_input"})
# A *vocab_size key within this share of vocab_size is a second size of the same vocabulary
_VOCAB_VARIANT_SPAN = 0.125
TINY_MAX_POSITIONS = 128
TINY_SLIDING_WINDOW = 4  # smaller than the parity prompt, so the window is exercised
# Keys a dynamic mask leaves unmasked per row (Doge): fewer than the prompt, so the cut runs
KEEP_WINDOW_KEY = "keep_window_size"
TINY_KEEP_WINDOW = 5
# PhiMoE's sparsemixer margin: wide enough that tokens mix experts within it, so it is checked
ROUTER_MARGIN_KEY = "router_jitter_noise"
TINY_ROUTER_MARGIN = 0.3
# A clamped GLU's limit (MiniMax-M3's swiglu_limit), low enough that the tiny model's perturbed
# gate and up values cross it, so the clamp changes what parity and the spec check compare
GLU_LIMIT_KEY = "swiglu_limit"
TINY_GLU_LIMIT = 0.5
# How many of the last layers reuse earlier layers' keys and values (Gemma 3n)
KV_SHARED_KEY = "num_kv_shared_layers"
TINY_POSITION_SCALE_SPAN = 4  # Ministral 3's original_max_position_embeddings, likewise
# The RoPE key by which Ministral 3 and Mistral 4 scale the query by position.
POSITION_SCALE_KEY = "llama_4_scaling_beta"
# DeepSeek Sparse Attention's lightning indexer: heads enough that a key every head scores below
# zero (ReLU: 0) rarely ties another at a row's top-k cut; a head wider than the rotated part
# (qk_rope_head_dim); fewer keys kept than the parity prompt (9) and the spec check (9) have,
# so the selection is exercised in the prefill, the padded batches and every decode step
INDEX_TOPK_KEY = "index_topk"
TINY_INDEX_TOPK = 4
_TINY_INDEXER_SIZES = {"index_n_heads": 16, "index_head_dim": 24, INDEX_TOPK_KEY: TINY_INDEX_TOPK}
TINY_EXPERTS = 4
TINY_TOP_K = 2
TINY_EXPERT_WIDTH = 32
# Mamba2 heads (Bamba, GraniteMoeHybrid, FalconH1): they must split mamba_expand x hidden_size,
# and 8 does for both tiny widths.
TINY_MAMBA_HEADS = 8
# Mamba2's scan chunk (Bamba: mamba_chunk_size, NemotronH: chunk_size): shorter than the parity
# prompt, so the chunked scan and the recurrent step must agree
TINY_MAMBA_CHUNK = 4
_MAMBA2_CHUNK_KEYS = ("mamba_chunk_size", "chunk_size")
# Recurrent mixers' causal-convolution widths and state sizes do not grow with the model (3 or 4
# taps, states of 16 to 128 in every checkpoint): a config asking for more than these bounds
# gets them, so millions of taps cannot keep the probe busy for hours (the fuzz's LFM2 with
# conv_L_cache=3000000). Real values pass through; the generated code reads the config's.
_RECURRENT_SIZE_BOUNDS = {
    "conv_L_cache": 16,
    "conv_kernel": 16,
    "mamba_d_conv": 16,
    "linear_conv_kernel_dim": 16,
    "state_size": 256,
    "ssm_state_size": 256,
    "mamba_d_state": 256,
}
# Gated DeltaNet (Qwen3-Next, Qwen3.5): key heads, value heads (a multiple of them, as in the
# real checkpoints, so the key heads' sharing is exercised) and two head sizes that differ
_LINEAR_ATTENTION_SIZES = {
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 24,
}
# Mamba2 heads, head size and groups, by the field names transformers uses (NemotronH: the second)
_MAMBA2_KEYS = (
    ("mamba_n_heads", "mamba_d_head", "mamba_n_groups"),
    ("mamba_num_heads", "mamba_head_dim", "n_groups"),
)
# ... and in a pure Mamba-2 model, which has no attention heads to tell them from
_MAMBA2_SSM_KEYS = (("num_heads", "head_dim", "n_groups"),)
# MoE and MLA sizes, by the field names transformers uses (first found wins).
_EXPERT_COUNT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
# Top-k goes by several names (Ernie 4.5: moe_k, Hunyuan: moe_topk); never more than the experts.
_TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "moe_k")
_TINY_SIZES = {
    "moe_intermediate_size": TINY_EXPERT_WIDTH,
    "shared_expert_intermediate_size": TINY_EXPERT_WIDTH,
    # NemotronH; wider than the experts, so its key is told from moe_intermediate_size x
    # n_shared_experts by the tiny model's values
    "moe_shared_expert_intermediate_size": TINY_EXPERT_WIDTH + 16,
    "shared_intermediate_size": TINY_EXPERT_WIDTH,  # Granite MoE Hybrid's shared_mlp
    "ffn_dim": TINY_INTERMEDIATE,  # OPT
    "n_inner": TINY_INTERMEDIATE,  # GPT-2 (None: 4 x hidden_size)
    "dff": TINY_INTERMEDIATE,  # CTRL
    "block_ff_dim": TINY_INTERMEDIATE,  # LFM2's config class takes it as intermediate_size
    "ffn_hidden_size": TINY_INTERMEDIATE,  # LongcatFlash's names for the two widths
    "expert_ffn_hidden_size": TINY_EXPERT_WIDTH,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 16,
    "v_head_dim": 16,
}

# Widths that equal hidden_size in most checkpoints (OPT projects embeddings in and out only when
# word_embed_proj_dim differs): shrunk with it when they equal it, so the tiny model keeps that.
_HIDDEN_ALIASES = ("word_embed_proj_dim",)

# The decoder layer count; most configs store num_hidden_layers, LongcatFlash stores num_layers
# (its num_hidden_layers is a property, 2 x num_layers).
_LAYER_COUNT_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")

# Config scalars some models multiply into embeddings, residuals, attention or logits. Real
# configs often hold 1.0, which would hide where (or whether) HF applies them: the tiny config
# gives each present key its own value, so the analysis can tell them apart. The generated code
# reads the real values from the config.
MULTIPLIER_KEYS = (
    "embedding_multiplier",
    "residual_multiplier",
    "attention_multiplier",
    "logits_scaling",
    "logit_scale",
    "scale_emb",
    "scale_depth",
    "output_multiplier",
    "embedding_scale",  # HRM
)
_TINY_MULTIPLIERS = (1.7, 0.55, 0.35, 2.9, 0.45, 3.7, 1.3, 0.65, 2.3)

# Per-layer lists whose entries make a layer's signature (and are subsampled together).
PER_LAYER_KEYS = ("layer_types", "no_rope_layers", "mlp_layer_types")
# List-valued keys that are not per layer even when their length happens to match.
_NOT_PER_LAYER = frozenset({"architectures", "eos_token_id", "bad_words_ids", "suppress_tokens"})
PER_LAYER_CONFIG = "per_layer_config"
# The layer-type labels of attention layers (any other label is a recurrent mixer)
ATTENTION_LABELS = frozenset({"full_attention", "sliding_attention", "attention"})
_TOKEN_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id")


@dataclass(frozen=True)
class TinyConfig:
    config: dict[str, Any]  # a config.json dict for the tiny model
    layer_indices: tuple[int, ...]  # which real layers the tiny layers stand for


def shrink_config(
    config: Mapping[str, Any],
    layer_types: list[str] | None,
    layer_classes: list[str] | None = None,
    *,
    tiny_heads: int = TINY_HEADS,
    attention: bool = True,
    aliases: Mapping[str, str] | None = None,
    pinned: Mapping[str, Any] | None = None,
) -> TinyConfig:
    """A tiny config.json dict with the structure of ``config``.

    ``layer_types`` is the real per-layer list as transformers' config class computes it (it may
    be derived from ``use_sliding_window``, ``sliding_window_pattern`` and similar fields).
    ``layer_classes`` describes each real layer as ``"dense|<classes>"`` or ``"moe|<classes>"``,
    read from a meta-device build of the real model, so layers that differ only in their MLP
    (DeepSeek's first dense layers) are kept too. ``attention`` False: a pure state-space model,
    which gets no attention or MLP sizes (Mamba-2 calls its SSM heads num_heads and head_dim).
    ``aliases`` is the config class's ``attribute_map`` (the name its code reads -> the key
    config.json stores): sizes shrunk only where present are read under their alias too
    (Bailing's num_expert_group is n_group), and every tiny size is copied back to its alias,
    so the tiny config.json holds no stale real size. ``pinned`` holds the values the config
    class's validator accepts alone (config_pins: ZAYA's top-1 routing), which stay.
    """
    stored = _stored_aliases(config, aliases or {})
    shrunk_if_present = {n: k for n, k in stored.items() if n not in _SET_ALWAYS}
    config = {**config, **{name: config[key] for name, key in shrunk_if_present.items()}}
    tiny = copy.deepcopy(dict(config))
    heads = _int(config.get("num_attention_heads"), 1)
    kv_heads = _int(config.get("num_key_value_heads"), heads)
    tiny_hidden = TINY_HIDDEN * tiny_heads // TINY_HEADS  # heads of TINY_HEAD_DIM either way
    tiny.update(
        hidden_size=tiny_hidden,
        vocab_size=TINY_VOCAB,
        max_position_embeddings=TINY_MAX_POSITIONS,
        torch_dtype="float32",
        use_cache=True,
    )
    if "is_decoder" in config:  # an encoder's causal LM is a decoder only with it (BERT's)
        tiny["is_decoder"] = True
    if attention:
        tiny.update(
            intermediate_size=TINY_INTERMEDIATE,
            num_attention_heads=tiny_heads,
            num_key_value_heads=_tiny_kv_heads(heads, kv_heads, tiny_heads),
        )
        _shrink_head_lists(tiny, config, heads, tiny_heads)
    tiny.pop("dtype", None)
    if _int(config.get("vocab_size_per_layer_input"), 0) > 0:  # Gemma 3n's per-layer table
        tiny["vocab_size_per_layer_input"] = TINY_VOCAB
    _shrink_vocab_variants(tiny, config)
    if "intermediate_size" in config and config["intermediate_size"] is None:
        tiny["intermediate_size"] = None  # HF derives it (GPT-Neo: 4 x hidden_size)
    real_hidden = config.get("hidden_size")
    for key in _HIDDEN_ALIASES:
        if real_hidden is not None and config.get(key) == real_hidden:
            tiny[key] = tiny_hidden
    original = _original_max_positions(config)
    if rope_parameters(tiny).get(POSITION_SCALE_KEY) is not None:
        # Ministral 3 scales q by log(1 + floor(position / original)): a tiny original makes
        # the parity prompt and the spec check reach positions where the scale is not 1.
        rope_parameters(tiny)["original_max_position_embeddings"] = TINY_POSITION_SCALE_SPAN
        original = 0
    if original >= TINY_MAX_POSITIONS:
        # RoPE scaling types check the original context against the scaled one.
        real = _int(config.get("max_position_embeddings"), 2 * original)
        tiny["max_position_embeddings"] = min(real, 2 * original)
    if config.get("head_dim") is not None and attention:
        tiny["head_dim"] = TINY_HEAD_DIM
    _shrink_mrope_sections(tiny)
    rotary_dim = config.get("rotary_dim")
    if isinstance(rotary_dim, int):
        # GPT-J rotates the first rotary_dim of each head: keep that fraction, even
        hidden = _int(config.get("hidden_size", config.get("n_embd")), 0)
        real_heads = _int(config.get("num_attention_heads", config.get("n_head")), 1)
        share = rotary_dim / (_int(config.get("head_dim"), 0) or hidden // real_heads or 1)
        tiny["rotary_dim"] = max(2, round(share * TINY_HEAD_DIM / 2) * 2)
    if config.get("sliding_window") is not None:
        tiny["sliding_window"] = TINY_SLIDING_WINDOW
    if config.get(KEEP_WINDOW_KEY) is not None:
        tiny[KEEP_WINDOW_KEY] = TINY_KEEP_WINDOW
    if config.get(ROUTER_MARGIN_KEY) is not None:
        tiny[ROUTER_MARGIN_KEY] = TINY_ROUTER_MARGIN
    if config.get(GLU_LIMIT_KEY) is not None:
        tiny[GLU_LIMIT_KEY] = TINY_GLU_LIMIT
    global_local = expand_attention_types(config.get("attention_types"))
    if global_local is not None and config.get("window_size") is not None:
        tiny["window_size"] = TINY_SLIDING_WINDOW  # GPT-Neo's local layers
    _remap_token_ids(tiny)
    moe_layers = any(c.startswith("moe|") for c in layer_classes or ())
    _shrink_moe_and_mla(tiny, heads, kv_heads, moe_layers=moe_layers)
    _keep_narrower_values(tiny, config)
    _whole_rotary_pairs(tiny)
    _distinct_multipliers(tiny)

    _shrink_mamba2(tiny, _MAMBA2_KEYS if attention else _MAMBA2_SSM_KEYS)
    _cap(tiny, _RECURRENT_SIZE_BOUNDS)
    _shrink_linear_attention(tiny)
    count_key = _layer_count_key(config, layer_classes)
    # NemotronH derives the count from its layer list: config.json may not store it
    num_layers = _int(config.get(count_key), 0) or len(layer_classes or layer_types or ()) or 1
    layer_types = layer_types or block_types(config, num_layers)
    per_layer = _per_layer_lists(tiny, layer_types, num_layers)
    if global_local is not None and len(global_local) == num_layers:
        per_layer["attention_types"] = global_local
    by_layer = _per_layer_dict(tiny, num_layers)
    signature_lists = dict(per_layer)
    if by_layer:
        signature_lists["__per_layer_config__"] = [str(by_layer.get(i)) for i in range(num_layers)]
    if layer_classes is not None and len(layer_classes) == num_layers:
        signature_lists["__classes__"] = list(layer_classes)
    shared = _int(config.get(KV_SHARED_KEY), 0)
    if shared > 0:  # the last layers reuse earlier layers' keys and values (Gemma 3n)
        signature_lists["__kv_shared__"] = [i >= num_layers - shared for i in range(num_layers)]
    indices = _attention_first(
        _representative_layers(signature_lists, num_layers), per_layer.get("layer_types")
    )
    for key, values in per_layer.items():
        tiny[key] = [values[i] for i in indices]
    if "attention_types" in per_layer:  # GPT-Neo: [[kinds, repeats], ...], once over the kept
        tiny["attention_types"] = [[tiny["attention_types"], 1]]
    if by_layer:  # keyed by layer index: the kept layers' new indices
        tiny[PER_LAYER_CONFIG] = {
            str(new): by_layer[old] for new, old in enumerate(indices) if old in by_layer
        }
    tiny[count_key] = len(indices)
    if shared > 0:  # the kept layers from the shared tail, which stays the tail
        tiny[KV_SHARED_KEY] = sum(1 for i in indices if i >= num_layers - shared)
    if count_key != "num_hidden_layers":  # derived from count_key by the config class
        tiny.pop("num_hidden_layers", None)
    if "max_window_layers" in tiny:
        tiny["max_window_layers"] = len(indices)
    if layer_classes is not None and len(layer_classes) == num_layers:
        _remap_dense_layers(tiny, [layer_classes[i] for i in indices])
    kept = per_layer.get("layer_types")
    restate_pattern(tiny, config, indices, [kept[i] for i in indices] if kept else None)
    for name, key in stored.items():  # both names say the same: no stale real size
        if name not in tiny:
            continue
        if name in config and tiny[name] == config[name] and tiny.get(key) != config[key]:
            tiny[name] = tiny[key]  # the stored key was shrunk (MiniMax-M2's num_local_experts)
        else:
            tiny[key] = tiny[name]
    tiny.update({key: value for key, value in (pinned or {}).items() if key in tiny})
    return TinyConfig(tiny, indices)


# Sizes the tiny config sets whatever the real one holds, so aliases need not be read for
# them; and the real heads must not be: GPT-BigCode's n_head beside its derived kv heads of 1
# would make the tiny model MQA, and its multi_query flag would no longer show
_SET_ALWAYS = frozenset(
    {
        "hidden_size",
        "vocab_size",
        "max_position_embeddings",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        *_LAYER_COUNT_KEYS,
    }
)


def _stored_aliases(config: Mapping[str, Any], aliases: Mapping[str, str]) -> dict[str, str]:
    """The aliased names whose value config.json stores only under the other key: left
    there, the shrinker would miss them (16 expert groups of 4 tiny experts)."""
    return {
        name: key
        for name, key in aliases.items()
        if key in config and name not in config and isinstance(name, str)
    }


def _layer_count_key(config: Mapping[str, Any], layer_classes: list[str] | None) -> str:
    """The key that stores the decoder layer count: the one matching the real model's layers."""
    present = [k for k in _LAYER_COUNT_KEYS if _int(config.get(k), 0) > 0]
    if layer_classes:
        matching = [k for k in present if config[k] == len(layer_classes)]
        present = matching or present
    return present[0] if present else "num_hidden_layers"


def _shrink_moe_and_mla(
    tiny: dict[str, Any], heads: int, kv_heads: int, *, moe_layers: bool = False
) -> None:
    """``moe_layers``: the real model builds MoE blocks, which get TINY_EXPERTS even when the
    config has one expert (HunYuan's default), so the tiny router's choice tells variants apart."""
    least = 0 if moe_layers else 1
    experts_key = next((k for k in _EXPERT_COUNT_KEYS if _int(tiny.get(k), 0) > least), None)
    if experts_key:
        tiny[experts_key] = TINY_EXPERTS
        if isinstance(tiny.get("n_group"), int) and tiny["n_group"] > 1:
            tiny["n_group"], tiny["topk_group"] = 2, 1  # still group-limited, on 2 + 2 experts
    for key in _TOP_K_KEYS:
        if _int(tiny.get(key), 0) > 0:
            # top-2 of the 4 tiny experts; without shrunk experts, never more than before
            tiny[key] = TINY_TOP_K if experts_key else min(TINY_TOP_K, tiny[key])
    for key, value in _TINY_SIZES.items():
        if _int(tiny.get(key), 0) > 0:
            tiny[key] = value
    for key, value in _TINY_INDEXER_SIZES.items():
        if _int(tiny.get(key), 0) > 0:
            tiny[key] = value
    if _int(tiny.get("kv_lora_rank"), 0) > 0:  # MLA: full heads, head_dim is the RoPE part
        tiny["num_key_value_heads"] = tiny["num_attention_heads"]
        tiny["head_dim"] = tiny["qk_rope_head_dim"]
        if "qk_head_dim" in tiny:  # stored, not derived, in LongcatFlash
            tiny["qk_head_dim"] = tiny["qk_nope_head_dim"] + tiny["qk_rope_head_dim"]


def _keep_narrower_values(tiny: dict[str, Any], config: Mapping[str, Any]) -> None:
    """Value heads narrower than the query/key heads (MiMo-V2-Flash: v_head_dim 128 against
    head_dim 192) stay narrower in the tiny model, so parity sees o_proj's width and the
    value cache's; latent attention (kv_lora_rank) keeps its own sizes."""
    if _int(config.get("kv_lora_rank"), 0) > 0 or "head_dim" not in tiny:
        return
    value, key = _int(config.get("v_head_dim"), 0), _int(config.get("head_dim"), 0)
    if value > 0 and key > 0 and value != key:
        tiny["v_head_dim"] = TINY_VALUE_HEAD_DIM


def _whole_rotary_pairs(tiny: dict[str, Any]) -> None:
    """HF rotates ``2 * ceil(int(head_dim * factor) / 2)`` channels; the tiny head keeps that
    an even ``int(head_dim * factor)`` (MiMo-V2-Flash's 0.334 turns 64 of 192 channels, but
    would turn 6 of 16, where int() gives 5), so the factor is rounded to whole pairs of the
    tiny head where the tiny product is odd."""
    dicts = [tiny, rope_parameters(tiny)]
    dicts += [v for v in rope_parameters(tiny).values() if isinstance(v, dict)]
    for place in dicts:
        factor = place.get("partial_rotary_factor")
        if not is_number(factor) or not 0 < factor < 1:
            continue
        rotated = int(TINY_HEAD_DIM * factor)
        if rotated % 2:
            place["partial_rotary_factor"] = (rotated + 1) / TINY_HEAD_DIM


def is_number(value: Any) -> bool:
    """An int or float config value (``True`` is an int to Python, not a number here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def multiplier_defaults(hf_config: Any) -> dict[str, float]:
    """Multiplier keys the config class defines even when config.json omits them (a value
    derived by a property, like MiniCPM3's ``logits_scaling``, is not a key)."""
    found = {
        key: getattr(hf_config, key, None)
        for key in MULTIPLIER_KEYS
        if not isinstance(getattr(type(hf_config), key, None), property)
    }
    return {k: v for k, v in found.items() if is_number(v)}


def _distinct_multipliers(tiny: dict[str, Any]) -> None:
    for key, value in zip(MULTIPLIER_KEYS, _TINY_MULTIPLIERS, strict=True):
        if is_number(tiny.get(key)):
            tiny[key] = value


def _remap_dense_layers(tiny: dict[str, Any], classes: list[str]) -> None:
    """Rewrite the fields that say which layers are dense, for the kept layers' new indices."""
    dense = [i for i, c in enumerate(classes) if c.startswith("dense|")]
    if not dense or len(dense) == len(classes):
        return
    for key in LEADING_DENSE_KEYS:
        if key in tiny:
            tiny[key] = len(dense)
    if "mlp_only_layers" in tiny or "decoder_sparse_step" in tiny:
        tiny["mlp_only_layers"] = dense
        tiny["decoder_sparse_step"] = 1


def _shrink_mamba2(tiny: dict[str, Any], keys: tuple[tuple[str, str, str], ...]) -> None:
    """Mamba2 heads that split the tiny width. Bamba's, GraniteMoeHybrid's and FalconH1's config
    classes check that heads x head size is mamba_expand x hidden_size (FalconH1: mamba_d_ssm
    when set); NemotronH's width is heads x head size alone, 8192 by default."""
    width = _int(tiny.get("mamba_expand", tiny.get("expand")), 2) * tiny["hidden_size"]
    for heads, head_dim, groups in keys:
        if _int(tiny.get(heads), 0) == 0:
            continue
        tiny[heads] = TINY_MAMBA_HEADS
        if tiny.get(head_dim) != "auto":
            tiny[head_dim] = width // TINY_MAMBA_HEADS
        if _int(tiny.get(groups), 1) > 1:
            tiny[groups] = 2  # still grouped; 2 divides the heads
    if tiny.get("mamba_d_ssm") is not None:
        tiny["mamba_d_ssm"] = width
    if any(_int(tiny.get(heads), 0) for heads, _, _ in keys):
        # the scan crosses chunks in the prompt
        _cap(tiny, dict.fromkeys(_MAMBA2_CHUNK_KEYS, TINY_MAMBA_CHUNK))


def _cap(tiny: dict[str, Any], bounds: Mapping[str, int]) -> None:
    """Lower each present key to its bound; smaller values stay."""
    for key, bound in bounds.items():
        if _int(tiny.get(key), 0) > bound:
            tiny[key] = bound


def linear_attention_sizes(*, shared: bool) -> dict[str, int]:
    """Tiny gated DeltaNet sizes: value heads sharing key heads when ``shared``, else as many."""
    sizes = dict(_LINEAR_ATTENTION_SIZES)
    if not shared:
        sizes["linear_num_value_heads"] = sizes["linear_num_key_heads"]
    return sizes


def _shrink_linear_attention(tiny: dict[str, Any]) -> None:
    if all(_int(tiny.get(key), 0) for key in _LINEAR_ATTENTION_SIZES):
        shared = tiny["linear_num_value_heads"] != tiny["linear_num_key_heads"]
        tiny.update(linear_attention_sizes(shared=shared))


def _int(value: Any, default: int) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    )


def _shrink_mrope_sections(tiny: dict[str, Any]) -> None:
    """M-RoPE (Qwen2.5-VL) splits each head's rotated half into temporal, height and width
    sections that sum to the rotated half (head_dim / 2, or head_dim * partial_rotary_factor / 2
    where only part of each head turns: GLM-4V turns half of it): the tiny head keeps their
    proportions (16, 24, 24 -> 2, 3, 3; 8, 12, 12 at a factor of 0.5 -> 1, 2, 1), each at least
    1 while the rotated half has room for one each, so a sabotage that swaps or resizes them
    still shows. HF splits the frequencies by the sections exactly (``split_with_sizes``).
    RoPE kept per layer kind (Cohere Compass' sliding layers) has its sections per kind."""
    top = rope_parameters(tiny)
    for rope in (top, *(v for v in top.values() if isinstance(v, dict))):
        _shrink_sections(rope, tiny)


def _shrink_sections(rope: dict[str, Any], tiny: Mapping[str, Any]) -> None:
    sections = rope.get("mrope_section")
    if (
        not isinstance(sections, list)
        or not sections
        or not all(isinstance(s, int) for s in sections)
    ):
        return
    # Interleaved sections (Qwen3-VL, Qwen3.5) pick frequencies by index and are not split, so
    # they keep the whole tiny head's proportions: over a partial rotary's few frequencies,
    # sections that sum to them would lay the axes out as chunks do, and the layout could not
    # be told apart
    interleaved = rope.get("mrope_interleaved") is True
    half = (
        TINY_HEAD_DIM // 2 if interleaved else tiny_rotary_half({**tiny, "rope_parameters": rope})
    )
    total = sum(sections)
    least = 1 if half >= len(sections) else 0
    tiny_sections = [max(least, round(s * half / total)) for s in sections]
    tiny_sections[-1] += half - sum(tiny_sections)
    while tiny_sections[-1] < least:  # rounding up overshot: take from the largest
        tiny_sections[tiny_sections.index(max(tiny_sections))] -= 1
        tiny_sections[-1] += 1
    rope["mrope_section"] = tiny_sections


def tiny_sections(sections: Sequence[int]) -> list[int]:
    """Sections of a whole head's frequencies shrunk, as above, to a tiny head's (mobius' test
    configs have heads of TINY_HEAD_DIM too)."""
    rope: dict[str, Any] = {"mrope_section": [int(s) for s in sections]}
    _shrink_sections(rope, {})
    return rope["mrope_section"]


def tiny_rotary_half(tiny: Mapping[str, Any]) -> int:
    """How many frequencies the tiny head turns: half its rotated channels (TINY_HEAD_DIM times
    the config's ``partial_rotary_factor``, in its RoPE dict or at the top, as HF reads it)."""
    factor = rope_parameters(tiny).get("partial_rotary_factor", tiny.get("partial_rotary_factor"))
    if not isinstance(factor, int | float) or isinstance(factor, bool) or not 0 < factor <= 1:
        factor = 1.0
    return int(TINY_HEAD_DIM * factor) // 2


def rope_parameters(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config.json's RoPE dict (``rope_parameters``, or the older ``rope_scaling``), itself, so
    edits reach the config; {} when there is none."""
    for key in ("rope_parameters", "rope_scaling"):
        rope = config.get(key)
        if isinstance(rope, dict):
            return rope
    return {}


def _original_max_positions(config: Mapping[str, Any]) -> int:
    return _int(rope_parameters(config).get("original_max_position_embeddings"), 0)


def _tiny_kv_heads(heads: int, kv_heads: int, tiny_heads: int) -> int:
    if kv_heads >= heads:
        return tiny_heads
    if kv_heads == 1:
        return 1
    return 2


def _shrink_head_lists(
    tiny: dict[str, Any], config: Mapping[str, Any], heads: int, tiny_heads: int
) -> None:
    """A head count per layer that repeats the model's (Laguna's default
    ``num_attention_heads_per_layer``) shrinks with it: left real, the tiny layers would keep
    every real head. Lists that vary are left as they are, and the analysis reads what they
    build."""
    for key, value in config.items():
        if "heads" in key and isinstance(value, list) and value and set(value) == {heads}:
            tiny[key] = [tiny_heads] * len(value)


def _shrink_vocab_variants(tiny: dict[str, Any], config: Mapping[str, Any]) -> None:
    """Second sizes of the same vocabulary (Inkling's ``unpadded_vocab_size``, the head's rows
    within the padded embedding) shrink with it, keeping their side of ``vocab_size``: left at
    their real value, the tiny model would be built with a huge head, and transformers' own
    weight conversions (re-padding the head to ``vocab_size``) fail on a negative size."""
    vocab = _int(config.get("vocab_size"), 0)
    for key, value in config.items():
        if key in _VOCAB_KEYS or not key.endswith(_VOCAB_SUFFIX) or vocab <= 0:
            continue
        size = _int(value, 0)
        if size <= 0 or abs(size - vocab) > vocab * _VOCAB_VARIANT_SPAN:
            continue  # another vocabulary (audio codes, token types), not this one's size
        sign = (size > vocab) - (size < vocab)
        tiny[key] = TINY_VOCAB + sign * TINY_VOCAB_PAD


def _remap_token_ids(tiny: dict[str, Any]) -> None:
    """Special token ids past the tiny vocabulary would break embeddings: move them to the top.
    A negative id (old configs write ``pad_token_id: -1`` for none) is dropped: transformers
    refuses to save a model whose generation config holds one."""
    spare = iter(range(TINY_VOCAB - 1, 0, -1))
    remapped: dict[int, int] = {}

    def fix(token: Any) -> Any:
        if isinstance(token, int) and token >= TINY_VOCAB:
            if token not in remapped:
                remapped[token] = next(spare)
            return remapped[token]
        return token

    for key in _TOKEN_ID_KEYS:
        value = tiny.get(key)
        if isinstance(value, list):
            tiny[key] = [fix(v) for v in value if not is_negative_id(v)] or None
        else:
            tiny[key] = None if is_negative_id(value) else fix(value)
        if tiny[key] is None:
            del tiny[key]


def is_negative_id(token: Any) -> bool:
    return isinstance(token, int) and not isinstance(token, bool) and token < 0


def expand_attention_types(value: Any) -> list[str] | None:
    """GPT-Neo's ``[[["global", "local"], 12]]``: one kind per layer."""
    if not isinstance(value, list):
        return None
    layers: list[str] = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], int)):
            return None
        kinds, repeats = item
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            return None
        layers += kinds * repeats
    return layers


def _per_layer_lists(
    tiny: Mapping[str, Any], layer_types: list[str] | None, num_layers: int
) -> dict[str, list[Any]]:
    """Lists with one entry per layer: the known keys, and any other list that long (Gemma 3n's
    activation_sparsity_pattern), which must shrink with the layers."""
    lists = {
        key: list(value)
        for key, value in tiny.items()
        if isinstance(value, list)
        and len(value) == num_layers
        and num_layers > 1
        and key not in _NOT_PER_LAYER
    }
    if layer_types is not None and len(layer_types) == num_layers:
        lists["layer_types"] = list(layer_types)
    return lists


def _per_layer_dict(tiny: Mapping[str, Any], num_layers: int) -> dict[int, Any]:
    """Gemma 4's ``per_layer_config``: overrides keyed by layer index ("05": {...})."""
    table = tiny.get(PER_LAYER_CONFIG)
    if not isinstance(table, Mapping):
        return {}
    found = {}
    for key, value in table.items():
        if str(key).isdigit() and int(key) < num_layers:
            found[int(key)] = value
    return found


def _attention_first(indices: tuple[int, ...], kinds: list[Any] | None) -> tuple[int, ...]:
    """A hybrid's kept layers with an attention layer first: the analysis reads attention, the
    MLP and the norms on layer 0, and the recurrent kinds on the layers that have them."""
    if not kinds:
        return indices
    attention = [i for i in indices if str(kinds[i]) in ATTENTION_LABELS]
    if not attention or attention[0] == indices[0]:
        return indices
    return (attention[0], *(i for i in indices if i != attention[0]))


def _representative_layers(per_layer: Mapping[str, list[Any]], num_layers: int) -> tuple[int, ...]:
    """First layer of each distinct signature, in order; at least two layers when there are."""
    seen: dict[tuple[Any, ...], int] = {}
    for i in range(num_layers):
        signature = tuple(str(values[i]) for values in per_layer.values())
        seen.setdefault(signature, i)
    indices = sorted(seen.values())
    if len(indices) < 2 and num_layers >= 2:
        indices.append(next(i for i in range(num_layers) if i not in indices))
    return tuple(sorted(indices))
