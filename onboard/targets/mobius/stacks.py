"""Stacks run in cycles (HRM) in a generated mobius text model.

``self.layers`` holds the low stack and ``self.high_layers`` the high one, each of
``config.<layers_key>`` layers, reused by every call; the forward runs the cycles and gives
each call its own past key/values, in the order HF fills its cache slots, so CausalLMTask's
``num_hidden_layers`` inputs are the slots. The config reads the counts by their HF keys.
"""

from __future__ import annotations

from onboard.spec import ArchitectureSpec
from onboard.targets.mobius.settings import ExtraField, Setting, why

# The generated text model's attributes (templates/mobius/parts/text_model.py.j2 names them)
HIGH_LAYERS = "high_layers"  # the high stack's layers
INITIAL_STATE = "low_state_init"  # the low state's learned start


def recurrence_settings(spec: ArchitectureSpec) -> tuple[list[Setting], list[ExtraField]]:
    """The three counts the generated forward reads, each a field of the generated config."""
    recurrence = spec.text.recurrence
    if recurrence is None:
        return [], []
    keys = (recurrence.layers_key, recurrence.outer_key, recurrence.inner_key)
    what = ("layers in each stack", "cycles of both stacks", "low-stack calls in each cycle")
    settings = [
        Setting(key, f"config.{key}", why(phrase, spec, "text.recurrence"))
        for key, phrase in zip(keys, what, strict=True)
    ]
    return settings, [ExtraField(key, "int", "1") for key in keys]


def recurrence_renames(spec: ArchitectureSpec) -> list[tuple[str, str]]:
    """The high stack's layers and the initial state under the generated model's names."""
    recurrence = spec.text.recurrence
    if recurrence is None:
        return []
    return [
        (f"model.{recurrence.stacks[1]}.layers.", f"model.{HIGH_LAYERS}."),
        (f"model.{recurrence.initial}", f"model.{INITIAL_STATE}"),
    ]


def recurrence_reason(spec: ArchitectureSpec) -> str:
    recurrence = spec.text.recurrence
    assert recurrence is not None
    return why(
        f"two stacks in cycles: per config.{recurrence.outer_key}, the low stack "
        f"config.{recurrence.inner_key} times on low + high, then the high stack on high + low, "
        "each stack's layers then a norm; the low state starts at a learned vector, the head "
        "reads the high state; every call has its own past key/values",
        spec,
        "text.recurrence",
    )
