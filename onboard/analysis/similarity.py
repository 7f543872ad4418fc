"""How a remote modeling file compares with transformers' own modeling code, read as text.

A checkpoint that ships its own ``modeling_<x>.py`` is never imported here. Its source is
normalised statement by statement with ``ast``: docstrings, comments, imports, formatting, type
annotations and the model's class-name prefix are dropped, ``v = expr; return v`` reads as
``return expr`` and ``self.register_buffer("x", v)`` as transformers 5's
``self.x = nn.Buffer(v)``. The result is compared with the same normalisation of every
``transformers/models/*/modeling_*.py``:

- ``ranking``: the model types whose whole modeling file is closest (difflib ratio over
  normalised statements);
- ``roles``: per role class (attention, MLP, norm, ...) the closest transformers class of that
  role, and per module-level helper function those classes call (``role="function"``) the
  closest transformers function;
- ``unexplained``: the lines of those classes and helpers that differ from their closest match
  (inserted or replaced on the remote side) and that no detected feature cites, for a reviewer.

Parsing all ~500 transformers files takes 7 s or more on a 2-core machine, so candidates are
first ranked with a cheap score (Jaccard of the sets of stripped lines, prefix replaced) and only
the best few are parsed; everything read or parsed is cached for the life of the process.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import cache
from pathlib import Path

from onboard.analysis.ancestry import ROLES, role_of
from onboard.errors import BadInputError
from onboard.source import SourceFile

RANKED = 3  # model types listed in ``Similarity.ranking``
FILE_CANDIDATES = 30  # files parsed for the ranking, the best by the cheap score
CLASS_CANDIDATES = 24  # classes (or functions) parsed per role, the best by the cheap score
PAIRING = 0.5  # a replaced statement below this character ratio is compared as new code
ROLE_ORDER = ("attention", "mlp", "norm", "decoder_layer", "model", "causal_lm", "rotary")
HELPER = "function"  # role of module-level functions the role classes call
PLACEHOLDER = "@@"  # stands for the model's class-name prefix (Ember, Qwen3, ...)
_KNOWN_ROLES = frozenset(role for role, _ in ROLES)

_CLASS = re.compile(r"\nclass (\w+)")
_CLAUSES = ("else:", "elif ", "except", "finally:")  # column 0, yet inside a statement
_DEF = re.compile(r"^(?:class|def|async\s+def)\s+(\w+)")
_SUFFIX = re.compile(
    r"(PreTrainedModel|ForCausalLM|DecoderLayer|Attention|MLP|RMSNorm|LayerNorm|Norm"
    r"|RotaryEmbedding|Model|Config)$"
)
_LAYOUT = " \t\f\v,"  # stripped from both ends of a line for the cheap score
_TOKEN = re.compile(
    r"#.*|[A-Za-z_]\w*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[jJ]?|\d\w*"
    r"|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|\*\*=?|//=?|->|[-+*/%&|^=!<>]=|\S"
)
_PUNCTUATION = frozenset("()[]{},")
_NO_CONTENT = re.compile(r"[\s()\[\]{},:]*")
_RETURN = re.compile(r"return\b")
# A local variable: a name not after a dot, not called, not a constant or keyword.
_VARIABLE = re.compile(
    r"(?<![.\w])(?!(?:None|True|False|return|not|and|or|if|else|in|is)\b)"
    r"[A-Za-z_]\w*(?![\w.(])"
)
# Plumbing: the parent's constructor, post_init, pass, and storing an argument as is.
_PLUMBING = re.compile(
    r"super\(\)\.__init__\(.*\)|self\.post_init\(\)|pass"
    r"|self\.\w+ = (?!(?:None|True|False)$)[A-Za-z_]\w*"
)


@dataclass(frozen=True)
class RoleMatch:
    role: str  # "attention", "mlp", "norm", "decoder_layer", "model", "causal_lm", "rotary", ...
    remote_class: str  # e.g. "EmberAttention" (a function name for role "function")
    model_type: str  # transformers models/ directory of the closest class, e.g. "qwen3"
    hf_class: str  # e.g. "Qwen3Attention"
    similarity: float  # 0..1, difflib ratio of the normalised statements


@dataclass(frozen=True)
class ReviewLine:
    where: str  # "modeling_ember.py:205"
    code: str  # the stripped source line
    role: str  # role of the class (or "function") it is in


@dataclass(frozen=True)
class Similarity:
    ranking: tuple[tuple[str, float], ...]  # closest model types by whole file, best first
    roles: tuple[RoleMatch, ...]
    unexplained: tuple[ReviewLine, ...]


def guess_roles(modeling: SourceFile) -> dict[str, str]:
    """role -> class, from top-level class-name suffixes (the shortest name wins a role)."""
    found: dict[str, str] = {}
    for name in _CLASS.findall(f"\n{modeling.text}"):
        role = _role(name)
        if role and (role not in found or len(name) < len(found[role])):
            found[role] = name
    return found


def compare_with_transformers(
    modeling: SourceFile, roles: Mapping[str, str], explained_lines: Collection[int]
) -> Similarity:
    """Rank transformers' modeling files and classes by similarity to ``modeling``.

    ``roles`` maps a role to a top-level class of ``modeling`` (roles naming no class of the
    file, such as ``nn.LayerNorm``, are skipped). ``explained_lines`` are the line numbers some
    detected feature cites; they are left out of ``unexplained``.
    """
    try:
        tree = ast.parse(modeling.text)
    except SyntaxError as exc:
        raise BadInputError(f"{modeling.name} is not valid Python (line {exc.lineno})") from None
    remote = _Module.read("", modeling.name, modeling.text, tree)
    corpus = _corpus()
    overlap = {module: _jaccard(remote.shingles, module.shingles) for module in corpus}
    ranking = _rank_files(remote, corpus, overlap)

    classes, functions = remote.classes, remote.functions
    targets = [(role, classes[name]) for role, name in _ordered(roles) if name in classes]
    helpers = _helpers(tree, {segment.name for _, segment in targets})
    targets += [(HELPER, functions[name]) for name in helpers if name in functions]

    explained = frozenset(explained_lines)
    matches: list[RoleMatch] = []
    review: dict[int, ReviewLine] = {}
    for role, segment in targets:
        name = segment.name
        found = _closest(remote, segment, role, corpus, overlap)
        if found is None:
            continue
        module, hf_segment, score = found
        matches.append(RoleMatch(role, name, module.model_type, hf_segment.name, round(score, 4)))
        for line in _differing_lines(remote, segment, module, hf_segment):
            if line not in explained and line not in review:
                code = remote.lines[line - 1].strip()
                review[line] = ReviewLine(f"{modeling.name}:{line}", code, role)
    return Similarity(ranking, tuple(matches), tuple(review[n] for n in sorted(review)))


# -- parsed modules -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """One normalised statement (or compound-statement header) and the lines it spans."""

    text: str
    first: int
    last: int


@dataclass(frozen=True, eq=False)
class _Segment:
    """A run of top-level lines: one class or function with its decorators, or other code."""

    name: str
    kind: str  # "class", "def" or "" (assignments, comments, ...)
    role: str | None  # of a class, from its name
    first: int
    last: int
    shingles: frozenset[str]


@dataclass(frozen=True, eq=False)
class _Module:
    model_type: str
    name: str
    lines: tuple[str, ...]
    prefix: re.Pattern[str] | None
    segments: tuple[_Segment, ...]
    shingles: frozenset[str]
    _units: dict[_Segment, tuple[_Unit, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def read(cls, model_type: str, name: str, text: str, tree: ast.Module | None = None) -> _Module:
        """Index ``text``; its top-level statements come from ``tree`` when given, else from
        the lines that start in column 0 (fast, and right for formatted code)."""
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        prefix = _prefix(_CLASS.findall(f"\n{text}"))
        lines = tuple(text.split("\n"))
        # The cheap score's lines: the prefix replaced as plain text, layout stripped.
        flat = text.replace(prefix[0], PLACEHOLDER).split("\n") if prefix else lines
        starts = [_start(n) - 1 for n in tree.body] if tree else _column_zero(lines)
        segments = tuple(_segments(lines, flat, starts))
        shingles = frozenset().union(*(s.shingles for s in segments))
        return cls(model_type, name, lines, prefix[1] if prefix else None, segments, shingles)

    @property
    def classes(self) -> dict[str, _Segment]:
        return {s.name: s for s in self.segments if s.kind == "class"}

    @property
    def functions(self) -> dict[str, _Segment]:
        return {s.name: s for s in self.segments if s.kind == "def"}

    def units(self, segment: _Segment) -> tuple[_Unit, ...]:
        if segment not in self._units:
            source = "\n".join(self.lines[segment.first - 1 : segment.last])
            try:
                body = ast.parse(source).body
            except SyntaxError:  # cut inside a statement (a string in column 0, say)
                self._units_from_whole_file()
            else:
                self._units[segment] = tuple(_Normaliser(self, segment.first - 1).body(body))
        return self._units[segment]

    def all_units(self) -> list[_Unit]:
        return [unit for segment in self.segments for unit in self.units(segment)]

    def _units_from_whole_file(self) -> None:
        """Give every segment the units of the statements that start in it."""
        found: dict[_Segment, list[_Unit]] = {segment: [] for segment in self.segments}
        try:
            tree = ast.parse("\n".join(self.lines))
        except SyntaxError:
            tree = ast.Module(body=[], type_ignores=[])
        firsts = [segment.first for segment in self.segments]
        for node in tree.body:
            segment = self.segments[bisect_right(firsts, _start(node)) - 1]
            found[segment] += _Normaliser(self, 0).body([node])
        self._units.update((segment, tuple(units)) for segment, units in found.items())

    def tokens(self, unit: _Unit) -> list[tuple[str, int]]:
        """The unit's source tokens and their lines, comments and trailing commas dropped."""
        found: list[tuple[str, int]] = []
        for number in range(unit.first, unit.last + 1):
            line = self.lines[number - 1]
            if self.prefix:
                line = self.prefix.sub(PLACEHOLDER, line)
            for token in _TOKEN.findall(line):
                if token[0] == "#" or token == "\\":
                    continue
                if token[0] == "'" and '"' not in token:
                    token = f'"{token[1:-1]}"'
                if token in ")]}" and found and found[-1][0] == ",":
                    found.pop()
                found.append((token, number))
        return found


