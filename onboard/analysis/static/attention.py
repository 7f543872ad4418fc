"""Attention: projections, a fused q/k/v layout, ALiBi, RoPE calls, the scale, the soft-cap."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING

from onboard.analysis import static_graph as graph
from onboard.analysis.static.scales import read_cap
from onboard.analysis.static.source_model import (
    call_of,
    called_class,
    config_key,
    first_tanh,
    is_one,
    is_self_attr,
    keyword_value,
    mentions,
    name_of,
)
from onboard.analysis.static.structure import unknown_children
from onboard.block_specs import AttentionSpec
from onboard.tiny import MULTIPLIER_KEYS

if TYPE_CHECKING:
    from onboard.analysis.static.reader import StaticReader


# What attention code calls its output projection, when the forward does not show it.
OUTPUT_NAMES = frozenset({"o_proj", "wo", "dense", "out_proj", "c_proj", "o"})


def read_attention(reader: StaticReader, attention_class: str) -> AttentionSpec:
    parts = reader.present(attention_class)
    heads = int(reader.cfg.get("num_attention_heads", 1))
    kv_heads = int(reader.cfg.get("num_key_value_heads") or heads)
    head_dim = int(reader.cfg.get("head_dim") or int(reader.cfg.get("hidden_size", 0)) // heads)
    projections = _projections(reader, attention_class, parts)
    unknown_children(
        reader,
        attention_class,
        parts,
        {*projections.values(), "q_norm", "k_norm", "rotary_emb"},
    )
    fused = projections.get("qkv")
    layout, groups = "concatenated", 1
    if fused is not None:
        layout, groups = _fused_layout(reader, attention_class, fused, heads, kv_heads)
    biases, bias_keys = {}, []
    for letter in "qkvo":
        attr = projections.get(letter, fused if letter != "o" else None)
        node = parts.get(attr) if attr else None
        if node is None:
            biases[letter] = False
            continue
        if attr != f"{letter}_proj" and attr != fused:
            reader.names[f"{letter}_proj"] = attr
        value, key = reader.bool_keyword(node, "bias", default=True)
        biases[letter] = value
        if key:
            bias_keys.append((letter, key))
        reader.cite(
            f"text.attention.{letter}_bias", keyword_value(call_of(node.value), "bias") or node
        )
    qk_norm = "none"
    if "q_norm" in parts:
        width = (
            call_of(parts["q_norm"].value).args[0] if call_of(parts["q_norm"].value).args else None
        )
        text = ast.unparse(width) if width is not None else ""
        qk_norm = "full_width" if "num" in text and "head" in text else "per_head"
        reader.cite("text.attention.qk_norm", parts["q_norm"])
    scale_key = _scale_key(reader, parts.get("scaling"))
    if "scaling" not in parts:
        _cite_plain_scale(reader, attention_class)
    scale = head_dim**-0.5
    power = 1.0 if scale_key in MULTIPLIER_KEYS else -0.5
    if scale_key is not None:
        value = reader.cfg.get(scale_key)
        if isinstance(value, int | float) and value > 0:
            scale = float(value) ** power
        else:
            reader.delta(f"attention scale key {scale_key} has no usable value", None, repr(value))
            scale_key = None
    softcap = _attention_softcap(reader, attention_class)
    reader.cite("text.attention.head_dim", reader.src.classes[attention_class])
    reader.absent("text.attention.mla", attention_class, "q/k/v projections, no latent ranks")
    if qk_norm == "none":
        reader.absent("text.attention.qk_norm", attention_class, "no q_norm / k_norm")
    if fused is None:
        reader.absent("text.attention.fused_qkv", attention_class, "q, k, v projected apart")
    reader.absent("text.rope_layers_key", attention_class, "no per-layer RoPE list")
    return AttentionSpec(
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        q_bias=biases["q"],
        k_bias=biases["k"],
        v_bias=biases["v"],
        o_bias=biases["o"],
        qk_norm=qk_norm,
        scale=scale,
        softcap=float(softcap) if softcap else None,
        bias_keys=tuple(bias_keys),
        scale_key=scale_key,
        scale_power=power,
        fused_qkv=fused,
        fused_qkv_layout=layout,  # type: ignore[arg-type]
        fused_qkv_groups=groups,
        alibi=_alibi(reader, attention_class),
    )


def _projections(
    reader: StaticReader, attention_class: str, parts: Mapping[str, ast.Assign]
) -> dict[str, str]:
    """Letter (q, k, v, o, or qkv for one fused projection) -> the attention's linear.

    The output projection is the linear applied to something else than the block's input;
    the input ones are the others: three are told apart by their names (q_proj, wq, query),
    one is a fused q/k/v projection whose layout the forward shows."""
    linears = [a for a, n in parts.items() if called_class(n.value) == "Linear"]
    if {"q_proj", "k_proj", "v_proj", "o_proj"} <= set(linears):
        return {letter: f"{letter}_proj" for letter in "qkvo"}
    calls = graph.linear_calls(reader.src, attention_class, set(linears))
    on_input = {name for name, first in calls if first}
    outputs = [n for n in dict.fromkeys(name for name, _ in calls) if n not in on_input]
    named_o = [n for n in linears if n.lower() in OUTPUT_NAMES]
    found: dict[str, str] = {}
    if len(outputs) == 1:
        found["o"] = outputs[0]
    elif len(named_o) == 1:
        found["o"] = named_o[0]
    inputs = [n for n in linears if n != found.get("o")]
    letters = {_letter(n): n for n in inputs}
    if len(inputs) == 1 and "o" in found:
        found["qkv"] = inputs[0]
        reader.cite("text.attention.fused_qkv", parts[inputs[0]])
    elif len(inputs) == 3 and set(letters) == {"q", "k", "v"} and "o" in found:
        found.update(letters)
    else:
        described = ", ".join(
            f"{a} ({called_class(n.value)})"
            for a, n in parts.items()
            if graph.is_module(reader.src, n.value)
        )
        reader.delta(
            f"attention {attention_class}: found children {described or 'none'}; expected "
            "q, k, v projections told apart by name (q_proj, wq, query, ...) or one fused "
            "q/k/v linear, and one output linear applied to the attention's result",
            reader.src.classes[attention_class],
        )
    return found


def _fused_layout(
    reader: StaticReader, attention_class: str, fused: str, heads: int, kv_heads: int
) -> tuple[str, int]:
    """The fused projection's rows as the forward splits them (InternLM2's rows per
    key/value head are kv_grouped, per_head when each has one query head)."""
    read = graph.fused_layout(reader.src, attention_class, fused)
    where = read.node or reader.src.classes[attention_class]
    if read.layout is None:
        reader.delta(
            f"fused q/k/v projection {fused}: the forward splits it in a way onboard cannot "
            f"read ({read.why}); expected a split or a view showing q, k, v concatenated or "
            "per head",
            where,
            reader.src.cite(where).detail,
        )
        return "concatenated", 1
    reader.cite("text.attention.fused_qkv", where)
    if read.layout == "kv_grouped" and heads == kv_heads:
        return "per_head", 1  # one query head per key/value head: (head, q/k/v, head_dim)
    return read.layout, 1


def _alibi(reader: StaticReader, attention_class: str) -> bool:
    """ALiBi: the standard slopes computed in the file, and no RoPE applied; anything else
    named for ALiBi is refused, never read as RoPE."""
    formula, named = graph.alibi_slopes(reader.src)
    if formula is None and named is None:
        reader.absent("text.attention.alibi", attention_class, "no ALiBi slopes")
        return False
    where = formula or named
    if formula is None:
        reader.delta(
            "ALiBi with slopes onboard cannot read: expected the ALiBi paper's "
            "2 ** (-(2 ** -(log2(heads) - 3))) series",
            where,
            reader.src.cite(where).detail,
        )
        return False
    if _rope_calls(reader, attention_class):
        reader.delta(
            "ALiBi slopes and RoPE in one file: which layers use which is not readable",
            where,
            reader.src.cite(where).detail,
        )
        return False
    reader.cite("text.attention.alibi", formula)
    if named is not None:
        reader.cite("text.attention.alibi", named)
    return True


def _rope_calls(reader: StaticReader, attention_class: str) -> list[ast.Call]:
    """Calls of a rotary function in any method of the attention (or a class it derives
    from): 2024 code often projects and rotates in a helper of the forward."""
    calls = []
    for owner in (attention_class, *reader.src.bases(attention_class)):
        for node in ast.walk(reader.src.classes[owner]):
            if isinstance(node, ast.Call) and "rotary" in (name_of(node.func) or ""):
                calls.append(node)
    return sorted(calls, key=lambda c: c.lineno)


def _cite_plain_scale(reader: StaticReader, attention_class: str) -> None:
    """Without a ``scaling`` attribute: where the scores are divided by sqrt(head_dim)."""
    for scope in graph.scopes(reader.src, attention_class):
        for node in ast.walk(scope):
            if (
                isinstance(node, ast.BinOp)
                and (
                    (isinstance(node.op, ast.Div) and mentions(node.right, "sqrt"))
                    or (
                        isinstance(node.op, ast.Pow)
                        and ast.unparse(node.right).replace(" ", "") == "-0.5"
                    )
                )
                and (mentions(node, "head_dim") or mentions(node, "head_size"))
            ):
                reader.cite("text.attention.scale", node)
                return


def _scale_key(reader: StaticReader, scaling: ast.Assign | None) -> str | None:
    """``head_dim ** -0.5`` -> None; ``config.k ** -0.5`` -> ``k``; anything else, a delta."""
    if scaling is None:
        return None
    reader.cite("text.attention.scale", scaling)
    expr = scaling.value
    base = None
    if (
        isinstance(expr, ast.BinOp)
        and isinstance(expr.op, ast.Pow)
        and ast.unparse(expr.right).replace(" ", "") == "-0.5"
    ):
        base = expr.left
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div) and is_one(expr.left):
        call = expr.right
        if isinstance(call, ast.Call) and name_of(call.func) == "sqrt" and call.args:
            base = call.args[0]
    key = config_key(base) if base is not None else None
    if base is not None and (key == "head_dim" or ast.unparse(base) == "self.head_dim"):
        return None
    if key is not None:
        return key
    if config_key(expr) in MULTIPLIER_KEYS:  # the config holds the scale itself (Granite)
        return config_key(expr)
    reader.delta(
        "attention scale not explained by head_dim ** -0.5 or config.<key> ** -0.5",
        scaling,
        ast.unparse(expr),
    )
    return None


def _attention_softcap(reader: StaticReader, attention_class: str) -> float | None:
    tanh = first_tanh(reader.with_helpers(attention_class))
    if tanh is None:
        reader.absent("text.attention.softcap", attention_class, "no tanh on the scores")
        return None
    reader.cite("text.attention.softcap", tanh)
    return read_cap(reader, "attn_logit_softcapping", tanh, "attention scores")


def check_attention_forward(
    reader: StaticReader, attention_class: str, attention: AttentionSpec
) -> None:
    """The spec normalises q/k per head before RoPE, as Qwen3 does: check the order."""
    forward = reader.src.method(attention_class, "forward")
    if forward is None:
        reader.delta("attention has no forward", reader.src.classes[attention_class])
        return
    calls = [n for n in ast.walk(forward) if isinstance(n, ast.Call)]
    rope_calls = _rope_calls(reader, attention_class)
    norm_calls = [c for c in calls if is_self_attr(c.func) and c.func.attr in ("q_norm", "k_norm")]
    for call in norm_calls:
        reader.cite("text.attention.qk_norm", call)
    for call in rope_calls:
        reader.cite("text.rope.applied", call)
    if not rope_calls and not attention.alibi:
        reader.delta(
            "attention forward applies no RoPE function and the file computes no ALiBi "
            "slopes: how positions enter is not read",
            forward,
        )
    elif norm_calls and max(c.lineno for c in norm_calls) > rope_calls[0].lineno:
        reader.delta("q/k norm applied after RoPE", max(norm_calls, key=lambda c: c.lineno))
    if attention.qk_norm != "none" and not norm_calls:
        reader.delta("q_norm/k_norm built but never called", forward)


def _letter(name: str) -> str:
    """q, k or v for a projection's name (q_proj, wq, query, W_q); ? otherwise."""
    lowered = name.lower().removeprefix("w_")
    if len(lowered) > 1 and lowered[0] == "w" and lowered[1] in "qkv":
        lowered = lowered[1:]
    for letter, word in (("q", "query"), ("k", "key"), ("v", "value")):
        if lowered.startswith((word, f"{letter}_")) or lowered == letter:
            return letter
    return "?"
