"""Scales: tied embeddings, embedding scale, config multipliers, final soft-cap, lm_head bias."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from onboard.analysis.static.source_model import (
    called_class,
    config_key,
    first_tanh,
    is_self_attr,
    mentions,
)
from onboard.spec import Evidence, ScaleSpec
from onboard.tiny import MULTIPLIER_KEYS

if TYPE_CHECKING:
    from onboard.analysis.static.reader import StaticReader


# Config keys whose use in arithmetic the reader explains (soft-caps, embedding scale, the
# multipliers' divisors) or that only size things.
_READ_KEYS = frozenset(
    {
        "final_logit_softcapping",
        "hidden_size",
        "num_hidden_layers",
        "vocab_size",
        "num_attention_heads",
        "head_dim",
    }
)


def tied_embeddings(reader: StaticReader) -> bool:
    tied = bool(reader.cfg.get("tie_word_embeddings", True))
    reader.log.add(
        "text.tie_word_embeddings",
        Evidence("config", "config.json:tie_word_embeddings", str(tied)),
    )
    return tied


def embedding_scale(reader: StaticReader, model_class: str, embed: ast.Assign | None) -> str:
    candidates = [reader.src.classes[model_class]]
    if embed is not None and called_class(embed.value) in reader.src.classes:
        candidates.append(reader.src.classes[called_class(embed.value)])
    for cls in candidates:
        for node in ast.walk(cls):
            if _is_sqrt_hidden(node):
                reader.cite("text.embedding_scale", node)
                reader.cite_uses("text.embedding_scale", cls, "embed_scale")
                return "sqrt_hidden"
    reader.absent("text.embedding_scale", model_class, "embeddings used as looked up")
    return "none"


def read_scales(
    reader: StaticReader, sites: Mapping[str, Sequence[str | None]], skip: set[str | None]
) -> tuple[ScaleSpec, ...]:
    """Config multipliers: where the code multiplies or divides by ``config.<key>`` (or an
    attribute set from it). A use in any other place is a delta, never dropped."""
    found: list[ScaleSpec] = []
    for key in MULTIPLIER_KEYS:
        if key in skip or not any(_reads_key(n, key) for n in ast.walk(reader.src.tree)):
            continue
        uses = [
            (site, node, form)
            for site, classes in sites.items()
            for name in classes
            if name in reader.src.classes
            for node, form in _scaling_uses(reader.src.classes[name], key)
        ]
        if len({site for site, _, _ in uses}) != 1 or any(f != uses[0][2] for _, _, f in uses):
            where = next(n for n in ast.walk(reader.src.tree) if _reads_key(n, key))
            reader.delta(f"config multiplier {key} used where onboard cannot place it", where)
            continue
        site, node, form = uses[0]
        reader.cite(f"text.scales.{site}", node)
        found.append(ScaleSpec(site, key, form))
    if not found:
        reader.absent("text.scales", reader.causal_lm, "no config multiplier")
    return tuple(found)


def unread_config_math(reader: StaticReader, classes: Sequence[str]) -> None:
    """A forward that multiplies or divides by a config value onboard does not read
    (MiniCPM's logits / (hidden_size / dim_model_base)) would be dropped: a delta."""
    read = {*MULTIPLIER_KEYS, *_READ_KEYS}
    for class_name in classes:
        forward = reader.src.method(class_name, "forward")
        for node in ast.walk(forward) if forward is not None else ():
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div)):
                continue
            keys = {config_key(n) for n in ast.walk(node)} - {None}
            unread = sorted(k for k in keys if k not in read)
            if unread:
                reader.delta(
                    f"{class_name}.forward scales by config.{', config.'.join(unread)}, "
                    "which onboard does not read",
                    node,
                    ast.unparse(node)[:100],
                )
                return


def lm_head_bias(reader: StaticReader, head: ast.Assign | None) -> bool:
    """torch's Linear has a bias unless built with ``bias=False``."""
    if head is None:
        reader.absent("text.lm_head_bias", reader.causal_lm, "no lm_head")
        return False
    reader.cite("text.lm_head_bias", head)
    return reader.bool_keyword(head, "bias", default=True)[0]


def final_softcap(reader: StaticReader) -> float | None:
    forward = reader.src.method(reader.causal_lm, "forward")
    tanh = first_tanh([forward]) if forward is not None else None
    if tanh is None:
        reader.absent("text.final_logit_softcap", reader.causal_lm, "no tanh on the logits")
        return None
    reader.cite("text.final_logit_softcap", tanh)
    reader.cite_uses("text.final_logit_softcap", forward, "final_logit_softcapping")
    return read_cap(reader, "final_logit_softcapping", tanh, "final logits")


def read_cap(reader: StaticReader, key: str, tanh: ast.AST, what: str) -> float | None:
    """The soft-cap the code applies with ``tanh``: the config value; null turns it off."""
    if not reader.cfg.has(key):
        reader.delta(f"{what} soft-capped by a value onboard cannot read", tanh, f"no {key}")
        return None
    cap = reader.cfg.get(key)
    if cap is None or cap == 0:
        return None
    if not isinstance(cap, int | float):
        reader.delta(f"{what} soft-cap {key} is not a number", tanh, repr(cap)[:60])
        return None
    return float(cap)


def _is_sqrt_hidden(node: ast.AST) -> bool:
    """``hidden_size ** 0.5`` (any spelling of the hidden size on the left)."""
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Pow)
        and "hidden_size" in ast.unparse(node.left)
        and isinstance(node.right, ast.Constant)
        and node.right.value == 0.5
    )


def _reads_key(node: ast.AST, key: str) -> bool:
    return config_key(node) == key


def _scaling_uses(cls: ast.ClassDef, key: str) -> list[tuple[ast.AST, str]]:
    """``x * factor`` / ``x / factor`` in ``cls`` where the factor is ``config.<key>`` or a
    ``self.<attr>`` the class set from it (MiniCPM3: scale_depth / math.sqrt(layers)), or a
    sub-module built with it (``embed_scale=config.scale_emb``)."""
    attrs: dict[str, str] = {}
    uses: list[tuple[ast.AST, str]] = []
    for node in ast.walk(cls):
        if not isinstance(node, ast.Assign):
            continue
        if not any(_reads_key(n, key) for n in ast.walk(node.value)):
            continue
        calls = [n for n in ast.walk(node.value) if isinstance(n, ast.Call)]
        if any(_reads_key(k.value, key) for call in calls for k in call.keywords):
            uses.append((node, "times"))
            continue
        right = node.value.right if isinstance(node.value, ast.BinOp) else None
        over_sqrt = (
            right is not None and mentions(right, "sqrt") and mentions(right, "num_hidden_layers")
        )
        for target in node.targets:
            if is_self_attr(target):
                attrs[target.attr] = "times_over_sqrt_layers" if over_sqrt else "times"

    def factor(operand: ast.AST) -> str | None:
        if _reads_key(operand, key):
            return "times"
        if is_self_attr(operand) and operand.attr in attrs:
            return attrs[operand.attr]
        return None

    for node in ast.walk(cls):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
            form = factor(node.right) or (
                factor(node.left) if isinstance(node.op, ast.Mult) else None
            )
            if form is None:
                continue
            if isinstance(node.op, ast.Div):
                if form != "times":
                    continue
                form = "divided_by"
            uses.append((node, form))
    return uses
