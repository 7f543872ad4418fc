"""Decoder computations beyond the common ones, each read from the tiny HF model's modules.

One reader per spec field: Doge's dynamic attention mask (``AttentionSpec.dynamic_mask``) and
learned residual gates (``TextDecoderSpec.residual_gates``), DiffLlama's differential attention
(``AttentionSpec.differential``), attention sinks (``AttentionSpec.sinks``). Each recognises
the parameters that carry the computation and returns them with the evidence; the spec check
then proves the reading by running it against HF, so a look-alike that computes something else
ends as a mismatch, never as generated code.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.reader import LAYER0
from onboard.analysis.source_lines import init_assignment, module_functions
from onboard.block_specs import DifferentialSpec, DynamicMaskSpec
from onboard.source import SourceFile
from onboard.spec import Evidence
from onboard.tiny import KEEP_WINDOW_KEY

_LAMBDA = re.compile(r"^lambda_([qk])([12])$")
_DIFFERENTIAL_ORDER = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")
_ATTENTION = f"{LAYER0}self_attn."


@dataclass(frozen=True)
class Reading:
    """A recognised variant: its spec value, the evidence, and the names of the parameters it
    explains (relative to the attention, or to the layer for residual gates)."""

    value: Any
    evidence: tuple[Evidence, ...]
    parameters: tuple[str, ...]


def dynamic_mask(
    attention: Any, kv_heads: int, head_dim: int, config: Any, files: Sequence[SourceFile]
) -> Reading | None:
    """One bare parameter per kv head and a linear from the values' width to one entry per kv
    head: Doge's decay ``A`` and ``dt_proj``."""
    import torch

    bare = [n for n, p in attention.named_parameters(recurse=False) if p.shape == (kv_heads,)]
    linears = [
        n
        for n, m in attention.named_children()
        if isinstance(m, torch.nn.Linear)
        and (m.in_features, m.out_features) == (kv_heads * head_dim, kv_heads)
    ]
    if len(bare) != 1 or len(linears) != 1:
        return None
    decay, proj = bare[0], linears[0]
    keep = KEEP_WINDOW_KEY if getattr(config, KEEP_WINDOW_KEY, None) is not None else None
    cls = type(attention).__name__
    evidence = [
        Evidence("probe", f"{_ATTENTION}{decay}", f"shape ({kv_heads},): one per kv head"),
        Evidence("probe", f"{_ATTENTION}{proj}", f"values -> one entry per kv head ({kv_heads})"),
    ]
    evidence += [f.evidence for a in (decay, proj) if (f := init_assignment(files, cls, a))]
    if keep is not None:
        evidence.append(Evidence("config", f"config.json:{keep}", repr(getattr(config, keep))))
    names = (decay, *(f"{proj}.{n}" for n, _ in getattr(attention, proj).named_parameters()))
    bias = getattr(attention, proj).bias is not None
    return Reading(DynamicMaskSpec(decay, proj, keep, bias), tuple(evidence), names)


def sinks(attentions: Sequence[Any], heads: int, files: Sequence[SourceFile]) -> Reading | None:
    """One bare parameter per query head in every attention layer, and no other bare
    parameter: a sink logit per head (GPT-OSS, Granite SWA). Doge's per-head decay has a
    linear beside it and is read as the dynamic mask instead."""
    names = set()
    for attention in attentions:
        bare = [(n, tuple(p.shape)) for n, p in attention.named_parameters(recurse=False)]
        if len(bare) != 1 or bare[0][1] != (heads,):
            return None
        names.add(bare[0][0])
    if len(names) != 1:
        return None
    (name,) = names
    evidence = [Evidence("probe", f"{_ATTENTION}{name}", f"shape ({heads},): one per head")]
    found = init_assignment(files, type(attentions[0]).__name__, name)
    evidence += [found.evidence] if found else []
    return Reading(name, tuple(evidence), (name,))


