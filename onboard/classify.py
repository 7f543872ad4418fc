"""Decide what kind of architecture a config describes, and say why.

Rules follow the measured landscape of transformers' causal-LM types (see
``shared/notes/transformers-landscape.md``): they read the text side of the config (the config
itself, ``text_config``, ``thinker_config.text_config`` or ``decoder``), the Auto mappings of the
installed transformers, and, as a cross-check, class names in the HF modeling source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from onboard.errors import BadInputError, UnsupportedKindError


class Kind(StrEnum):
    DENSE = "dense"
    MOE = "moe"
    VLM = "vlm"
    HYBRID = "hybrid"
    HYBRID_MOE = "hybrid_moe"
    SSM = "ssm"
    OMNI = "omni"
    AUDIO_LM = "audio_lm"
    ENCODER_LM = "encoder_lm"
    ENCODER_DECODER = "encoder_decoder"
    DRAFT = "draft"  # a speculative-decoding assistant that runs on a target model's states
    # Several transformer stacks, each its own sub-config, and no one decoder (BLT's byte
    # encoder, global transformer over patches and byte decoder)
    MULTI_STACK = "multi_stack"
    NON_LM = "non_lm"


IN_SCOPE = frozenset({Kind.DENSE, Kind.MOE, Kind.VLM, Kind.HYBRID, Kind.HYBRID_MOE, Kind.SSM})

# What a config.json describing one transformer stack holds (sub-configs hold them instead in a
# model made of several stacks)
_STACK_KEYS = ("hidden_size", "num_hidden_layers")
_TEXT_PATHS = (("text_config",), ("thinker_config", "text_config"), ("decoder",))
_VISION_KEYS = ("vision_config", "vq_config", "vision_tower_config", "visual")
_AUDIO_KEYS = ("audio_config", "audio_encoder_config", "speech_config")
_EXPERT_COUNT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
_LAYER_KIND_KEYS = (
    "layer_types",
    "layers_block_type",
    "block_types",
    "attn_layers",
    "hybrid_override_pattern",
)
_MIXER_KINDS = frozenset({"linear_attention", "mamba", "conv", "recurrent", "ssm"})
_ATTENTION_KINDS = frozenset(
    {"full_attention", "sliding_attention", "chunked_attention", "attention", "hybrid"}
)
_MIXER_FIELD = re.compile(
    r"^(mamba_|ssm_|linear_num_|linear_\w*head_dim|linear_conv_kernel_dim$|conv_L_cache$"
    r"|attn_layer_period$|attn_layer_indices$|full_attn_idxs$|hybrid_layer_ids$|n_mamba_heads$)"
)
_SSM_FIELD_PAIRS = (
    ("state_size", "conv_kernel"),
    ("attention_hidden_size", "rescale_every"),
    ("qk_dim_factor", "num_blocks"),
)
_SOURCE_MOE = re.compile(r"^class (\w*(SparseMoeBlock|Experts|TopKRouter))\b", re.M)
_SOURCE_MIXER = re.compile(
    r"^class (\w*(Mamba\w*Mixer|GatedDeltaNet|ShortConv|LightningAttention|RglruLayer))\b", re.M
)


@dataclass(frozen=True)
class Classification:
    kind: Kind
    reasons: tuple[str, ...]
    text_path: tuple[str, ...] = ()  # where the text decoder's config lives inside config.json
    text_backbone: Kind | None = None  # for vlm / omni: the kind of the language model
    warnings: tuple[str, ...] = ()

    @property
    def in_scope(self) -> bool:
        return self.kind in IN_SCOPE

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "reasons": list(self.reasons),
            "text_path": list(self.text_path),
            "text_backbone": str(self.text_backbone) if self.text_backbone else None,
            "warnings": list(self.warnings),
        }


def classify(config: Mapping[str, Any], modeling_source: str | None = None) -> Classification:
    """Classify a config.json dict; ``modeling_source`` (HF modeling file text) cross-checks it."""
    from transformers.models.auto import modeling_auto as auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_type = config["model_type"]
    if model_type not in CONFIG_MAPPING_NAMES and "auto_map" not in config:
        import transformers

        raise BadInputError(
            f"model_type {model_type!r} is not known to transformers {transformers.__version__} "
            "and config.json has no auto_map pointing at remote code"
        )
    causal = auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    lm_scope = (
        set(causal)
        | set(auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
        | set(auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES)
    )
    has_remote_causal = "AutoModelForCausalLM" in (config.get("auto_map") or {})

    if config.get("is_encoder_decoder"):
        return Classification(Kind.ENCODER_DECODER, ("config.json: is_encoder_decoder is true",))
    if model_type in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES and model_type in causal:
        return Classification(
            Kind.ENCODER_LM, (f"{model_type} is a masked-LM (BERT-like) model in transformers",)
        )
    if config.get("attn_type") == "bi":  # XLNet
        why = "config.json: attn_type is 'bi': bidirectional attention over permuted orders"
        return Classification(Kind.ENCODER_LM, (why,))
    if "backbone_hidden_size" in config:  # Gemma 4's assistants
        why = (
            "config.json: backbone_hidden_size is the width of the target model whose states "
            "this speculative-decoding assistant reads"
        )
        return Classification(Kind.DRAFT, (why,))
    if model_type not in lm_scope and not has_remote_causal:
        return Classification(Kind.NON_LM, (_non_lm_reason(model_type, auto),))

    text_path, text = _text_side(config)
    stacks = _stack_sub_configs(config) if not text_path else ()
    if len(stacks) > 1:
        why = (
            f"config.json has no {_STACK_KEYS[0]}: its transformer stacks are the sub-configs "
            f"{', '.join(stacks)}, each with its own {' and '.join(_STACK_KEYS)}, and no one "
            "of them is the decoder"
        )
        return Classification(Kind.MULTI_STACK, (why,))
    vision = [k for k in _VISION_KEYS if k in config]
    audio = [k for k in _AUDIO_KEYS if k in config]
    backbone, reasons = _text_kind(text, prefix="text_config." if text_path else "")
    warnings = _source_cross_check(backbone, modeling_source)

    if vision or model_type in auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        why = f"vision sub-config {vision[0]!r}" if vision else "an image-text-to-text model"
        if audio:
            return Classification(
                Kind.OMNI, (f"{why} and audio sub-config {audio[0]!r}",), text_path, backbone
            )
        return Classification(Kind.VLM, (why, *reasons), text_path, backbone, warnings)
    if audio:
        return Classification(Kind.AUDIO_LM, (f"audio sub-config {audio[0]!r}",), text_path)
    return Classification(backbone, tuple(reasons), text_path, None, warnings)


def require_in_scope(classification: Classification) -> None:
    if not classification.in_scope:
        raise UnsupportedKindError(
            f"kind {classification.kind} is out of scope for onboard "
            f"({'; '.join(classification.reasons)}): it generates decoder-only language models"
        )


def _non_lm_reason(model_type: str, auto: Any) -> str:
    domains = {
        "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES": "vision",
        "MODEL_FOR_CTC_MAPPING_NAMES": "audio",
        "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES": "audio",
        "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES": "audio",
        "MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES": "text encoder",
        "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": "text encoder",
        "MODEL_FOR_TIME_SERIES_PREDICTION_MAPPING_NAMES": "time series",
    }
    for mapping, domain in domains.items():
        if model_type in getattr(auto, mapping, {}):
            return f"{model_type} is a {domain} model with no causal-LM head in transformers"
    return (
        f"{model_type} has no causal-LM, image-text-to-text or multimodal-LM head in transformers"
    )


def _text_side(config: Mapping[str, Any]) -> tuple[tuple[str, ...], Mapping[str, Any]]:
    for path in _TEXT_PATHS:
        node: Any = config
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping):
            return path, node
    return (), config


def _stack_sub_configs(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The sub-configs that each describe a transformer stack, where config.json itself
    describes none (no hidden_size, no layer count): a model made of several stacks. A config
    without either and without such sub-configs is malformed, which the size check says."""
    if any(k in config for k in _STACK_KEYS):
        return ()
    return tuple(
        key
        for key, value in config.items()
        if isinstance(value, Mapping) and all(value.get(k) is not None for k in _STACK_KEYS)
    )


