"""The static reader's construction graph: which class each child is, found by structure.

Remote code names its parts freely (``self.transformer.h``, ``wte``, ``ln_f``, ``attention``,
``feed_forward``, ``wqkv``, ``w1``/``w2``/``w3``) and often builds its attention through a table
keyed by the attention implementation (``ATTENTION_CLASSES[config._attn_implementation](...)``,
the pattern of transformers 4.36-4.47 that 2024 remote code copied). These helpers read the
source text only (``ast``) and say what a child is: the class it builds, through a dispatch table
if need be, whether it sits in an ``nn.ModuleList``, and what a class does (attention: softmax
over its projections; MLP: linear projections only). The reader decides roles from that, never
from attribute names alone, and refuses with what it found when the structure does not fit.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onboard.analysis.static import SourceModel

# The subscripts a dispatch table of attention classes is keyed by.
IMPLEMENTATION_KEYS = ("_attn_implementation", "attn_implementation")
# Calls that make a class an attention: it takes a softmax over scores, or hands q/k/v to a
# kernel that does.
ATTENTION_CALLS = frozenset(
    {
        "softmax",
        "scaled_dot_product_attention",
        "eager_attention_forward",
        "flash_attn_func",
        "flash_attn_varlen_func",
        "get_interface",
    }
)
# Torch classes that are weights-free or not sub-blocks of their own.
_PLAIN = frozenset({"Dropout", "Identity"})
# torch.nn classes files import by name (``from torch.nn import LayerNorm``).
TORCH_MODULES = frozenset(
    {
        "Linear",
        "Embedding",
        "LayerNorm",
        "RMSNorm",
        "GroupNorm",
        "ModuleList",
        "ModuleDict",
        "Sequential",
        "Conv1d",
        "Conv1D",
        "Parameter",
    }
)


@dataclass(frozen=True)
class Child:
    """One ``self.<attr> = ...`` of a class's ``__init__``, as the reader understands it."""

    attr: str
    node: ast.Assign
    cls: str | None  # the file's class it builds, else torch's (Linear, Embedding, ...)
    in_list: bool = False  # built per element of an nn.ModuleList
    table: str | None = None  # the dispatch table it came through
    refused: str | None = None  # why the class could not be resolved

    def describe(self) -> str:
        if self.table is not None:
            what = f"{self.table}[...] -> {self.cls}" if self.cls else f"{self.table}[...]"
        else:
            what = self.cls or "?"
        return f"{self.attr} ({'ModuleList of ' if self.in_list else ''}{what})"


