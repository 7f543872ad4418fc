"""Which models a model's classes come from, read from transformers' own source.

transformers writes most new models as ``modular_<name>.py`` files whose classes subclass other
models' classes (``class Qwen3Attention(LlamaAttention)``); older ones carry
``# Copied from transformers.models.<x>...`` comments. Both say, per role (attention, MLP, norm,
decoder layer ...), which model a class was taken from. Parents are mixed: Qwen3 takes its
attention from Llama and its MLP from Gemma, so "closest model" is answered per role.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROLES = (
    ("moe", re.compile(r"(SparseMoeBlock|MoeBlock|Moe|MoE|Experts|TopKRouter|Router)$")),
    ("decoder_layer", re.compile(r"DecoderLayer$")),
    ("attention", re.compile(r"Attention$")),
    ("mlp", re.compile(r"MLP$")),
    ("norm", re.compile(r"(RMSNorm|LayerNorm|Norm)$")),
    ("rotary", re.compile(r"RotaryEmbedding$")),
    ("causal_lm", re.compile(r"ForCausalLM$")),
    ("model", re.compile(r"Model$")),
)
PRIMARY_ORDER = ("decoder_layer", "attention", "model", "mlp", "moe", "causal_lm", "norm")
_COPIED = re.compile(r"#\s*Copied from transformers\.models\.(\w+)\.modeling_\w+\.(\w+)")
_MODEL_IMPORT = re.compile(r"^(?:\.\.|\.\.\.models\.|transformers\.models\.)(\w+)\.modeling_\w+$")


@dataclass(frozen=True)
class Inheritance:
    child_class: str
    role: str
    parent_model: str  # module directory name under transformers/models
    parent_class: str
    where: str  # file:line


@dataclass(frozen=True)
class Ancestry:
    model: str  # module directory name
    parents: tuple[Inheritance, ...]

    def by_role(self) -> dict[str, Inheritance]:
        """The first parent found for each role."""
        found: dict[str, Inheritance] = {}
        for link in self.parents:
            found.setdefault(link.role, link)
        return found

    @property
    def primary(self) -> str | None:
        roles = self.by_role()
        return next((roles[r].parent_model for r in PRIMARY_ORDER if r in roles), None)


def models_dir() -> Path:
    import transformers

    return Path(transformers.__file__).parent / "models"


def role_of(class_name: str) -> str | None:
    return next((role for role, pattern in ROLES if pattern.search(class_name)), None)


@cache
def ancestry(model: str) -> Ancestry:
    """Parents of ``model`` (a transformers module directory), from its modular file or comments."""
    folder = models_dir() / model
    modular = folder / f"modular_{model}.py"
    if modular.is_file():
        return Ancestry(model, _from_modular(modular, model))
    modeling = folder / f"modeling_{model}.py"
    if modeling.is_file():
        return Ancestry(model, _from_copied_comments(modeling, model))
    return Ancestry(model, ())


def chain(model: str, *, limit: int = 8) -> tuple[str, ...]:
    """``model`` and its primary parents up to the root (qwen3_5 -> qwen3_next -> ... -> llama)."""
    found = [model]
    while len(found) < limit:
        parent = ancestry(found[-1]).primary
        if parent is None or parent in found:
            break
        found.append(parent)
    return tuple(found)


def role_chain(model: str, role: str, *, limit: int = 8) -> tuple[str, ...]:
    """The models the ``role`` class of ``model`` descends from, nearest first."""
    found = [model]
    while len(found) < limit:
        link = ancestry(found[-1]).by_role().get(role)
        parent = link.parent_model if link else ancestry(found[-1]).primary
        if parent is None or parent in found:
            break
        found.append(parent)
    return tuple(found[1:])


def _from_modular(path: Path, model: str) -> tuple[Inheritance, ...]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return ()
    imported: dict[str, tuple[str, str]] = {}  # local name -> (model dir, class name)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            match = _MODEL_IMPORT.match(("." * node.level) + node.module)
            if match and match.group(1) != model:
                for alias in node.names:
                    imported[alias.asname or alias.name] = (match.group(1), alias.name)
    links = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            name = base.id if isinstance(base, ast.Name) else None
            if name in imported:
                parent_model, parent_class = imported[name]
                role = role_of(node.name) or role_of(parent_class)
                if role:
                    links.append(
                        Inheritance(
                            node.name,
                            role,
                            parent_model,
                            parent_class,
                            f"{path.name}:{node.lineno}",
                        )
                    )
    return tuple(links)


def _from_copied_comments(path: Path, model: str) -> tuple[Inheritance, ...]:
    links = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        match = _COPIED.search(line)
        if not match or match.group(1) == model:
            continue
        following = next(
            (
                text
                for text in lines[number : number + 3]
                if text.lstrip().startswith(("class ", "def "))
            ),
            "",
        )
        child = re.match(r"\s*class (\w+)", following)
        parent_class = match.group(2)
        role = role_of(child.group(1) if child else parent_class) or role_of(parent_class)
        if role and child:
            links.append(
                Inheritance(
                    child.group(1), role, match.group(1), parent_class, f"{path.name}:{number}"
                )
            )
    return tuple(links)


def module_dir(model_type: str) -> str:
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    return model_type_to_module_name(model_type)


def closest_per_role(model_type: str, known: frozenset[str]) -> dict[str, str]:
    """For each role, the nearest ancestor whose model type the target library knows."""
    types_by_dir: dict[str, list[str]] = {}
    for key in known:
        try:
            types_by_dir.setdefault(module_dir(key), []).append(key)
        except Exception:  # keys that are architecture names or unknown types map to no folder
            continue
    found = {}
    for role in ("attention", "mlp", "moe", "norm", "decoder_layer", "model"):
        for parent in role_chain(module_dir(model_type), role):
            if parent in types_by_dir:
                found[role] = sorted(types_by_dir[parent])[0]
                break
    return found
