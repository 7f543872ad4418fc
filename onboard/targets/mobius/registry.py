"""Read mobius' registry statically: which model_types map to which classes.

``_REGISTRATIONS`` in ``src/mobius/_registry.py`` is a dict literal of
``"model_type": ModelRegistration(Class, task=...)``; reading it with ``ast`` needs no torch or
onnx import and works on a checkout whose dependencies are not installed.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from onboard.errors import TargetRepoError
from onboard.targets.base import Library, Variant

REGISTRY_FILE = "_registry.py"
REGISTRATIONS = "_REGISTRATIONS"
SRC_PREFIX = "src/mobius/"


def open_library(repo: Path | None) -> Library:
    if repo is not None:
        repo = repo.expanduser().resolve()
        package_dir = repo / "src" / "mobius"
        if not (package_dir / REGISTRY_FILE).is_file():
            raise TargetRepoError(
                f"{repo} is not a mobius checkout: src/mobius/{REGISTRY_FILE} does not exist"
            )
        return Library("mobius", repo, package_dir, True, read_variants(package_dir))
    spec = importlib.util.find_spec("mobius")
    if spec is None or spec.origin is None:
        raise TargetRepoError(
            "mobius is not installed (pip install mobius-onnx) and no --repo given"
        )
    package_dir = Path(spec.origin).parent
    return Library("mobius", package_dir.parent, package_dir, False, read_variants(package_dir))


def read_variants(package_dir: Path) -> tuple[Variant, ...]:
    path = package_dir / REGISTRY_FILE
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise TargetRepoError(
            f"{path} does not parse (line {exc.lineno}: {exc.msg}); fix it before onboarding"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetRepoError(f"cannot read {path}: {exc}") from None
    registrations = _find_dict(tree, REGISTRATIONS)
    if registrations is None:
        raise TargetRepoError(f"{path} has no {REGISTRATIONS} dict literal")
    variants = []
    for key, value in zip(registrations.keys, registrations.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        if not (isinstance(value, ast.Call) and value.args):
            continue
        class_node = value.args[0]
        if not isinstance(class_node, ast.Name):
            continue
        task = next(
            (
                k.value.value
                for k in value.keywords
                if k.arg == "task" and isinstance(k.value, ast.Constant)
            ),
            None,
        )
        variants.append(Variant(key.value, class_node.id, task))
    return tuple(variants)


def _find_dict(tree: ast.Module, name: str) -> ast.Dict | None:
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = node.value
            return value if isinstance(value, ast.Dict) else None
    return None