def _name_of(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _tables(src: SourceModel) -> dict[str, ast.Assign]:
    """Module-level ``NAME = {"key": Class, ...}`` assignments."""
    found = {}
    for node in src.tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
    return found


def dispatch(src: SourceModel, call: ast.Call) -> tuple[str | None, str | None, str | None]:
    """``TABLE[config._attn_implementation](...)``: (table, class read, why not).

    The eager entry is read: it is the plain softmax attention the others (sdpa, flash) only
    compute faster. A table without one is read when one entry is the class every other entry
    derives from. Anything else is refused, with the reason."""
    func = call.func
    assert isinstance(func, ast.Subscript)
    table = ast.unparse(func.value)
    key = ast.unparse(func.slice)
    if not any(key.endswith(f".{k}") for k in IMPLEMENTATION_KEYS):
        return table, None, f"{table}[{key}] is keyed by something else than the attention kind"
    node = _tables(src).get(table)
    if node is None:
        return table, None, f"{table} is not a dict of classes in {src.file.name}"
    value = node.value
    assert isinstance(value, ast.Dict)
    entries: dict[str, str | None] = {}
    for k, v in zip(value.keys, value.values, strict=True):
        if isinstance(k, ast.Constant) and isinstance(k.value, str):
            entries[k.value] = v.id if isinstance(v, ast.Name) else None
    if "eager" in entries:
        chosen = entries["eager"]
        if chosen not in src.classes:
            return table, None, f"{table}['eager'] is {chosen or '?'}, not a class of the file"
        return table, chosen, None
    classes = [c for c in entries.values() if c in src.classes]
    bases = [c for c in classes if all(c == o or c in src.bases(o) for o in classes)]
    if len(classes) == len(entries) and bases:
        return table, bases[0], None
    listed = ", ".join(f"{k}: {v}" for k, v in entries.items())
    why = f"{table} has no 'eager' entry and no entry the others derive from ({listed})"
    return table, None, why


def child(src: SourceModel, attr: str, node: ast.Assign) -> Child:
    """What ``self.<attr> = <node.value>`` builds."""
    in_list = False
    for call in ast.walk(node.value):
        if not isinstance(call, ast.Call):
            continue
        if isinstance(call.func, ast.Subscript):
            table, cls, why = dispatch(src, call)
            return Child(attr, node, cls, in_list, table, why)
        name = _name_of(call.func)
        if name == "ModuleList":
            in_list = True
            continue
        if name in src.classes:
            return Child(attr, node, name, in_list)
    first = next((n for n in ast.walk(node.value) if isinstance(n, ast.Call)), None)
    name = _name_of(first.func) if first is not None else None
    if name == "ModuleList":
        return Child(attr, node, None, True)
    return Child(attr, node, name, in_list)


def children(src: SourceModel, class_name: str) -> dict[str, Child]:
    """The sub-modules and parameters a class's ``__init__`` builds, resolved."""
    found = {}
    for attr, node in src.assignments(class_name).items():
        if is_module(src, node.value):
            found[attr] = child(src, attr, node)
    return found


def is_module(src: SourceModel, value: ast.expr) -> bool:
    """Whether an assignment builds a sub-module or parameter (not a plain value)."""
    for node in ast.walk(value):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Subscript) and isinstance(node.func.value, ast.Name):
            return node.func.value.id in _tables(src)
        name = _name_of(node.func)
        if name in src.classes or name in TORCH_MODULES:
            return True
        if isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) in (
            "nn",
            "torch.nn",
        ):
            return name not in _PLAIN
    return False


def torch_base(src: SourceModel, class_name: str | None) -> str | None:
    """The class itself when it is torch's, else the first base outside the file a class of
    the file derives from (``GemmaTextScaledWordEmbedding`` -> ``Embedding``)."""
    if class_name not in src.classes:
        return class_name
    for owner in (class_name, *src.bases(class_name)):
        for base in src.classes[owner].bases:
            name = _name_of(base)
            if name is not None and name not in src.classes:
                return name
    return None


def scopes(src: SourceModel, class_name: str) -> list[ast.AST]:
    """A class, the file's classes it derives from, and the module-level functions they name."""
    classes = [src.classes[c] for c in (class_name, *src.bases(class_name)) if c in src.classes]
    functions = {n.name: n for n in src.tree.body if isinstance(n, ast.FunctionDef)}
    named = {n.id for cls in classes for n in ast.walk(cls) if isinstance(n, ast.Name)}
    return [*classes, *(functions[name] for name in sorted(named & set(functions)))]


def does_attention(src: SourceModel, class_name: str, depth: int = 1) -> ast.AST | None:
    """The call that makes ``class_name`` an attention (a softmax over scores, or a kernel that
    takes one), in it or in a class it holds (ChatGLM's core_attention), or None."""
    for scope in scopes(src, class_name):
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and _name_of(node.func) in ATTENTION_CALLS:
                return node
            if isinstance(node, ast.Name) and node.id == "ALL_ATTENTION_FUNCTIONS":
                return node
    if depth > 0:
        for part in children(src, class_name).values():
            if part.cls in src.classes and part.cls != class_name:
                found = does_attention(src, part.cls, depth - 1)
                if found is not None:
                    return found
    return None