def _column_zero(lines: tuple[str, ...]) -> list[int]:
    """Where top-level statements start (0-based): column-0 code, decorators kept with theirs."""
    starts = [
        i
        for i, line in enumerate(lines)
        if line and (line[0].isalpha() or line[0] in "_@") and not line.startswith(_CLAUSES)
    ]
    return [s for k, s in enumerate(starts) if k == 0 or lines[starts[k - 1]][:1] != "@"]


def _segments(lines: tuple[str, ...], flat: list[str], starts: list[int]) -> Iterable[_Segment]:
    if not starts or starts[0] > 0:
        starts.insert(0, 0)
    ends = [*starts[1:], len(lines)]
    for first, end in zip(starts, ends, strict=True):
        name, kind = "", ""
        for line in lines[first:end]:  # one column-0 class or def at most, after decorators
            match = _DEF.match(line)
            if match:
                name, kind = match.group(1), "class" if line.startswith("class") else "def"
                break
        stripped = (line.strip(_LAYOUT) for line in flat[first:end])
        shingles = frozenset(s for s in stripped if s and s[0] != "#")
        role = _role(name) if kind == "class" else None
        yield _Segment(name, kind, role, first + 1, end, shingles)


def _prefix(class_names: list[str]) -> tuple[str, re.Pattern[str]] | None:
    """The model's class-name prefix (``Qwen3`` in ``Qwen3Attention``), and a pattern for it."""
    counts = Counter(
        match.string[: match.start()]
        for match in map(_SUFFIX.search, class_names)
        if match and match.start() > 0
    )
    if not counts:
        return None
    prefix = min(counts, key=lambda p: (-counts[p], -len(p), p))
    return prefix, re.compile(rf"\b{re.escape(prefix)}(?=[A-Z0-9_]|\b)")


