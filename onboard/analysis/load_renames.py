"""Checkpoint names transformers renames when it loads a model (its weight conversion mapping).

transformers v5 saves a model under its checkpoints' original names and renames them on load:
EXAONE's ``transformer.h.N.attn.attention.*`` are LlamaForCausalLM's
``model.layers.N.self_attn.*``, Sarvam-MoE's ``model.word_embeddings`` is ``model.embed_tokens``.
Where saved names leave the module tree the analysis reads (after its own renames), or name
no tensor of a module in it (HY-V3's ``mlp.expert_bias`` in its MoE block), the renamings of
transformers' mapping that touch them become plain substring renames, are checked
against transformers' own renaming of every saved name, and lead the generated renames. A saved
tensor they do not bring onto a parameter (a fused tensor transformers converts on load) is
refused by name before anything is generated, so no adapter drops it; one it only cuts into equal
chunks is read by ``load_splits`` first, and reaches here as its parts.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any

from onboard.errors import UnsupportedFeatureError

Names = tuple[tuple[str, tuple[int, ...]], ...]
Renames = tuple[tuple[str, str], ...]

_SUPPORTED = "onboard maps checkpoint names transformers renames on load so far"
# Regex syntax left in a pattern once its anchors and escaped punctuation are read: not a plain
# name (a backslash left is a class such as \d; a bare dot is read as a dot, as the check of
# every saved name against transformers' renaming would catch it matching anything else)
_REGEX = re.compile(r"[\\^$*+?{}\[\]()|]")
# An escaped punctuation character (``\.``): a literal
_ESCAPED = re.compile(r"\\[^\w\s]")


def renamed(name: str, renames: Renames) -> str:
    """``name`` after ordered substring replacements (as the generated loaders apply them)."""
    for old, new in renames:
        name = name.replace(old, new)
    return name


def read_load_renames(hf_model: Any, model: Any, saved: Names, renames: Renames) -> Renames:
    """The renames transformers applies on load that the saved names need, in its order: empty
    when every saved name, after ``renames``, lies in the module tree of ``model`` (the view the
    analysis reads) or of ``hf_model``; else they must bring each stray name onto a parameter of
    ``hf_model``, or the model is refused."""
    modules = {n for n, _ in model.named_modules()} | {n for n, _ in hf_model.named_modules()}
    tensors = set(model.state_dict()) | set(hf_model.state_dict())
    names = [n for n, _ in saved]
    renamings, converters = _conversions(hf_model)
    stray = [
        n
        for n in names
        if _outside(renamed(n, renames), modules, names, renames)
        or _unknown_leaf(renamed(n, renames), _rename_key(n, renamings, []), modules, tensors)
    ]
    parts = [n for n in names if n not in stray and _part_outside(renamed(n, renames), modules)]
    if not stray and not parts:
        return ()
    used = _firing(renamings, names)
    if not used:
        return ()  # transformers does not rename them either: the spec's readers say the rest
    memory = set(hf_model.state_dict())
    moved = (_part_renamed(n, _rename_key(n, renamings, []), modules) for n in parts)
    if not stray and not any(moved):
        return ()  # parts transformers converts or moves (Kimi's k_conv1d): the readers' to name
    pairs = _idempotent(tuple(pair for r in used for pair in _literal(r, hf_model)))
    for name in names:
        theirs = _rename_key(name, renamings, [])
        ours = renamed(name, pairs)
        if ours != theirs:  # an anchored pattern that also matches inside a name (Ergo's ^norm.)
            raise UnsupportedFeatureError(
                f"transformers renames checkpoint tensor {name} to {theirs} on load, its "
                f"renamings at {_where(used[0], hf_model)} as plain substring renames to "
                f"{ours} ({_SUPPORTED})"
            )
        if name in stray and theirs not in memory:
            raise UnsupportedFeatureError(_converted(name, theirs, converters, hf_model))
    return pairs


def _outside(name: str, modules: set[str], names: list[str], renames: Renames) -> bool:
    """The module holding ``name`` is in neither tree, down to a layer's child (or a top-level
    part); a layer's child holding experts is the MoE reader's (saved one by one under
    another block name, Mixtral's block_sparse_moe)."""
    parts = name.split(".")[:-1]
    depth = 4 if name.startswith("model.layers.") else 2
    path = ".".join(parts[:depth])
    if not path or path in modules or path.endswith(".experts"):
        return False  # experts saved as a layer's own child (Mistral Large 4): the MoE reader's
    return not any(renamed(n, renames).startswith(f"{path}.experts.") for n in names)


def _part_outside(name: str, modules: set[str]) -> bool:
    """A part of a layer's child (a shared expert, a router) in neither tree though the child
    is: Laguna saves mlp.shared_expert, which transformers loads as mlp.shared_experts."""
    parts = name.split(".")[:-1]
    if not name.startswith("model.layers.") or len(parts) <= 4:
        return False
    return ".".join(parts[:4]) in modules and ".".join(parts[:5]) not in modules


def _part_renamed(name: str, theirs: str, modules: set[str]) -> bool:
    """transformers' renaming of ``name`` (``theirs``) renames only its layer child's part,
    into a part the module tree has (mlp.shared_expert.down_proj.weight ->
    mlp.shared_experts.down_proj.weight), not into another block's tensors (GraniteMoE's
    input_linear into the experts' gate_up_proj) or deeper (ERNIE's moe_statics under the
    router): those the readers map."""
    rest = ".".join(name.split(".")[5:])
    part = theirs.removesuffix(f".{rest}") if theirs.endswith(f".{rest}") else ""
    return part.count(".") == 4 and part in modules


# Leaves of the MoE block's router weight in memory (Granite's router.layer, HY-V3's router.gate)
_ROUTER_WEIGHTS = (".gate.weight", ".router.weight")


def _unknown_leaf(name: str, theirs: str, modules: set[str], tensors: set[str]) -> bool:
    """``name`` (``theirs`` after transformers' renames) lies under a layer's child the trees
    have but is none of their tensors (HY-V3's ``mlp.expert_bias``, ``mlp.shared_mlp.*``).
    The MoE reader finds its own by value or leaf: experts (saved one by one, or fused under
    other names), the router's weight, a correction bias saved under its own leaf."""
    parts = name.split(".")
    depth = 4 if name.startswith("model.layers.") else 2
    if ".".join(parts[:depth]) not in modules or name in tensors:
        return False
    moe_reader = any(".experts." in f".{n}" for n in (name, theirs))
    moe_reader |= theirs.endswith(_ROUTER_WEIGHTS) or name.endswith(".e_score_correction_bias")
    return not moe_reader


def _conversions(hf_model: Any) -> tuple[list[Any], list[Any]]:
    """transformers' renamings (plain ones: the subclasses carry state of their own) and
    converters for ``hf_model``, as its loader collects them."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, WeightRenaming

    mapping = get_model_conversion_mapping(hf_model)
    renamings = [t for t in mapping if type(t) is WeightRenaming]
    return renamings, [t for t in mapping if isinstance(t, WeightConverter)]


def _rename_key(name: str, renamings: list[Any], converters: list[Any]) -> str:
    from transformers.core_model_loading import rename_source_key

    return rename_source_key(name, renamings, converters)[0]


def _firing(renamings: list[Any], names: list[str]) -> list[Any]:
    """The renamings that change a saved name, each applied to the names the ones before it
    left (they chain: EXAONE's .attn.attention. -> .self_attn., then .self_attn.out_proj.)."""
    firing = []
    for renaming in renamings:
        after = [_rename_key(n, [renaming], []) for n in names]
        if after != names:
            firing.append(renaming)
        names = after
    return firing


def _literal(renaming: Any, hf_model: Any) -> Renames:
    """A renaming's patterns as plain substrings; one with other regex syntax is refused, as no
    plain rename repeats it."""
    target = renaming.target_patterns[0]
    pairs = []
    for pattern in renaming.source_patterns:
        plain = plain_pattern(pattern)
        if plain is None or _REGEX.search(target.replace(r"\.", ".")):
            raise UnsupportedFeatureError(
                f"transformers renames checkpoint names by the pattern {pattern!r} on load at "
                f"{_where(renaming, hf_model)}: not a plain name ({_SUPPORTED})"
            )
        pairs.append((plain, target))
    return tuple(pairs)


def plain_pattern(pattern: str) -> str | None:
    """The literal text a regex pattern matches, its anchors dropped (``^transformer\\.h\\.``,
    HunYuan V4's ``\\.learnable_sink_param$``), or None for a real regex (a class, a group, a
    repeat). A dropped anchor makes the rename a plain substring rename, which
    read_load_renames checks against transformers' own renaming of every saved name."""
    body = pattern.removeprefix("^")
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1]
    if _REGEX.search(_ESCAPED.sub("", body)):
        return None
    return _ESCAPED.sub(lambda m: m.group()[1], body)


def _idempotent(pairs: Renames) -> Renames:
    """Each rename whose new name holds its old one (A.X-K1's ``post_mlp_layernorm`` ->
    ``mlp.post_mlp_layernorm``) followed by one that undoes it on a name already renamed, so
    the generated loaders read the in-memory names as well as the saved ones."""
    found = []
    for old, new in pairs:
        found.append((old, new))
        if old in new:
            found.append((new.replace(old, new), new))
    return tuple(found)


def _converted(name: str, theirs: str, converters: list[Any], hf_model: Any) -> str:
    """Why a saved tensor fills no parameter though transformers' renamings ran: a converter
    (with its operations), or nothing transformers names."""
    matching = [c for c in converters if _rename_key(theirs, [], [c]) != theirs]
    if not matching:
        return (
            f"checkpoint tensor {name} ({theirs} after transformers' renames on load) fills no "
            f"parameter of {type(hf_model).__name__} ({_SUPPORTED})"
        )
    converter = matching[0]
    operations = ", ".join(type(op).__name__ for op in converter.operations)
    return (
        f"checkpoint tensor {name} is converted on load ({', '.join(converter.source_patterns)} "
        f"-> {', '.join(converter.target_patterns)} by {operations}) at "
        f"{_where(converter, hf_model)} ({_SUPPORTED}, not converted)"
    )


def _where(transform: Any, hf_model: Any) -> str:
    """``conversion_mapping.py:N``: the line writing the transform's first source pattern
    after the line naming the model's type, else that line."""
    from transformers import conversion_mapping

    path = inspect.getsourcefile(conversion_mapping) or "conversion_mapping.py"
    lines = inspect.getsource(conversion_mapping).splitlines()
    model_type = getattr(hf_model.config, "model_type", "")
    start = _first(lines, (f'"{model_type}"',), 0)
    found = _first(lines, transform.source_patterns, start or 0) or start
    return f"{path.rsplit('/', 1)[-1]}:{found}" if found else path.rsplit("/", 1)[-1]


def _first(lines: list[str], needles: Iterable[str], start: int) -> int | None:
    """The 1-based number of the first line from ``start`` holding one of ``needles``."""
    needles = tuple(needles)
    return next(
        (i + 1 for i in range(start, len(lines)) if any(n in lines[i] for n in needles)), None
    )