def linear_calls(src: SourceModel, class_name: str, linears: set[str]) -> list[tuple[str, bool]]:
    """``self.<linear>(arg)`` calls in the class's methods, in source order: (name, whether the
    argument is the method's own first input, the block's input)."""
    found = []
    for cls_name in (class_name, *src.bases(class_name)):
        cls = src.classes.get(cls_name)
        for method in cls.body if cls is not None else ():
            if not isinstance(method, ast.FunctionDef) or method.name == "__init__":
                continue
            params = [a.arg for a in method.args.args[1:]]
            first = params[0] if params else None
            for node in ast.walk(method):
                if not (isinstance(node, ast.Call) and _self_call(node, linears)):
                    continue
                arg = node.args[0] if node.args else None
                on_input = isinstance(arg, ast.Name) and arg.id == first
                found.append((node.func.attr, on_input, node.lineno))
    found.sort(key=lambda item: item[2])
    return [(name, on_input) for name, on_input, _ in found]


def _self_call(node: ast.Call, names: set[str]) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
        and func.attr in names
    )


# -- fused q/k/v ------------------------------------------------------------------------------

_HEADS = re.compile(r"(num_(attention_|key_value_)?heads|n_heads?\b|num_kv_heads|kv_heads)")
_GROUPS = re.compile(r"(groups|q_per_kv|num_key_value_groups)")


@dataclass(frozen=True)
class FusedLayout:
    """How a fused projection's rows split into q, k and v, read from the forward."""

    layout: str | None  # concatenated, per_head, kv_grouped; None: not readable
    node: ast.AST | None  # the statement that shows it
    why: str = ""


def fused_layout(src: SourceModel, class_name: str, fused: str) -> FusedLayout:
    """Follow the fused projection's output through the class's methods: the first reshape
    or split of it decides the layout.

    - split / chunk along the last axis, or a view with the 3 before the heads: q, k and v
      one after the other (``concatenated``);
    - a view with the heads before the 3 (or before ``3 * head_dim``): ``per_head``;
    - a view or einops pattern with ``groups + 2`` per key/value head (InternLM2):
      ``kv_grouped``, each key/value head's query heads, then its key, then its value.
    """
    for cls_name in (class_name, *src.bases(class_name)):
        cls = src.classes.get(cls_name)
        for method in cls.body if cls is not None else ():
            if isinstance(method, ast.FunctionDef) and method.name != "__init__":
                found = _layout_in(method, fused)
                if found is not None:
                    return found
    return FusedLayout(None, src.classes.get(class_name), f"no use of self.{fused}(...) read")


def _layout_in(method: ast.FunctionDef, fused: str) -> FusedLayout | None:
    derived: set[str] = set()
    # local names a view's dims may be spelled with (groups = self.num_key_value_groups + 2)
    local = {
        stmt.targets[0].id: stmt.value
        for stmt in ast.walk(method)
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    }
    reshaped = False  # viewed in a way that decides nothing: a later split is ambiguous
    for stmt in ast.walk(method):
        if not isinstance(stmt, ast.Assign | ast.AnnAssign) or stmt.value is None:
            continue
        value = stmt.value
        from_fused = any(
            isinstance(n, ast.Call) and _self_call(n, {fused}) for n in ast.walk(value)
        ) or any(isinstance(n, ast.Name) and n.id in derived for n in ast.walk(value))
        if not from_fused:
            continue
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            continue  # a piece of it (q = qkv[..., :a]): read by _sliced below
        decided, split, undecided = _verdict(value, local)
        if len({layout for layout, _ in decided}) > 1:
            return FusedLayout(None, stmt, "reshaped two ways")
        if decided:
            layout, why = decided[0]
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if layout != "kv_grouped" and not _index_order(method, names):
                return FusedLayout(None, stmt, "its pieces are taken in another order than q, k, v")
            if layout == "kv_grouped" and not _kv_grouped_order(method, names):
                return FusedLayout(
                    None, stmt, "grouped per key/value head, but k and v are not read as [-2], [-1]"
                )
            return FusedLayout(layout, stmt, why)
        if split and (reshaped or undecided):
            return FusedLayout(None, stmt, "split after a reshape onboard cannot read")
        if split:
            if not _qkv_order(stmt):
                return FusedLayout(None, stmt, "the order of q, k and v is not readable")
            return FusedLayout("concatenated", stmt, "split of the output along its last axis")
        reshaped = reshaped or undecided
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            derived.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    if derived and not reshaped and (sliced := _sliced(method, derived)) is not None:
        return FusedLayout("concatenated", sliced, "sliced along its last axis into q, k, v")
    return None if not derived else FusedLayout(None, method, "no split of it read")


