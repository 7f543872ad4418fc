"""HF's attention kept whole, and the features of it that make the generator keep it.

The generated attention writes NeMo's forward (NeMo's fp32 RoPE, HF's attention dispatch) for
what the generator understands. An attention with a computation that forward does not write (a
position-dependent query scale, differential attention, a dynamic mask, sinks, a gate projection,
multi-head latent attention, ...) is instead HF's own module, forward included: the generated
class subclasses it and adds only AutoModel's backend and the packed-THD refusal, and the model
builds HF's rotary embedding, so every decoder layer gets exactly HF's position embeddings.
Subclassing HF's modules is AutoModel's own idiom (its ``qwen3``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.spec import ArchitectureSpec
from onboard.targets.automodel.hf_facts import Reason, cite
from onboard.targets.automodel.unwritten import unwritten

# RoPE types whose tables NeMo's LlamaRotaryEmbedding computes once, as HF does. ``dynamic`` and
# ``longrope`` recompute with the sequence length in HF: only HF's own rotary gives them.
NEMO_ROPE = frozenset({"default", "linear", "llama3", "yarn"})


@dataclass(frozen=True)
class KeptAttention:
    """HF's attention module kept whole (forward and rotary tables), because of ``because``."""

    because: tuple[Reason, ...]  # what HF's attention computes that NeMo's forward does not
    mla: bool = False  # multi-head latent attention among them (its compressed latent cache)

    def __str__(self) -> str:
        return "; ".join(map(str, self.because))


def attention_features(spec: ArchitectureSpec) -> tuple[Reason, ...]:
    """What the attention of ``spec`` computes that the generated NeMo forward does not write,
    each with where it was seen (empty: the generated forward writes all of it)."""
    text = spec.text
    found = [Reason(u.what(text), cite(spec, u.path)) for u in unwritten(text, "attention")]
    if (reordered_rope := text.reordered_rope()) is not None:
        kind, _ = reordered_rope
        found.append(
            Reason(
                f"RoPE frequencies reordered in {kind} layers",
                cite(spec, f"text.rope.{kind}"),
            )
        )
    if getattr(text, "rope_layers_key", None):
        found.append(
            Reason(f"RoPE only in the layers config.{text.rope_layers_key} marks", "config.json")
        )
    if getattr(text.attention, "yarn_mscale", False) and text.attention.mla is None:
        found.append(Reason("the attention scale multiplied by the YaRN mscale", "config.json"))
    for kind, rope in text.rope:
        if rope.rope_type is not None and rope.rope_type not in NEMO_ROPE:
            found.append(
                Reason(
                    f"RoPE type {rope.rope_type!r} of {kind} layers, which HF recomputes with "
                    "the sequence length",
                    "config.json:rope_parameters",
                )
            )
    return tuple(found)


def kept_attention(
    spec: ArchitectureSpec, mla: Reason | None, flagged: tuple[ArchitectureSpec, ...] = ()
) -> KeptAttention | None:
    """HF's attention kept whole for ``spec`` (``mla``: the latent attention's reason), or None
    when the generated forward writes all of it.

    ``flagged`` are the specs of the same code under other values of its config flags: a
    feature a flag switches on (Cohere's use_qk_norm) keeps HF's attention whole for every
    value, so the one generated class reads the flag as HF's does."""
    found = [mla] if mla else []
    for one in (spec, *flagged):
        found += (r for r in attention_features(one) if r.text not in {f.text for f in found})
    return KeptAttention(tuple(found), mla=mla is not None) if found else None


def kept_blockers(design: Any) -> tuple[str, ...]:
    """What keeps a design's HF attention from being kept whole: the tables the generated model
    would hand it are not HF's rotary embedding's own."""
    found = []
    if design.per_kind_rope:
        found.append(
            "RoPE tables per layer kind: the generated model builds HF's one rotary embedding "
            "for an attention kept whole"
        )
    if design.mrope:
        found.append(
            f"M-RoPE ({design.hf.rotary}): the generated model hands an attention kept whole "
            "1-D positions"
        )
    return tuple(found)
