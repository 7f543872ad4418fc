"""AutoModel's refusal of stacks run in cycles (HRM), by name, until its generator runs them."""

from __future__ import annotations

from onboard.spec import TextDecoderSpec


def recurrence_blockers(text: TextDecoderSpec) -> list[str]:
    """The recurrence named with its stacks and config keys (the evidence is under
    text.recurrence)."""
    spec = text.recurrence
    if spec is None:
        return []
    low, high = spec.stacks
    return [
        f"stacks run in cycles (text.recurrence): {low} {spec.inner_key} times on "
        f"{low} state + {high} state (the first from {spec.initial}), then {high}, for "
        f"{spec.outer_key} cycles, each call with its own KV-cache slots "
        f"({spec.layers_key} layers a stack, each stack ending in {spec.stack_norm}): "
        "the generated AutoModel decoder runs one stack of layers once"
    ]
