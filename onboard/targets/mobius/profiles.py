"""What each mobius class computes for a dense decoder, as facts about mobius 0.1.0.

The generator subclasses the closest class and writes code only for the features it lacks, so it
must know, per class, which values of each structural feature the class can compute (through its
config or by construction). Values a class gets wrong are left out of its capabilities, with the
bug named in ``bugs``: the generator then overrides that feature instead of inheriting the bug.
Each entry was read from the 0.1.0 source and is checked by ``tests/targets/mobius/test_profiles``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onboard.spec import ArchitectureSpec

# Structural features (not config flags) and how a spec asks for them.
FEATURES = (
    "norm",  # rms, rms+1 (Gemma's 1 + w), layer, layer+1
    "placement",  # pre, sandwich, post
    "embedding_scale",  # none, sqrt_hidden
    "layer_dispatch",  # uniform, layer_types
    "sliding_window",  # none, uniform, per_layer
    "per_kind_rope",  # no, yes (a different theta for sliding layers)
    "attention_scale",  # head_dim, query_pre_attn_scalar
    "final_softcap",  # no, yes
    "mlp",  # gated, fused_gate_up, plain (up -> act -> down)
)


@dataclass(frozen=True)
class ClassProfile:
    class_name: str
    module: str
    config_class: str
    config_module: str
    can: dict[str, frozenset[str]]
    bugs: tuple[str, ...] = ()  # known bug ids (see bugs.py) behind missing capabilities
    # Config fields the class's own __init__ reads even when a generated text model replaces its
    # text model, with the expression the generated config falls back to.
    init_needs: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())


def _can(**overrides: set[str]) -> dict[str, frozenset[str]]:
    base = {
        "norm": {"rms"},
        "placement": {"pre"},
        "embedding_scale": {"none"},
        "layer_dispatch": {"uniform"},
        "sliding_window": {"none"},
        "per_kind_rope": {"no"},
        "attention_scale": {"head_dim"},
        "final_softcap": {"no"},
        "mlp": {"gated"},
    }
    base.update(overrides)
    return {k: frozenset(v) for k, v in base.items()}


_BASE = "mobius.models.base"
_CONFIGS = "mobius._configs"

PROFILES: dict[str, ClassProfile] = {
    p.class_name: p
    for p in (
        ClassProfile(
            "CausalLMModel",
            _BASE,
            "CausalLMConfig",
            _CONFIGS,
            # TextModel builds a padding-only mask on the default EP (T9); the GQA path of the
            # cpu EP applies one uniform window, so windows are not a capability.
            _can(),
            bugs=("T9",),
        ),
        ClassProfile("QwenCausalLMModel", "mobius.models.qwen", "CausalLMConfig", _CONFIGS, _can()),
        ClassProfile(
            "Qwen3CausalLMModel", "mobius.models.qwen", "CausalLMConfig", _CONFIGS, _can()
        ),
        ClassProfile(
            "LayerNormCausalLMModel", _BASE, "CausalLMConfig", _CONFIGS, _can(norm={"layer"})
        ),
        ClassProfile(
            "FusedGateUpCausalLMModel",
            _BASE,
            "CausalLMConfig",
            _CONFIGS,
            _can(mlp={"fused_gate_up"}),
        ),
        ClassProfile(
            "GemmaCausalLMModel",
            "mobius.models.gemma",
            "CausalLMConfig",
            _CONFIGS,
            # embed scale is round(sqrt(hidden), 2), not sqrt(hidden) (M2)
            _can(norm={"rms+1"}),
            bugs=("M2",),
        ),
        ClassProfile(
            "Gemma2CausalLMModel",
            "mobius.models.gemma",
            "Gemma2Config",
            _CONFIGS,
            # layers slide by index parity, not config.layer_types (T7); embed scale rounded (M2)
            _can(
                norm={"rms+1"},
                placement={"sandwich"},
                attention_scale={"head_dim", "query_pre_attn_scalar"},
                final_softcap={"no", "yes"},
            ),
            bugs=("T7", "M2"),
        ),
        ClassProfile(
            "Gemma3CausalLMModel",
            "mobius.models.gemma3_text",
            "CausalLMConfig",
            _CONFIGS,
            # embed scale rounded to float16 (M2); query_pre_attn_scalar ignored (M1)
            _can(
                norm={"rms+1"},
                placement={"sandwich"},
                layer_dispatch={"uniform", "layer_types"},
                sliding_window={"none", "uniform", "per_layer"},
                per_kind_rope={"no", "yes"},
            ),
            bugs=("M1", "M2"),
            init_needs=(("rope_local_base_freq", "base.rope_local_base_freq or base.rope_theta"),),
        ),
        ClassProfile(
            "OLMo2CausalLMModel",
            "mobius.models.olmo",
            "CausalLMConfig",
            _CONFIGS,
            _can(placement={"post"}),
        ),
    )
}


def requirements(spec: ArchitectureSpec) -> dict[str, str]:
    """The value of every structural feature that ``spec`` needs."""
    text = spec.text
    norm = text.norm.kind + ("+1" if text.norm.weight_offset else "")
    kinds = text.distinct_layer_types
    if "sliding_attention" not in kinds or not text.sliding_window:
        window = "none"
    else:
        window = "uniform" if len(kinds) == 1 else "per_layer"
    thetas = {(r.rope_type, r.theta, r.partial_rotary_factor, r.scaling) for _, r in text.rope}
    return {
        "norm": norm,
        "placement": text.norm.placement,
        "embedding_scale": text.embedding_scale,
        "layer_dispatch": "layer_types" if len(kinds) > 1 else "uniform",
        "sliding_window": window,
        "per_kind_rope": "yes" if len(thetas) > 1 else "no",
        "attention_scale": "query_pre_attn_scalar" if text.attention.scale_key else "head_dim",
        "final_softcap": "yes" if text.final_logit_softcap else "no",
        "mlp": text.mlp.kind,
    }


def missing_features(profile: ClassProfile, needed: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """(feature, wanted value) for every feature the class cannot compute."""
    return tuple((f, needed[f]) for f in FEATURES if needed[f] not in profile.can[f])
