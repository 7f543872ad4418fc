"""The clamped sigmoid GLU of MiniMax-M3's experts in mobius: mobius' MLP computes
``act(gate) * up`` and its GPT-OSS expert is private with the limit and alpha fixed, so the
experts (and a shared expert computing the same) are a generated component, one fused gate_up
projection split as the spec says. The limit and alpha come from the config where HF reads
them, else they are the constants HF's code fixes."""

from __future__ import annotations

from onboard.spec import ArchitectureSpec, ClampedGluSpec, TextDecoderSpec
from onboard.targets.mobius.settings import ExtraField, Setting, why

# The generated config's fields (mobius' base config has swiglu_limit, read from the HF key
# of that name)
LIMIT_FIELD = "swiglu_limit"
ALPHA_FIELD = "swiglu_alpha"


def model_glu(text: TextDecoderSpec) -> ClampedGluSpec | None:
    """The GLU the generated component computes, for the experts (the routed experts', else the
    shared one's: one component serves both; parity fails should they split or shift
    differently) or the dense layers."""
    moe_glu = text.moe.block_glu if text.moe else None
    return moe_glu or (text.mlp.glu if text.mlp else None)


def glu_settings(spec: ArchitectureSpec, extra: list[ExtraField]) -> list[Setting]:
    """The limit and alpha as config fields, where HF reads them from its config."""
    glu = model_glu(spec.text)
    if glu is None:
        return []
    moe = spec.text.moe
    path = moe.block_glu_path if moe is not None and moe.block_glu else "text.mlp.glu"
    settings = []
    if glu.limit_key:
        reason = why("experts clamp gate and up at this limit", spec, path)
        settings.append(Setting(LIMIT_FIELD, f"config.{glu.limit_key}", reason))
    if glu.alpha_key:
        extra.append(ExtraField(ALPHA_FIELD, "float", "1.0"))
        reason = why("experts' gate: g * sigmoid(alpha * g)", spec, path)
        settings.append(Setting(ALPHA_FIELD, f"config.{glu.alpha_key}", reason))
    return settings


def glu_blockers(spec: ArchitectureSpec) -> list[str]:
    """Clamped-GLU experts the generated component does not hold: with biases, or each expert
    kept (in, out) (GPT-OSS's, whose GLU the spec does say)."""
    moe = spec.text.moe
    if moe is None or moe.glu is None:
        return []
    biased = any(
        name.endswith((".experts.gate_up_proj_bias", ".experts.down_proj_bias"))
        for name, _ in spec.weights.tensors
    )
    held = (("biases", biased), ("each expert (in, out)", moe.fused_transposed))
    kept = [what for what, found in held if found]
    if not kept:
        return []
    evidence = spec.evidence_for("text.moe.glu")
    at = f"{evidence[0].detail.partition(':')[0]} at {evidence[0].where}" if evidence else "experts"
    return [
        f"clamped GLU experts with {' and '.join(kept)} ({at}): the generated clamped-GLU "
        "experts are bias-free, each expert (out, in)"
    ]


def glu_reason(glu: ClampedGluSpec) -> str:
    """One docstring line for the generated model."""
    offset = f" + {glu.up_offset:g}" if glu.up_offset else ""
    split = "alternate rows" if glu.layout == "interleaved" else "halves"
    return (
        f"experts compute (clip(up, -limit, limit){offset}) * g * sigmoid(alpha * g), "
        f"g = min(gate, limit), gate and up the {split} of one fused projection"
    )
