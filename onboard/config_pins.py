"""Config values a transformers config class's validator pins, so the tiny config keeps them.

transformers' strict config classes check themselves in ``validate_*`` methods; some refuse any
value but one (ZAYA's ``if self.num_experts_per_tok != 1: raise ValueError(...)``). The shrinker
sets such sizes to its own tiny values (top-2 of 4 experts), which the class then rejects: read
from the validator's source, a pinned value is kept. Only the plain form ``if self.key !=
constant: raise`` is read; any other check is the class's to enforce, and its message says
which.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

_VALIDATOR_PREFIX = "validate"


def validator_pins(config_class: type) -> dict[str, Any]:
    """``{key: value}`` for each ``if self.key != value: raise`` in the validators the class and
    its transformers bases define (a base's pin holds unless the subclass overrides it)."""
    pins: dict[str, Any] = {}
    for klass in reversed(config_class.__mro__):
        for name, method in vars(klass).items():
            if name.startswith(_VALIDATOR_PREFIX) and inspect.isfunction(method):
                pins.update(_pins_in(method))
    return pins


def _pins_in(method: Any) -> dict[str, Any]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError):  # no source (a compiled or generated method)
        return {}
    return dict(pin for node in ast.walk(tree) if (pin := _pin(node)) is not None)


def _pin(node: ast.AST) -> tuple[str, Any] | None:
    """``(key, value)`` when ``node`` is ``if self.key != <constant>:`` whose body raises."""
    if not isinstance(node, ast.If) or not any(isinstance(s, ast.Raise) for s in node.body):
        return None
    test = node.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.NotEq)
        and isinstance(test.left, ast.Attribute)
        and isinstance(test.left.value, ast.Name)
        and test.left.value.id == "self"
        and isinstance(test.comparators[0], ast.Constant)
    ):
        return None
    return test.left.attr, test.comparators[0].value