# -- normalisation ----------------------------------------------------------------------------


class _Normaliser:
    """Statements to ``_Unit``s: ``ast.unparse`` text, prefix replaced, remote line numbers."""

    def __init__(self, module: _Module, offset: int) -> None:
        self.module = module
        self.offset = offset
        self.out: list[_Unit] = []

    def body(self, statements: list[ast.stmt]) -> list[_Unit]:
        index = 0
        while index < len(statements):
            node = statements[index]
            after = statements[index + 1] if index + 1 < len(statements) else None
            index += 1
            if _is_docstring(node) or isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.Assign) and _returned(node, after):
                assert after is not None
                self.emit(f"return {ast.unparse(node.value)}", node.lineno, after.end_lineno)
                index += 1
            else:
                self.statement(node)
        return self.out

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                self.emit(f"@{ast.unparse(decorator)}", decorator.lineno, decorator.end_lineno)
            self.emit(_signature(node), node.lineno, _header_end(node))
            self.body(node.body)
        elif isinstance(node, ast.If):
            self.branch(node, "if")
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            if isinstance(node, ast.While):
                header = f"while {ast.unparse(node.test)}:"
            else:
                word = "async for" if isinstance(node, ast.AsyncFor) else "for"
                header = f"{word} {ast.unparse(node.target)} in {ast.unparse(node.iter)}:"
            self.emit(header, node.lineno, _header_end(node))
            self.body(node.body)
            self.clause("else:", node.orelse, node)
        elif isinstance(node, ast.With | ast.AsyncWith):
            word = "async with" if isinstance(node, ast.AsyncWith) else "with"
            items = ", ".join(ast.unparse(item) for item in node.items)
            self.emit(f"{word} {items}:", node.lineno, _header_end(node))
            self.body(node.body)
        elif isinstance(node, ast.Try | ast.TryStar):
            self.emit("try:", node.lineno, node.lineno)
            self.body(node.body)
            for handler in node.handlers:
                caught = f" {ast.unparse(handler.type)}" if handler.type else ""
                alias = f" as {handler.name}" if handler.name else ""
                self.emit(f"except{caught}{alias}:", handler.lineno, _header_end(handler))
                self.body(handler.body)
            self.clause("else:", node.orelse, node)
            self.clause("finally:", node.finalbody, node)
        elif (buffer := _buffer(node)) is not None:
            self.emit(buffer, node.lineno, node.end_lineno)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            text = f"{ast.unparse(node.target)} = {ast.unparse(node.value)}"
            self.emit(text, node.lineno, node.end_lineno)
        else:
            self.emit(ast.unparse(node), node.lineno, node.end_lineno)

    def branch(self, node: ast.If, word: str) -> None:
        self.emit(f"{word} {ast.unparse(node.test)}:", node.lineno, _header_end(node))
        self.body(node.body)
        orelse = node.orelse
        if len(orelse) == 1 and isinstance(orelse[0], ast.If) and self.starts(orelse[0], "elif"):
            self.branch(orelse[0], "elif")
        else:
            self.clause("else:", orelse, node)

    def clause(self, header: str, body: list[ast.stmt], parent: ast.stmt) -> None:
        if not body:
            return
        line = _start(body[0]) - 1  # the clause keyword's line, unless a comment sits between
        while line > parent.lineno and not self.starts_line(line, header[:-1]):
            line -= 1
        self.emit(header, line, line)
        self.body(body)

    def starts(self, node: ast.stmt, word: str) -> bool:
        return self.starts_line(node.lineno, word)

    def starts_line(self, line: int, word: str) -> bool:
        return self.module.lines[line + self.offset - 1].lstrip().startswith(word)

    def emit(self, text: str, first: int, last: int | None) -> None:
        if self.module.prefix:
            text = self.module.prefix.sub(PLACEHOLDER, text)
        first += self.offset
        self.out.append(_Unit(text, first, max(first, (last or 0) + self.offset)))


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    if isinstance(node, ast.ClassDef):
        bases = [ast.unparse(base) for base in node.bases]
        bases += [
            f"{k.arg}={ast.unparse(k.value)}" if k.arg else f"**{ast.unparse(k.value)}"
            for k in node.keywords
        ]
        return f"class {node.name}({', '.join(bases)}):"
    arguments = node.args
    for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
        arg.annotation = None
    for arg in (arguments.vararg, arguments.kwarg):
        if arg is not None:
            arg.annotation = None
    word = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    return f"{word} {node.name}({ast.unparse(arguments)}):"


