"""Upsert whole top-level class definitions (a library's per-model config classes).

A class onboard wrote earlier is replaced where it stands; a new one goes at the end of the
module, two blank lines below the code above it, as ruff formats a top-level definition.
"""

from __future__ import annotations

import libcst as cst

from onboard.codemods._errors import CodemodError
from onboard.codemods._source import parse_module


def upsert_classes(source: str, classes: str) -> str:
    """``source`` with every top-level class of ``classes`` in it, by name."""
    module = parse_module(source)
    body = list(module.body)
    for new in _classes_of(parse_module(classes)):
        index = next(
            (i for i, node in enumerate(body) if _class_name(node) == new.name.value), None
        )
        if index is None:
            body.append(new.with_changes(leading_lines=(cst.EmptyLine(), cst.EmptyLine())))
        else:
            body[index] = new.with_changes(leading_lines=body[index].leading_lines)
    edited = module.with_changes(body=body)
    return source if edited.deep_equals(module) else edited.code


def defined_classes(source: str) -> tuple[str, ...]:
    """The names of the top-level classes ``source`` defines, in order."""
    body = parse_module(source).body
    return tuple(node.name.value for node in body if isinstance(node, cst.ClassDef))


def _classes_of(module: cst.Module) -> list[cst.ClassDef]:
    classes = [node for node in module.body if isinstance(node, cst.ClassDef)]
    if len(classes) != len(module.body):
        raise CodemodError("expected only class definitions to upsert")
    return classes


def _class_name(node: cst.CSTNode) -> str | None:
    return node.name.value if isinstance(node, cst.ClassDef) else None
