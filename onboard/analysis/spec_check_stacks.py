"""The spec check's run of ``StackRecurrenceSpec``: HRM's two stacks in cycles.

The interpreter runs the layers under ``model.layers.*`` names; each stack is run by naming its
own layers so for the length of the call, so the layer code is the one the spec check proves
module by module for a single stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from onboard.analysis.layout import hf_module
from onboard.spec import StackRecurrenceSpec


def run_recurrence(interpreter: Any, embeddings: Any, layers: Callable[[Any], Any]) -> Any:
    """The high state after the last cycle, from the embeddings: ``layers(x)`` runs the layers
    named ``model.layers.*`` in ``interpreter.params``."""
    spec: StackRecurrenceSpec = interpreter.text.recurrence
    decoder = hf_module(interpreter.model.model)
    config = interpreter.config
    outer, inner = getattr(config, spec.outer_key), getattr(config, spec.inner_key)
    states = [initial_state(decoder, spec, embeddings), embeddings]
    for which, _slots in spec.calls(outer, inner):
        stack = spec.stacks[which]
        with _named_as_layers(interpreter, decoder.get_submodule(f"{stack}.layers")):
            out = layers(stack_input(states[which], states[1 - which]))
        states[which] = interpreter.norm(out, f"{stack}.{spec.stack_norm}.")
    return states[1]


def initial_state(decoder: Any, spec: StackRecurrenceSpec, embeddings: Any) -> Any:
    """The low state's start: the decoder's learned vector at every position."""
    return decoder.get_parameter(spec.initial).expand_as(embeddings)


def stack_input(own: Any, other: Any) -> Any:
    """A stack reads its own state plus the other's."""
    return own + other


@contextmanager
def _named_as_layers(interpreter: Any, stack: Any) -> Iterator[None]:
    own = {f"model.layers.{n}": p for n, p in stack.named_parameters()}
    saved = interpreter.params
    interpreter.params = {**saved, **own}
    try:
        yield
    finally:
        interpreter.params = saved