def _sliced(method: ast.FunctionDef, derived: set[str]) -> ast.AST | None:
    """``q = qkv[..., :a]``, ``k = qkv[..., a:b]``, ``v = qkv[..., b:]`` (Phi-3): three slices
    of the last axis in q, k, v order, the first from the start and the last to the end."""
    slices: dict[str, tuple[ast.Assign, ast.Slice]] = {}
    for stmt in ast.walk(method):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        value, target = stmt.value, stmt.targets[0]
        if not (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id in derived
            and isinstance(value.slice, ast.Tuple)
            and len(value.slice.elts) == 2
            and ast.unparse(value.slice.elts[0]) == "..."
            and isinstance(value.slice.elts[1], ast.Slice)
        ):
            continue
        letter = target.id.lower().lstrip("x_")[:1]
        if letter in "qkv" and letter not in slices:
            slices[letter] = (stmt, value.slice.elts[1])
    if set(slices) != {"q", "k", "v"}:
        return None
    q, k, v = (slices[letter][1] for letter in "qkv")
    if q.lower is not None or v.upper is not None or k.lower is None or k.upper is None:
        return None
    return slices["q"][0]


def _index_order(method: ast.FunctionDef, names: set[str]) -> bool:
    """Pieces taken by a constant index along the 3 (``q = proj[0]``, ``k = qkv[..., 1, :]``)
    must be q, k, v in that order; no such pieces, nothing to contradict."""
    for stmt in ast.walk(method):
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)):
            continue
        value = stmt.value
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            value = value.func.value  # proj[0].view(...).transpose(...)
        if not (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id in names
        ):
            continue
        parts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        index = next(
            (p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, int)),
            None,
        )
        if index is None:
            negative = next((p for p in parts if isinstance(p, ast.UnaryOp)), None)
            if negative is None or not isinstance(negative.operand, ast.Constant):
                continue
            index = -negative.operand.value
        letter = stmt.targets[0].id.lower().lstrip("x_")[:1]
        if letter in "qkv" and "qkv".index(letter) != index % 3:
            return False
    return True


def _kv_grouped_order(method: ast.FunctionDef, names: set[str]) -> bool:
    """InternLM2's rows per key/value head: k is the next-to-last piece, v the last."""
    found: dict[str, int] = {}
    for stmt in ast.walk(method):
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)):
            continue
        value = stmt.value
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            value = value.func.value
        if not (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id in names
        ):
            continue
        parts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        for part in parts:
            if isinstance(part, ast.UnaryOp) and isinstance(part.operand, ast.Constant):
                letter = stmt.targets[0].id.lower().lstrip("x_")[:1]
                found.setdefault(letter, -part.operand.value)
    return found.get("k") == -2 and found.get("v") == -1


