"""Both targets' refusal of stacks run in cycles (HRM), by name, until a generator runs them."""

from __future__ import annotations

from onboard.spec import TextDecoderSpec


def recurrence_blockers(text: TextDecoderSpec, target: str) -> list[str]:
    """The recurrence named with its stacks and config keys (the evidence is under
    text.recurrence); ``target`` says what that target's generated decoder runs instead."""
    spec = text.recurrence
    if spec is None:
        return []
    low, high = spec.stacks
    return [
        f"stacks run in cycles (text.recurrence): {low} {spec.inner_key} times on "
        f"{low} state + {high} state (the first from {spec.initial}), then {high}, for "
        f"{spec.outer_key} cycles, each call with its own KV-cache slots "
        f"({spec.layers_key} layers a stack, each stack ending in {spec.stack_norm}): "
        f"the generated {target} decoder runs one stack of layers once"
    ]