def differential(
    attentions: Sequence[Any],
    head_dim: int,
    config: Any,
    files: Sequence[SourceFile],
    eps_keys: Sequence[str],
) -> Reading | None:
    """Four head_dim parameters lambda_q1, lambda_k1, lambda_q2, lambda_k2, a norm with nothing
    to learn over twice the head, and a per-layer lambda_init whose formula the source gives."""
    first = attentions[0]
    lambdas = {
        n
        for n, p in first.named_parameters(recurse=False)
        if _LAMBDA.match(n) and p.shape == (head_dim,)
    }
    if lambdas != set(_DIFFERENTIAL_ORDER):
        return None
    norms = [
        (n, m)
        for n, m in first.named_children()
        if "norm" in type(m).__name__.lower() and not list(m.parameters())
    ]
    if len(norms) != 1:
        return None
    norm_name, norm = norms[0]
    eps = getattr(norm, "eps", None) or getattr(norm, "variance_epsilon", None)
    eps_key = next((k for k in eps_keys if getattr(config, k, None) == eps), None)
    cls = type(first).__name__
    formula = _lambda_init_formula(files, cls)
    if formula is None or eps_key is None:
        return None
    expression, found = formula
    for index, attention in enumerate(attentions):
        value = evaluate(expression, index)
        if not math.isclose(value, float(getattr(attention, "lambda_init", math.nan))):
            return None
    norm_line = init_assignment(files, cls, norm_name)
    evidence = (
        Evidence("probe", _ATTENTION + ", ".join(_DIFFERENTIAL_ORDER), f"shape ({head_dim},)"),
        Evidence("probe", f"{_ATTENTION}{norm_name}", f"nothing to learn, width {2 * head_dim}"),
        *((norm_line.evidence,) if norm_line else ()),
        found,
        Evidence("config", f"config.json:{eps_key}", "the pair norm's epsilon"),
    )
    spec = DifferentialSpec(_DIFFERENTIAL_ORDER, expression, norm_name, eps_key)
    return Reading(spec, evidence, _DIFFERENTIAL_ORDER)


def residual_gates(layer: Any, hidden: int, files: Sequence[SourceFile]) -> Reading | None:
    """Two hidden-sized parameters of the layer itself that scale the residual at each add
    (Doge: ``x = input_residual * x + attn(norm(x))``): the first registered is the
    attention's, as HF creates them beside their sub-blocks; the end-to-end check proves it."""
    gates = [n for n, p in layer.named_parameters(recurse=False) if p.shape == (hidden,)]
    if len(gates) != 2:
        return None
    cls = type(layer).__name__
    evidence = [
        Evidence("probe", f"{LAYER0}{n}", f"shape ({hidden},), the layer's own") for n in gates
    ]
    evidence += [f.evidence for n in gates if (f := init_assignment(files, cls, n))]
    return Reading((("attn", gates[0]), ("mlp", gates[1])), tuple(evidence), tuple(gates))


def evaluate(expression: str, layer_idx: int) -> float:
    """A per-layer formula the analysis read (DiffLlama's lambda_init), at one layer; anything
    but arithmetic over ``layer_idx`` and ``math`` functions is refused, not run."""
    if not _only_math(expression):
        raise ValueError(f"not a formula over layer_idx: {expression!r}")
    namespace = {"math": math, "__builtins__": {}}
    return float(eval(expression, namespace, {"layer_idx": layer_idx}))


def _lambda_init_formula(
    files: Sequence[SourceFile], class_name: str
) -> tuple[str, Evidence] | None:
    """``self.lambda_init = f(layer_idx)`` in the attention, with ``f`` a module function that
    returns one expression: that expression over ``layer_idx``, if it uses only math."""
    found = init_assignment(files, class_name, "lambda_init")
    call = found.value if found else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and len(call.args) == 1):
        return None
    function = module_functions(files, found.evidence).get(call.func.id)
    if function is None or len(function.args.args) != 1 or len(function.body) != 1:
        return None
    body = function.body[0]
    if not isinstance(body, ast.Return) or body.value is None:
        return None
    expression = _renamed(ast.unparse(body.value), function.args.args[0].arg, "layer_idx")
    return (expression, found.evidence) if _only_math(expression) else None


def _renamed(expression: str, old: str, new: str) -> str:
    return re.sub(rf"\b{re.escape(old)}\b", new, expression)


def _only_math(expression: str) -> bool:
    """Numbers, arithmetic, ``layer_idx`` and ``math.<function>`` calls, nothing else."""
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Constant)
    try:
        tree = ast.parse(expression, mode="eval")  # vetted here before evaluate() runs it
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ("layer_idx", "math"):
            continue
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "math"
            and hasattr(math, node.attr)
        ):
            continue
        if isinstance(node, (ast.Call, ast.Load, *allowed)):
            continue
        return False
    return True
