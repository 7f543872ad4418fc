"""Read one package's Python source statically: modules, classes, imports and base classes.

Registries name classes by import or by dotted path, and the rules need to know whether those
names resolve and what a class inherits, without importing anything (no torch, no model code).
Each module is parsed at most once per run, and only when a rule asks for it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClassInfo:
    """A class found in the package: where it is and its AST."""

    module: str
    path: Path
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True)
class External:
    """A name bound to something outside the package, which static reading cannot follow."""

    module: str


@dataclass(frozen=True)
class Missing:
    """A name that does not resolve; ``reason`` says which link of the chain broke.

    ``module`` is set when the break is a module that does not exist or does not parse (nothing
    from it imports), as opposed to a module that imports but lacks the name.
    """

    reason: str
    module: str | None = None


Resolved = ClassInfo | External | Missing


@dataclass(frozen=True)
class _Import:
    module: str
    name: str | None  # None: the binding is the module itself (``import a.b as c``)


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module | None
    error: str | None  # why the file does not parse

    def __post_init__(self) -> None:
        self.classes: dict[str, ast.ClassDef] = {}
        self.bindings: dict[str, _Import | str] = {}  # str: alias of another local name
        self.star_imports: list[str] = []
        self.lazy = False  # a module-level __getattr__ makes missing names unknowable
        if self.tree is not None:
            self._index(self.tree.body, nested=False)

    def _index(self, body: list[ast.stmt], *, nested: bool) -> None:
        """Bind module-level names; inside if/try blocks the first definition wins.

        ``if HAVE_X: class A (real) else: class A (placeholder)`` and ``try: from x import A
        except ImportError: A = None`` both put the definition that matters first.
        """
        for node in body:
            if isinstance(node, ast.ClassDef):
                self._bind(node.name, node, nested)
            elif isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                self.lazy = True
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node, nested)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    module = alias.name if alias.asname else bound
                    self._bind(bound, _Import(module, None), nested)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self._bind(target.id, node.value.id, nested)
            elif isinstance(node, ast.If | ast.Try):
                for block in _blocks(node):
                    self._index(block, nested=True)

    def _bind(self, name: str, value: ast.ClassDef | _Import | str, nested: bool) -> None:
        if nested and (name in self.classes or name in self.bindings):
            return
        self.classes.pop(name, None)
        self.bindings.pop(name, None)
        if isinstance(value, ast.ClassDef):
            self.classes[name] = value
        else:
            self.bindings[name] = value

    def _import_from(self, node: ast.ImportFrom, nested: bool) -> None:
        source = _absolute(self.name, self.path, node.module, node.level)
        for alias in node.names:
            if alias.name == "*":
                self.star_imports.append(source)
            else:
                self._bind(alias.asname or alias.name, _Import(source, alias.name), nested)


def _blocks(node: ast.If | ast.Try) -> Iterator[list[ast.stmt]]:
    yield node.body
    yield node.orelse
    if isinstance(node, ast.Try):
        for handler in node.handlers:
            yield handler.body
        yield node.finalbody


def _absolute(module: str, path: Path, target: str | None, level: int) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    package = parts if path.name == "__init__.py" else parts[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, target] if target else base)


class PackageIndex:
    """Modules of one package (``mobius`` at ``package_dir``), parsed lazily and cached."""

    def __init__(self, package: str, package_dir: Path) -> None:
        self.package = package
        self.package_dir = package_dir
        self._modules: dict[str, Module | None] = {}

    def owns(self, dotted: str) -> bool:
        return dotted == self.package or dotted.startswith(self.package + ".")

    def module_file(self, dotted: str) -> Path | None:
        if not self.owns(dotted):
            return None
        parts = dotted.split(".")[1:]
        base = self.package_dir.joinpath(*parts)
        for candidate in (base.with_suffix(".py") if parts else None, base / "__init__.py"):
            if candidate is not None and candidate.is_file():
                return candidate
        return None

    def module(self, dotted: str) -> Module | None:
        if dotted not in self._modules:
            path = self.module_file(dotted)
            self._modules[dotted] = None if path is None else _parse(dotted, path)
        return self._modules[dotted]

    def resolve(self, dotted: str, name: str) -> Resolved:
        """The class ``name`` as seen from module ``dotted`` (following imports and aliases)."""
        return self._resolve(dotted, name, frozenset())

    def _resolve(self, dotted: str, name: str, seen: frozenset[tuple[str, str]]) -> Resolved:
        if not self.owns(dotted):
            return External(dotted)
        if (dotted, name) in seen:
            return Missing(f"{dotted}.{name} is an import cycle")
        seen = seen | {(dotted, name)}
        module = self.module(dotted)
        if module is None:
            return Missing(f"module {dotted} does not exist", dotted)
        if module.error is not None:
            return Missing(f"{dotted} does not parse ({module.error})", dotted)
        if name in module.classes:
            return ClassInfo(dotted, module.path, module.classes[name])
        binding = module.bindings.get(name)
        if isinstance(binding, str):
            return self._resolve(dotted, binding, seen)
        if isinstance(binding, _Import):
            return self._follow(binding, seen)
        for source in module.star_imports:
            found = self._resolve(source, name, seen)
            if not isinstance(found, Missing):
                return found
        if module.lazy:
            return External(dotted)
        return Missing(f"{dotted} does not define {name}")

    def _follow(self, binding: _Import, seen: frozenset[tuple[str, str]]) -> Resolved:
        if binding.name is None:
            return Missing(f"{binding.module} is a module, not a class")
        if not self.owns(binding.module):
            return External(binding.module)
        found = self._resolve(binding.module, binding.name, seen)
        if isinstance(found, Missing) and self.module(f"{binding.module}.{binding.name}"):
            return Missing(f"{binding.module}.{binding.name} is a module, not a class")
        return found

    def bases(self, cls: ClassInfo) -> tuple[Resolved, ...]:
        return tuple(self._base(cls, base) for base in cls.node.bases)

    def _base(self, cls: ClassInfo, node: ast.expr) -> Resolved:
        if isinstance(node, ast.Name):
            return self.resolve(cls.module, node.id)
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            module = self.module(cls.module)
            if dotted and module is not None:
                head, _, rest = dotted.partition(".")
                bound = self._bound_module(module.bindings.get(head))
                if bound is not None:
                    path, _, attr = f"{bound}.{rest}".rpartition(".")
                    return self.resolve(path, attr)
        return External(ast.unparse(node))

    def _bound_module(self, binding: _Import | str | None) -> str | None:
        """The dotted module a local name stands for (``import a.b as c``, ``from a import b``)."""
        if not isinstance(binding, _Import):
            return None
        if binding.name is None:
            return binding.module
        candidate = f"{binding.module}.{binding.name}"
        return candidate if self.module(candidate) is not None or not self.owns(candidate) else None

    def mro(self, cls: ClassInfo) -> Iterator[ClassInfo | External]:
        """``cls`` and its ancestors depth-first, left to right; external bases end a branch."""
        seen: set[tuple[str, str]] = set()
        stack: list[Resolved] = [cls]
        while stack:
            current = stack.pop(0)
            if isinstance(current, Missing):
                continue
            if isinstance(current, External):
                yield current
                continue
            if (current.module, current.name) in seen:
                continue
            seen.add((current.module, current.name))
            yield current
            stack[0:0] = self.bases(current)

    def inherits(self, cls: ClassInfo, base_name: str) -> bool:
        return any(isinstance(c, ClassInfo) and c.name == base_name for c in self.mro(cls))

    def class_attribute(self, cls: ClassInfo, attr: str) -> tuple[ClassInfo, ast.stmt] | None:
        """Where ``attr`` is first defined along the MRO (assignment, def or nested class)."""
        for owner in self.mro(cls):
            if isinstance(owner, External):
                continue
            statement = own_attribute(owner.node, attr)
            if statement is not None:
                return owner, statement
        return None


def own_attribute(node: ast.ClassDef, attr: str) -> ast.stmt | None:
    """The statement in the class body that binds ``attr``, if any."""
    for statement in node.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if statement.name == attr:
                return statement
        elif isinstance(statement, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == attr for t in statement.targets):
                return statement
        elif (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and statement.target.id == attr
            and statement.value is not None
        ):
            return statement
    return None


def assigned_value(statement: ast.stmt) -> ast.expr | None:
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        return statement.value
    return None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _parse(dotted: str, path: Path) -> Module:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Module(dotted, path, None, f"unreadable: {exc}")
    try:
        return Module(dotted, path, ast.parse(text, filename=str(path)), None)
    except SyntaxError as exc:
        return Module(dotted, path, None, f"line {exc.lineno}: {exc.msg}")


def parse_file(path: Path) -> ast.Module | str:
    """The module's AST, or a one-line reason why it cannot be read."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except (OSError, UnicodeDecodeError) as exc:
        return str(exc)
