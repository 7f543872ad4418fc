"""The VLM's own head: whether it scales the logits as its text backbone's causal LM does.

The text backbone is analysed as a causal LM, whose class may scale the logits
(``logit_scale``: Cohere's). A VLM runs its own head on the language model's last state and
need not (Aya Vision's ``lm_head(hidden_states)`` over a Cohere 2 text model): what the VLM
computes decides, told by its logits against its head on the same state.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from onboard.analysis.vision.parts import VLMParts
from onboard.spec import Evidence, TextDecoderSpec


def vlm_logit_scale(
    model: Any, parts: VLMParts, input_ids: Any, text: TextDecoderSpec
) -> tuple[TextDecoderSpec, tuple[tuple[str, tuple[Evidence, ...]], ...]]:
    """``text`` without its logits scale when the VLM's logits are its head's output as is."""
    import torch

    scale = text.scale_at("logits")
    if scale is None:
        return text, ()
    with torch.no_grad():
        hidden = parts.module(model, "language_model")(input_ids=input_ids).last_hidden_state
        head = parts.module(model, "head")(hidden)
        logits = model(input_ids=input_ids).logits
    if not torch.allclose(logits, head, atol=1e-6):
        return text, ()
    from onboard.analysis.probe import source_location

    where = source_location(type(model).forward) or type(model).__name__
    evidence = Evidence(
        "probe",
        where,
        f"the VLM's logits are {parts.head}(last state) without the text model's {scale.key}",
    )
    kept = tuple(s for s in text.scales if s.site != "logits")
    return dataclasses.replace(text, scales=kept), (("text.scales.logits", (evidence,)),)