def _text_kind(text: Mapping[str, Any], prefix: str) -> tuple[Kind, list[str]]:
    reasons: list[str] = []
    layer_kinds: set[str] = set()
    for key in _LAYER_KIND_KEYS:
        value = text.get(key)
        if isinstance(value, list | tuple):
            layer_kinds |= {str(v) for v in value}
        elif isinstance(value, str) and key == "hybrid_override_pattern":
            layer_kinds |= {"mamba" if c == "M" else "attention" for c in value if c in "M*"}
    mixers = sorted(layer_kinds & _MIXER_KINDS)
    mixer_fields = sorted(k for k in text if _MIXER_FIELD.match(k) and text[k] is not None)
    has_attention = bool(layer_kinds & _ATTENTION_KINDS) or (
        not layer_kinds and bool(text.get("num_attention_heads"))
    )
    ssm_pair = next((p for p in _SSM_FIELD_PAIRS if all(text.get(k) is not None for k in p)), None)
    if mixers:
        reasons.append(f"{prefix}layer kinds include {', '.join(mixers)}")
    elif mixer_fields:
        reasons.append(f"sequence-mixer fields {', '.join(prefix + f for f in mixer_fields[:3])}")
    elif ssm_pair:
        reasons.append(f"state-space fields {prefix}{ssm_pair[0]} and {prefix}{ssm_pair[1]}")
    sequence_mixer = bool(mixers or mixer_fields or ssm_pair)

    experts, expert_reason = _expert_count(text, prefix)
    is_moe = experts > 1
    mlp_kinds = {str(v) for v in text.get("mlp_layer_types") or []}
    if mlp_kinds & {"sparse", "moe", "hash_moe"}:
        is_moe, expert_reason = True, f"{prefix}mlp_layer_types has sparse layers"
    if text.get("is_moe") is False:
        is_moe, expert_reason = False, f"{prefix}is_moe is false"
    if expert_reason:
        reasons.append(expert_reason)

    if sequence_mixer and not has_attention:
        return Kind.SSM, reasons or ["no attention layers"]
    if sequence_mixer:
        return (Kind.HYBRID_MOE if is_moe else Kind.HYBRID), reasons
    if is_moe:
        return Kind.MOE, reasons
    reasons.append("attention in every layer, one MLP per layer (no experts)")
    return Kind.DENSE, reasons


def _expert_count(text: Mapping[str, Any], prefix: str) -> tuple[int, str]:
    best, reason = 0, ""
    for key in _EXPERT_COUNT_KEYS:
        value = text.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > best:
            best, reason = value, f"{prefix}{key} = {value}"
    ffn = text.get("ffn_config")
    if isinstance(ffn, Mapping) and isinstance(ffn.get("moe_num_experts"), int):
        value = ffn["moe_num_experts"]
        if value > best:
            best, reason = value, f"{prefix}ffn_config.moe_num_experts = {value}"
    return best, (reason if best > 1 else "")


def _source_cross_check(kind: Kind, source: str | None) -> tuple[str, ...]:
    if not source:
        return ()
    warnings = []
    moe = _SOURCE_MOE.search(source)
    if moe and kind in (Kind.DENSE, Kind.HYBRID):
        warnings.append(
            f"the modeling source defines {moe.group(1)} but this config has no experts; "
            "it is classified from the config"
        )
    mixer = _SOURCE_MIXER.search(source)
    if mixer and kind in (Kind.DENSE, Kind.MOE):
        warnings.append(
            f"the modeling source defines {mixer.group(1)} but this config lists no such layers"
        )
    return tuple(warnings)
