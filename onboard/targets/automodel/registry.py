"""Read NeMo AutoModel's registry statically: which architectures map to which classes.

``MODEL_ARCH_MAPPING`` in ``nemo_automodel/_transformers/registry.py`` is an
``OrderedDict([("Arch", ("module.path", "Class"[, {"tags"}])), ...])`` literal, and
``_CUSTOM_CONFIG_REGISTRATIONS`` a dict literal of ``model_type -> (module, config class)``.
Reading them with ``ast`` imports neither torch nor a model module, so it works on a checkout
whose dependencies are missing, and it sees entries whose import would fail (the library drops
those silently at run time, T9 in the notes).
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from onboard.errors import TargetRepoError
from onboard.targets.base import Library, Variant

PACKAGE = "nemo_automodel"
REGISTRY = "nemo_automodel/_transformers/registry.py"  # relative to the repo root
ARCH_MAPPING = "MODEL_ARCH_MAPPING"
CUSTOM_CONFIGS = "_CUSTOM_CONFIG_REGISTRATIONS"


@dataclass(frozen=True)
class Entry:
    """One ``MODEL_ARCH_MAPPING`` entry, as written in the registry."""

    arch: str
    module: str
    class_name: str
    tags: tuple[str, ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.module}.{self.class_name}"


def open_library(repo: Path | None) -> Library:
    """The checkout at ``repo``, or the installed package laid out as a repo (its parent dir)."""
    if repo is not None:
        root = repo.expanduser().resolve()
        if not (root / REGISTRY).is_file():
            raise TargetRepoError(f"{root} is not an Automodel checkout: {REGISTRY} does not exist")
        return _library(root, is_checkout=True)
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise TargetRepoError(
            "nemo_automodel is not installed (pip install nemo-automodel==0.7.0) "
            "and no --repo given"
        )
    return _library(Path(spec.origin).parent.parent, is_checkout=False)


def _library(root: Path, *, is_checkout: bool) -> Library:
    variants = tuple(
        Variant(e.arch, e.qualified, ",".join(e.tags) or None) for e in read_entries(root)
    )
    return Library("automodel", root, root / PACKAGE, is_checkout, variants)


def read_entries(root: Path) -> tuple[Entry, ...]:
    """Every ``MODEL_ARCH_MAPPING`` entry of the registry under ``root``, in file order."""
    mapping = _assigned_value(_parse(root / REGISTRY), ARCH_MAPPING, root / REGISTRY)
    pairs = _ordered_dict_pairs(mapping)
    if pairs is None:
        raise TargetRepoError(
            f"{root / REGISTRY}: {ARCH_MAPPING} is not an OrderedDict([...]) literal"
        )
    return tuple(e for e in map(_entry, pairs) if e is not None)


def _entry(pair: ast.expr) -> Entry | None:
    """A ``("Arch", ("module", "Class"[, {"tag"}]))`` literal; None for anything else."""
    if not (isinstance(pair, ast.Tuple) and len(pair.elts) == 2):
        return None
    key, value = pair.elts
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return None
    if not (isinstance(value, ast.Tuple) and len(value.elts) >= 2):
        return None
    strings = _strings(value.elts[:2])
    if strings is None:
        return None
    tags = value.elts[2] if len(value.elts) > 2 else None
    tag_names = tuple(sorted(_strings(tags.elts) or ())) if isinstance(tags, ast.Set) else ()
    return Entry(key.value, strings[0], strings[1], tag_names)


def custom_config_types(root: Path) -> frozenset[str]:
    """The model_types ``_CUSTOM_CONFIG_REGISTRATIONS`` registers a config class for."""
    value = _assigned_value(_parse(root / REGISTRY), CUSTOM_CONFIGS, root / REGISTRY)
    if not isinstance(value, ast.Dict):
        raise TargetRepoError(f"{root / REGISTRY}: {CUSTOM_CONFIGS} is not a dict literal")
    return frozenset(
        k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
    )


def library_version(root: Path) -> str:
    """``MAJOR.MINOR.PATCH`` from ``package_info.py``, read statically ("unknown" if absent)."""
    path = root / PACKAGE / "package_info.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return "unknown"
    parts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("MAJOR", "MINOR", "PATCH"):
                    parts[target.id] = node.value.value
    if len(parts) < 3:
        return "unknown"
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


def entry_for(root: Path, arch: str) -> Entry | None:
    return next((e for e in read_entries(root) if e.arch == arch), None)


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise TargetRepoError(
            f"{path} does not parse (line {exc.lineno}: {exc.msg}); fix it before onboarding"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetRepoError(f"cannot read {path}: {exc}") from None


def _assigned_value(tree: ast.Module, name: str, path: Path) -> ast.expr:
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node.value
    raise TargetRepoError(f"{path} has no module-level {name}")


def _ordered_dict_pairs(value: ast.expr) -> list[ast.expr] | None:
    if not (isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords):
        return None
    func = value.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name != "OrderedDict" or not isinstance(value.args[0], ast.List):
        return None
    return value.args[0].elts


def _strings(nodes: list[ast.expr]) -> list[str] | None:
    if not all(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in nodes):
        return None
    return [n.value for n in nodes]  # type: ignore[attr-defined]
