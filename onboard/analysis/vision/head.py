"""The VLM's own head: whether it scales or soft-caps the logits as its text backbone's causal LM
does.

The text backbone is analysed as a causal LM, whose class may scale the logits (``logit_scale``:
Cohere's) or soft-cap them (``final_logit_softcapping``: Gemma 2's). A VLM runs its own head on
the language model's last state and need not (Aya Vision's ``lm_head(hidden_states)`` over a
Cohere 2 text model, PaliGemma 2's over a Gemma 2 one): what the VLM computes decides, told by
its logits against its head on the same state. What the head leaves out stays on the vision
spec (``text_lm_scales``, ``text_lm_softcap``): a text-only model of the backbone computes it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from onboard.analysis.vision.parts import VLMParts
from onboard.spec import Evidence, TextDecoderSpec
from onboard.vision import TEXT_LM_EVIDENCE, VisionSpec


def vlm_head(
    model: Any, parts: VLMParts, input_ids: Any, text: TextDecoderSpec
) -> tuple[TextDecoderSpec, tuple[tuple[str, tuple[Evidence, ...]], ...]]:
    """``text`` without its logits scale and final soft-cap when the VLM's logits are its head's
    output as is."""
    import torch

    scale = text.scale_at("logits")
    if scale is None and text.final_logit_softcap is None:
        return text, ()
    with torch.no_grad():
        hidden = parts.module(model, "language_model")(input_ids=input_ids).last_hidden_state
        head = parts.module(model, "head")(hidden)
        logits = model(input_ids=input_ids).logits
    if not torch.allclose(logits, head, atol=1e-6):
        return text, ()
    from onboard.analysis.probe import source_location

    where = source_location(type(model).forward) or type(model).__name__
    evidence = []
    if scale is not None:
        text = dataclasses.replace(text, scales=tuple(s for s in text.scales if s.site != "logits"))
        without = f"without the text model's {scale.key}"
        evidence.append(("text.scales.logits", without))
    if text.final_logit_softcap is not None:
        text = dataclasses.replace(text, final_logit_softcap=None)
        evidence.append(("text.final_logit_softcap", "not soft-capped by final_logit_softcapping"))
    return text, tuple(
        (path, (Evidence("probe", where, f"the VLM's logits are {parts.head}(last state) {what}"),))
        for path, what in evidence
    )


def with_text_lm_head(
    vision: VisionSpec | None, causal_lm: TextDecoderSpec, vlm: TextDecoderSpec
) -> VisionSpec | None:
    """``vision`` with what the backbone's causal LM (``causal_lm``) applies to the logits and
    the VLM's head (``vlm``) leaves out."""
    if vision is None:
        return None
    return dataclasses.replace(
        vision,
        text_lm_scales=tuple(
            s for s in causal_lm.scales if s.site == "logits" and s not in vlm.scales
        ),
        text_lm_softcap=causal_lm.final_logit_softcap if vlm.final_logit_softcap is None else None,
    )


def text_lm_evidence(
    evidence: tuple[tuple[str, tuple[Evidence, ...]], ...], dropped: tuple[str, ...]
) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    """The causal LM's evidence for the ``dropped`` text paths, kept under ``vision.text_lm.``."""
    return tuple(
        (TEXT_LM_EVIDENCE + path.removeprefix("text."), items)
        for path, items in evidence
        if path in dropped
    )
