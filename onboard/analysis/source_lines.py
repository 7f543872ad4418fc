"""Point at the HF modeling source, so evidence reads ``modeling_x.py:63: <code>``.

Two lookups: a regex over lines (for operations such as ``1.0 + self.weight``) and an AST lookup
of ``self.<attr> = Call(...)`` in a class's ``__init__`` (for constructor arguments such as
``bias=config.attention_bias``, which say whether a flag is fixed or read from the config).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from onboard.source import SourceFile
from onboard.spec import Evidence


def _modeling_first(files: Iterable[SourceFile]) -> list[SourceFile]:
    return sorted(files, key=lambda f: (not f.name.startswith("modeling_"), f.name))


def find_line(files: Iterable[SourceFile], pattern: str) -> Evidence | None:
    """The first code line matching ``pattern`` (a regex) in the modeling file, else any file
    given. Comment lines are skipped: evidence is what the code does, not what it says."""
    regex = re.compile(pattern)
    for source in _modeling_first(files):
        for number, line in enumerate(source.text.splitlines(), start=1):
            if regex.search(line) and not line.lstrip().startswith("#"):
                return Evidence("source", f"{source.name}:{number}", line.strip()[:120])
    return None


_CONFIG_KEY = re.compile(r"config\.(\w+)$")


@dataclass(frozen=True)
class Assignment:
    """``self.<attr> = <call>`` found in a class's ``__init__``."""

    evidence: Evidence
    keywords: tuple[tuple[str, str], ...]  # keyword argument -> its source text
    value: ast.expr | None = None  # what is assigned

    def keyword(self, name: str) -> str | None:
        return dict(self.keywords).get(name)

    def config_key(self, name: str) -> str | None:
        """The config key keyword ``name`` reads (``bias=config.attention_bias``:
        attention_bias); None for a literal or another expression."""
        match = _CONFIG_KEY.search(self.keyword(name) or "")
        return match.group(1) if match else None


def init_assignment(files: Iterable[SourceFile], class_name: str, attr: str) -> Assignment | None:
    for source in _modeling_first(files):
        found = _find_assignment(source.name, source.text, class_name, attr)
        if found is not None:
            return found
    return None


def module_functions(files: Iterable[SourceFile], where: Evidence) -> dict[str, ast.FunctionDef]:
    """The module-level functions of the file ``where`` points into, by name."""
    source = next((f for f in files if where.where.startswith(f"{f.name}:")), None)
    tree = _parse(source.text) if source else None
    if tree is None:
        return {}
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


@lru_cache(maxsize=64)
def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _find_assignment(name: str, text: str, class_name: str, attr: str) -> Assignment | None:
    tree = _parse(text)
    if tree is None:
        return None
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == class_name):
            continue
        for node in ast.walk(cls):
            if not isinstance(node, ast.Assign):
                continue
            if any(_is_self_attr(t, attr) for t in node.targets):
                line = ast.get_source_segment(text, node) or ""
                call = node.value if isinstance(node.value, ast.Call) else None
                keywords = tuple(
                    (k.arg, ast.unparse(k.value)) for k in (call.keywords if call else ()) if k.arg
                )
                snippet = " ".join(line.split())[:120]
                evidence = Evidence("source", f"{name}:{node.lineno}", snippet)
                return Assignment(evidence, keywords, node.value)
    return None


def _is_self_attr(node: ast.expr, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def class_init(
    files: Iterable[SourceFile], class_name: str
) -> tuple[SourceFile, ast.FunctionDef] | None:
    """The file defining ``class_name`` and its ``__init__``, modeling files first."""
    for source in _modeling_first(files):
        tree = _parse(source.text)
        for cls in tree.body if tree else ():
            if isinstance(cls, ast.ClassDef) and cls.name == class_name:
                init = next(
                    (
                        n
                        for n in cls.body
                        if isinstance(n, ast.FunctionDef) and n.name == "__init__"
                    ),
                    None,
                )
                return (source, init) if init else None
    return None


def class_line(files: Iterable[SourceFile], class_name: str, pattern: str) -> Evidence | None:
    """The first code line of class ``class_name`` matching ``pattern`` (a regex), modeling
    files first: what the class itself does, not what another class of the file does."""
    regex = re.compile(pattern)
    for source in _modeling_first(files):
        tree = _parse(source.text)
        for cls in tree.body if tree else ():
            if not (isinstance(cls, ast.ClassDef) and cls.name == class_name):
                continue
            lines = source.text.splitlines()[cls.lineno - 1 : cls.end_lineno]
            for number, line in enumerate(lines, start=cls.lineno):
                if regex.search(line) and not line.lstrip().startswith("#"):
                    return Evidence("source", f"{source.name}:{number}", line.strip()[:120])
    return None


def source_of(source: SourceFile, line: int) -> str:
    """Line ``line`` of ``source``, stripped and cut for evidence."""
    lines = source.text.splitlines()
    return lines[line - 1].strip()[:120] if 0 < line <= len(lines) else ""
