"""Facts about an architecture's HF attention, read from transformers' modeling source as text.

The alias rules need three facts about the text decoder's attention class: does ``__init__``
create ``q_norm``/``k_norm``, are the q/k/v projections built with a hard-coded ``bias=True``, and
does the class use a sliding window. Only that class is parsed: its source is cut out of the
modeling file (a fraction of the cost of parsing 2,000-line files) and every line number found in
it, ``init_assignment``'s evidence included, is shifted back to the real file's. The AST lookups
run only when the class text mentions what they look for.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache

from onboard.source import SourceFile

_CLASS = re.compile(r"^class (\w+)\b", re.MULTILINE)
_TOP_LEVEL = re.compile(r"^(?:class|def|async def|@)\s*\S", re.MULTILINE)
# Attention classes of other towers in multimodal files: not the text decoder's.
_OTHER_TOWERS = ("Vision", "Visual", "Vit", "Audio", "Speech", "Image", "Patch", "Cross",
                 "Encoder", "Code2Wav", "Talker", "Perceiver")  # fmt: skip


@dataclass(frozen=True)
class Cited:
    """A source line behind a fact: ``modeling_mistral.py:172`` and the code on it."""

    where: str
    code: str

    def __str__(self) -> str:
        return self.where


@dataclass(frozen=True)
class AttentionFacts:
    class_name: str
    qk_norm: Cited | None
    qk_norm_condition: str | None  # the ``if`` test guarding q_norm, when it is conditional
    hard_coded_qkv_bias: Cited | None
    sliding_window: Cited | None


def attention_facts(files: Iterable[SourceFile]) -> AttentionFacts | None:
    """Facts about the text attention class of the modeling file, or None without one."""
    modeling = next((f for f in files if f.name.startswith("modeling_")), None)
    if modeling is None:
        return None
    return _facts(modeling)


@cache
def _facts(source: SourceFile) -> AttentionFacts | None:
    # Imported here: runs that check no alias never load the analysis package.
    from onboard.analysis.source_lines import init_assignment

    name = _text_attention(source.text)
    if name is None:
        return None
    sliced, offset = _class_slice(source, name)
    tree = _parse(sliced.text)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef)), None) if tree else None
    if cls is None:
        return None

    def cite(attr: str, keyword: str | None = None) -> Cited | None:
        found = init_assignment([sliced], name, attr)
        if found is None or (keyword is not None and found.keyword(keyword) != "True"):
            return None
        where = found.evidence.where.rpartition(":")
        return Cited(f"{where[0]}:{int(where[2]) + offset}", found.evidence.detail)

    q_norm = cite("q_norm") if "self.q_norm" in sliced.text else None
    hard_coded = None
    if "bias=True" in sliced.text:
        biases = (cite(proj, "bias") for proj in ("q_proj", "k_proj", "v_proj"))
        hard_coded = next((c for c in biases if c is not None), None)
    return AttentionFacts(
        name,
        q_norm,
        _guard(cls, "q_norm") if q_norm else None,
        hard_coded,
        _sliding_window(source.name, sliced.text, cls, offset),
    )


def _text_attention(text: str) -> str | None:
    """The decoder's attention class: prefer a ``*TextAttention``, then ``<Model>Attention``."""
    names = [n for n in _CLASS.findall(text) if n.endswith("Attention")]
    names = [n for n in names if not any(word in n for word in _OTHER_TOWERS)]
    if not names:
        return None
    text_named = [n for n in names if "Text" in n]
    if text_named:
        return text_named[0]
    prefixes = re.findall(r"^class (\w+)ForCausalLM\b", text, re.MULTILINE)
    preferred = [f"{p}Attention" for p in prefixes if f"{p}Attention" in names]
    return (preferred or names)[0]


def _class_slice(source: SourceFile, name: str) -> tuple[SourceFile, int]:
    """Class ``name``'s source alone, and how many lines of the file precede it."""
    match = re.search(rf"^class {re.escape(name)}\b", source.text, re.MULTILINE)
    assert match is not None  # the name came from the same text
    following = _TOP_LEVEL.search(source.text, match.end())
    end = following.start() if following else len(source.text)
    offset = source.text.count("\n", 0, match.start())
    return SourceFile(
        source.name, source.path, source.sha256, source.text[match.start() : end]
    ), offset


@cache
def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _guard(cls: ast.ClassDef, attr: str) -> str | None:
    """The test of the ``if`` that encloses ``self.<attr> = ...``, if any."""
    for node, tests in _walk_with_tests(cls, ()):
        if isinstance(node, ast.Assign) and any(_is_self(t, attr) for t in node.targets):
            return " and ".join(ast.unparse(t) for t in tests) or None
    return None


def _walk_with_tests(
    node: ast.AST, tests: tuple[ast.expr, ...]
) -> Iterator[tuple[ast.AST, tuple[ast.expr, ...]]]:
    yield node, tests
    if isinstance(node, ast.If):
        for child in node.body:
            yield from _walk_with_tests(child, (*tests, node.test))
        for child in node.orelse:
            yield from _walk_with_tests(child, tests)
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk_with_tests(child, tests)


def _is_self(node: ast.expr, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _sliding_window(file: str, text: str, cls: ast.ClassDef, offset: int) -> Cited | None:
    """The first line where the class stores or passes a sliding window."""
    if "sliding_window" not in text:
        return None
    lines = text.splitlines()
    candidates = []
    for node in ast.walk(cls):
        if isinstance(node, ast.keyword) and node.arg == "sliding_window":
            candidates.append(node.value.lineno)
        elif (
            isinstance(node, ast.Assign)
            and any(_is_self(t, "sliding_window") for t in node.targets)
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            candidates.append(node.lineno)
    if not candidates:
        return None
    line = min(candidates)
    return Cited(f"{file}:{line + offset}", lines[line - 1].strip()[:120])


@dataclass(frozen=True)
class ConfigField:
    class_name: str
    where: str
    default: str


def config_field(files: Iterable[SourceFile], name: str) -> ConfigField | None:
    """A config class that declares field ``name`` (class-level or ``__init__`` argument)."""
    for source in files:
        if not source.name.startswith("configuration_"):
            continue
        tree = _parse(source.text)
        if tree is None:
            continue
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            found = _declared(cls, name)
            if found is not None:
                line, default = found
                return ConfigField(cls.name, f"{source.name}:{line}", default)
    return None


def _declared(cls: ast.ClassDef, name: str) -> tuple[int, str] | None:
    for statement in cls.body:
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and statement.target.id == name
        ):
            default = ast.unparse(statement.value) if statement.value is not None else "unset"
            return statement.lineno, default
        if isinstance(statement, ast.FunctionDef) and statement.name == "__init__":
            found = _init_argument(statement.args, name)
            if found is not None:
                return found
    return None


def _init_argument(args: ast.arguments, name: str) -> tuple[int, str] | None:
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    pairs = [*zip(positional, [*defaults, *args.defaults], strict=True)]
    pairs += [*zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    for arg, default in pairs:
        if arg.arg == name:
            return arg.lineno, ast.unparse(default) if default is not None else "required"
    return None


def declared_model_types(files: Iterable[SourceFile]) -> frozenset[str]:
    """``model_type = "..."`` of every config class in the configuration files."""
    found = set()
    for source in files:
        if source.name.startswith("configuration_"):
            found.update(re.findall(r"^\s+model_type\s*=\s*[\"']([^\"']+)[\"']", source.text, re.M))
    return frozenset(found)