def _buffer(node: ast.stmt) -> str | None:
    """``self.register_buffer("x", v, ...)`` as ``self.x = nn.Buffer(v, ...)`` (transformers 5)."""
    call = node.value if isinstance(node, ast.Expr) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "register_buffer"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "self"
        and len(call.args) >= 2
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ):
        return None
    rest = [ast.unparse(a) for a in call.args[1:]] + [ast.unparse(k) for k in call.keywords]
    return f"self.{call.args[0].value} = nn.Buffer({', '.join(rest)})"


def _start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", ())
    return min([node.lineno, *(d.lineno for d in decorators)])


def _header_end(node: ast.stmt | ast.excepthandler) -> int:
    body: list[ast.stmt] = node.body  # type: ignore[attr-defined]
    return max(node.lineno, _start(body[0]) - 1)


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _returned(node: ast.Assign, after: ast.stmt | None) -> bool:
    """``v = expr`` immediately followed by ``return v``."""
    return (
        isinstance(after, ast.Return)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(after.value, ast.Name)
        and after.value.id == node.targets[0].id
    )


# -- the transformers corpus ------------------------------------------------------------------


@cache
def _corpus() -> tuple[_Module, ...]:
    """Every installed ``transformers/models/*/modeling_*.py``, indexed (parsed lazily)."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return ()
    models = Path(next(iter(spec.submodule_search_locations))) / "models"
    modules = []
    for path in sorted(models.glob("*/modeling_*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        modules.append(_Module.read(path.parent.name, path.name, text))
    return tuple(modules)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def _ratio(a: Iterable[_Unit], b: Iterable[_Unit]) -> float:
    return SequenceMatcher(None, [u.text for u in a], [u.text for u in b], autojunk=False).ratio()


def _rank_files(
    remote: _Module, corpus: tuple[_Module, ...], overlap: Mapping[_Module, float]
) -> tuple[tuple[str, float], ...]:
    shortlist = sorted(corpus, key=lambda m: (-overlap[m], m.model_type, m.name))
    units = remote.all_units()
    best: dict[str, float] = {}
    for module in shortlist[:FILE_CANDIDATES]:
        score = round(_ratio(units, module.all_units()), 4)
        best[module.model_type] = max(score, best.get(module.model_type, 0.0))
    ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))
    return tuple(ranked[:RANKED])


def _role(class_name: str) -> str | None:
    if class_name.endswith("PreTrainedModel"):
        return None
    return role_of(class_name)


def _closest(
    remote: _Module,
    segment: _Segment,
    role: str,
    corpus: tuple[_Module, ...],
    overlap: Mapping[_Module, float],
) -> tuple[_Module, _Segment, float] | None:
    """The transformers class (or function) of ``role`` closest to ``segment``."""
    candidates = [
        (module, other)
        for module in corpus
        for other in module.segments
        if _candidate(other, role, role in _KNOWN_ROLES)
    ]
    if not candidates:
        return None

    def cheap(item: tuple[_Module, _Segment]) -> tuple[float, float, str, str]:
        module, other = item
        score = _jaccard(segment.shingles, other.shingles)
        return (-score, -overlap[module], module.model_type, other.name)

    shortlist = sorted(candidates, key=cheap)[:CLASS_CANDIDATES]
    units = remote.units(segment)
    scored = [(_ratio(units, module.units(other)), module, other) for module, other in shortlist]
    score, module, other = min(
        scored, key=lambda s: (-round(s[0], 6), -overlap[s[1]], s[1].model_type, s[2].name)
    )
    return module, other, score


def _candidate(segment: _Segment, role: str, known_role: bool) -> bool:
    if role == HELPER:
        return segment.kind == "def"
    return segment.kind == "class" and (segment.role == role or not known_role)


def _ordered(roles: Mapping[str, str]) -> list[tuple[str, str]]:
    rank = {role: index for index, role in enumerate(ROLE_ORDER)}
    return sorted(roles.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0]))


def _helpers(tree: ast.Module, classes: set[str]) -> list[str]:
    """Module-level functions the ``classes`` call, directly or through each other."""
    functions = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    pending = [
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name in classes
    ]
    found: dict[str, int] = {}
    while pending:
        node = pending.pop()
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and child.id in functions and child.id not in found:
                found[child.id] = functions[child.id].lineno
                pending.append(functions[child.id])
    return sorted(found, key=lambda name: found[name])


# -- line-level differences -------------------------------------------------------------------


def _differing_lines(
    remote: _Module, segment: _Segment, hf: _Module, hf_segment: _Segment
) -> list[int]:
    """Lines of ``segment`` inserted or replaced relative to ``hf_segment``."""
    ours, theirs = remote.units(segment), hf.units(hf_segment)
    matcher = SequenceMatcher(
        None, [u.text for u in ours], [u.text for u in theirs], autojunk=False
    )
    lines: list[int] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "insert"):
            continue
        for unit in ours[i1:i2]:
            if _PLUMBING.fullmatch(unit.text):
                continue
            partner = _partner(unit, theirs[j1:j2])
            lines += _unit_lines(remote, unit, hf, partner)
    return lines


def _partner(unit: _Unit, others: Iterable[_Unit]) -> _Unit | None:
    best, best_score = None, PAIRING
    for other in others:
        score = SequenceMatcher(None, unit.text, other.text, autojunk=False).ratio()
        if score >= best_score:
            best, best_score = other, score
    return best


def _unit_lines(remote: _Module, unit: _Unit, hf: _Module, partner: _Unit | None) -> list[int]:
    """The lines of ``unit`` that carry its difference from ``partner`` (all, when unpaired)."""
    every = [n for n in range(unit.first, unit.last + 1) if _has_content(remote.lines[n - 1])]
    if partner is None:
        return every
    if _RETURN.match(unit.text) and _VARIABLE.sub("_", unit.text) == _VARIABLE.sub(
        "_", partner.text
    ):
        return []  # the same return up to local variable names
    ours, theirs = remote.tokens(unit), hf.tokens(partner)
    matcher = SequenceMatcher(None, [t for t, _ in ours], [t for t, _ in theirs], autojunk=False)
    flagged: set[int] = set()
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        changed = {t for t, _ in ours[i1:i2]} | {t for t, _ in theirs[j1:j2]}
        if changed <= _PUNCTUATION:
            continue  # brackets and commas only: layout
        if i1 == i2:  # transformers has tokens here that the remote lacks
            flagged.add(ours[min(i1, len(ours) - 1)][1] if ours else unit.first)
        flagged.update(line for _, line in ours[i1:i2])
    kept = [n for n in every if n in flagged]
    return kept or every


def _has_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#") and not _NO_CONTENT.fullmatch(stripped)
