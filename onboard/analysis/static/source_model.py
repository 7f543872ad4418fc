"""The parsed modeling file and the ``ast`` helpers the static readers share."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

from onboard.source import SourceFile
from onboard.spec import Evidence


@dataclass
class SourceModel:
    """The parsed modeling file: classes by name, and the file for citations."""

    file: SourceFile
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)

    @classmethod
    def parse(cls, file: SourceFile) -> SourceModel:
        tree = ast.parse(file.text)
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        return cls(file, tree, classes)

    def cite(self, node: ast.AST) -> Evidence:
        line = ast.get_source_segment(self.file.text, node) or ""
        return Evidence("source", f"{self.file.name}:{node.lineno}", " ".join(line.split())[:120])

    def method(self, class_name: str, name: str) -> ast.FunctionDef | None:
        """The class's method, or the one it inherits from a class of the file."""
        for owner in (class_name, *self.bases(class_name)):
            cls = self.classes.get(owner)
            found = next(
                (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
                if cls is not None
                else (),
                None,
            )
            if found is not None:
                return found
        return None

    def bases(self, class_name: str) -> tuple[str, ...]:
        """The file's classes ``class_name`` derives from, nearest first."""
        found: list[str] = []
        todo = [class_name]
        while todo:
            cls = self.classes.get(todo.pop(0))
            for base in cls.bases if cls is not None else ():
                name = base.id if isinstance(base, ast.Name) else None
                if name in self.classes and name not in found and name != class_name:
                    found.append(name)
                    todo.append(name)
        return tuple(found)

    def assignments(self, class_name: str) -> dict[str, ast.Assign]:
        """``self.<attr> = ...`` in ``__init__`` (first assignment of each attribute)."""
        return {attr: node for attr, (node, _) in self.guarded_assignments(class_name).items()}

    def guarded_assignments(
        self, class_name: str
    ) -> dict[str, tuple[ast.Assign, tuple[ast.expr, ...]]]:
        """Each ``self.<attr> = ...`` of ``__init__`` with the ``if`` tests it sits under."""
        init = self.method(class_name, "__init__")
        found: dict[str, tuple[ast.Assign, tuple[ast.expr, ...]]] = {}

        def visit(statements: list[ast.stmt], guards: tuple[ast.expr, ...]) -> None:
            for statement in statements:
                if isinstance(statement, ast.Assign):
                    for target in statement.targets:
                        if is_self_attr(target):
                            found.setdefault(target.attr, (statement, guards))
                elif isinstance(statement, ast.If):
                    visit(statement.body, (*guards, statement.test))
                    negated = ast.UnaryOp(op=ast.Not(), operand=statement.test)
                    visit(statement.orelse, (*guards, negated))
                elif isinstance(statement, ast.With | ast.For | ast.Try):
                    visit(statement.body, guards)

        if init is not None:
            visit(init.body, ())
        return found


def is_self_attr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def called_class(value: ast.AST) -> str | None:
    """``X(...)`` or ``nn.X(...)`` -> ``X`` (the first call found, e.g. inside a conditional)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                return func.id
            if isinstance(func, ast.Attribute):
                return func.attr
    return None


def name_of(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def call_of(value: ast.AST) -> ast.Call | None:
    return next((n for n in ast.walk(value) if isinstance(n, ast.Call)), None)


def keyword_value(call: ast.Call | None, name: str) -> ast.AST | None:
    if call is None:
        return None
    return next((k.value for k in call.keywords if k.arg == name), None)


def config_key(node: ast.AST | None) -> str | None:
    """``config.x`` or ``self.config.x`` -> ``x``."""
    if isinstance(node, ast.Attribute):
        base = node.value
        if isinstance(base, ast.Name) and base.id == "config":
            return node.attr
        if isinstance(base, ast.Attribute) and base.attr == "config":
            return node.attr
    return None


def first_tanh(scopes: Sequence[ast.AST]) -> ast.AST | None:
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and name_of(node.func) == "tanh":
                return node
    return None


def is_one(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in (1, 1.0) and node.value is not True


def mentions(node: ast.AST, name: str) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and name in n.attr)
        or (isinstance(n, ast.Name) and name in n.id)
        for n in ast.walk(node)
    )