def _verdict(
    value: ast.AST, local: dict[str, ast.expr] | None = None
) -> tuple[list[tuple[str, str]], bool, bool]:
    """(layouts the reshapes in ``value`` decide, whether it splits, whether it reshapes in a
    way that decides nothing)."""
    decided: list[tuple[str, str]] = []
    split = undecided = False
    for node in ast.walk(value):
        if not isinstance(node, ast.Call):
            continue
        name = _name_of(node.func)
        if name == "rearrange" and len(node.args) >= 2:
            found = _einops(node)
            if found is None:
                undecided = True
            else:
                decided.append(found)
        elif name in ("view", "reshape", "unflatten"):
            shape = list(node.args)
            if name == "unflatten" and len(shape) == 2 and isinstance(shape[1], ast.Tuple):
                shape = list(shape[1].elts)
            if len(shape) == 1 and isinstance(shape[0], ast.Tuple | ast.List):
                shape = list(shape[0].elts)
            found = _shape_verdict([(local or {}).get(_local_name(d), d) for d in shape])
            if found is None:
                undecided = True
            else:
                decided.append(found)
        elif name in ("split", "chunk"):
            split = True
    return decided, split, undecided


def _local_name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else ""


_HEAD_DIM = re.compile(r"head_(dim|size)")
_WIDTH = re.compile(r"(hidden|embed|split_size|_heads?\b)")


def _shape_verdict(shape: list[ast.AST]) -> tuple[str, str] | None:
    """A view of the fused output: where the 3 (or ``groups + 2``) sits among the dims."""
    texts = [ast.unparse(s).replace(" ", "") for s in shape]
    why = f"view ({', '.join(ast.unparse(s) for s in shape)})"
    for i, text in enumerate(texts):
        if _GROUPS.search(text) and ("+2" in text or text.startswith("2+")):
            return "kv_grouped", why
        if text == "3":
            if any(_HEADS.search(t) or _WIDTH.search(t) for t in texts[i + 1 :]):
                return "concatenated", why
            if any(_HEADS.search(t) for t in texts[:i]):
                return "per_head", why
            return None
        if text.startswith("3*") or text.endswith("*3"):
            if _HEAD_DIM.search(text):
                return "per_head", why
            if _WIDTH.search(text):
                return "concatenated", why
            return None
    return None


def _einops(call: ast.Call) -> tuple[str, str] | None:
    pattern = call.args[1]
    if not (isinstance(pattern, ast.Constant) and isinstance(pattern.value, str)):
        return None
    left = pattern.value.split("->")[0]
    group = re.search(r"\(([^)]*)\)", left)
    if group is None:
        return None
    factors = group.group(1).split()
    sizes = {k.arg: ast.unparse(k.value).replace(" ", "") for k in call.keywords if k.arg}
    for i, factor in enumerate(factors):
        size = sizes.get(factor, factor)
        if "+2" in size or size.startswith("2+"):
            return "kv_grouped", f"rearrange {pattern.value!r}, {factor}={sizes.get(factor)}"
        if size == "3" or factor in ("three", "qkv"):
            layout = "concatenated" if i == 0 else "per_head"
            return layout, f"rearrange {pattern.value!r}"
    return None


def _qkv_order(stmt: ast.AST) -> bool:
    """A split unpacked into names: they must read q, k, v in that order."""
    if not isinstance(stmt, ast.Assign) or not isinstance(stmt.targets[0], ast.Tuple):
        return True  # indexed later; the index order is checked by the caller's trial
    names = [ast.unparse(e).lower().lstrip("x_") for e in stmt.targets[0].elts]
    if len(names) != 3:
        return False
    return [n[:1] for n in names] == ["q", "k", "v"]


# -- ALiBi ------------------------------------------------------------------------------------


def alibi_slopes(src: SourceModel) -> tuple[ast.AST | None, ast.AST | None]:
    """(the standard ALiBi slope formula ``2 ** (-(2 ** -(log2(n) - 3)))``, anything named for
    ALiBi); each None when absent."""
    formula = named = None
    for node in ast.walk(src.tree):
        if formula is None and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            text = ast.unparse(node).replace(" ", "")
            if "log2(" in text and "-3" in text and text.startswith("2**"):
                formula = node
        if named is None and isinstance(node, ast.FunctionDef | ast.Name | ast.Attribute):
            label = node.name if isinstance(node, ast.FunctionDef) else ast.unparse(node)
            if "alibi" in label.lower():
                named = node
    return formula, named
