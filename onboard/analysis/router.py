"""The MoE router: what turns a token's logits into its experts and their weights.

Routers differ in small ways that decide every token's experts (softmax or sigmoid, before or
after top-k, renormalised or not, a correction bias, group-limited choice, a scaling factor,
shared experts scored beside the routed ones). Instead of guessing from names, every plausible
router is run on the tiny model's own router weights and kept only if it reproduces the HF
router's output exactly; ambiguity is reported, never resolved by a guess.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from dataclasses import dataclass, replace
from typing import Any

from onboard.analysis.probe import source_location
from onboard.spec import Delta, Evidence, RouterSpec
from onboard.tiny import ROUTER_MARGIN_KEY, is_number

ROUTER_TOLERANCE = 1e-6


def correction_bias(router: Any, block: Any = None) -> Any:
    """The ``e_score_correction_bias`` that shifts the router's choice, or None.

    DeepSeek-V3 keeps it on the router, Ernie 4.5 on a router sub-module (``moe_statics``),
    MiniMax-M2 on the MoE block, which passes it to the router's forward; AFMoE's block passes
    its ``expert_bias`` so (the router probe then proves it shifts the choice).
    """
    for module in (router, block):
        if module is None:
            continue
        for name, tensor in itertools.chain(module.named_parameters(), module.named_buffers()):
            if name.rpartition(".")[2] == "e_score_correction_bias":
                return tensor
    name = passed_bias(router, block)
    return block.get_parameter(name) if name else None


def passed_bias(router: Any, block: Any) -> str | None:
    """The block's name of the one vector the router's forward takes from the block beside the
    hidden states (AFMoE: ``expert_bias``), or None."""
    import torch

    if router is None or block is None or isinstance(router, torch.nn.Linear):
        return None
    inputs, missing = _router_inputs(router, block)
    vectors = [t for t in inputs if t.dim() == 1]
    if missing or len(vectors) != 1:
        return None
    own = itertools.chain(block.named_parameters(recurse=False), block.named_buffers(recurse=False))
    return next((name for name, t in own if t is vectors[0]), None)


def passed_bias_parameters(model: Any) -> set[str]:
    """Layer-relative names of the choice biases MoE blocks pass their routers (``passed_bias``),
    which the router probe reads."""
    import re

    found = set()
    for name, module in model.named_modules() if model is not None else ():
        match = re.match(r"^model\.layers\.\d+\.(\w+)$", name)
        if match is None or getattr(module, "experts", None) is None:
            continue
        _, router, _ = find_router(module)
        bias = passed_bias(router, module)
        if bias is not None:
            found.add(f"{match.group(1)}.{bias}")
    return found


def route(
    hidden: Any, router: Any, spec: RouterSpec, top_k: int, correction: Any = None
) -> tuple[Any, Any]:
    """(weights [T, k], indices [T, k]) of ``spec`` with the router module's parameters.

    ``correction`` is the choice bias when the router does not hold it (see ``correction_bias``).
    """
    weights, indices, _ = route_with_shared(hidden, router, spec, top_k, correction)
    return weights, indices


def route_with_shared(
    hidden: Any, router: Any, spec: RouterSpec, top_k: int, correction: Any = None
) -> tuple[Any, Any, Any]:
    """``route`` plus the shared experts' weights [T, shared_logits] when the router scores
    them (None when it does not)."""
    import torch

    weight, bias = router.weight, getattr(router, "bias", None)
    if correction is None:
        correction = correction_bias(router)
    logits = hidden.float() @ weight.float().T
    if spec.bias and bias is not None:
        logits = logits + bias.float()
    shared = None
    if spec.shared_logits and spec.order != "softmax_topk":
        raise ValueError("the router scores shared experts beside softmax_topk routing only")
    if spec.shared_logits:
        logits, shared = logits[:, : -spec.shared_logits], logits[:, -spec.shared_logits :]
    if spec.order == "sparsemixer":
        return (*sparsemixer(logits, spec.jitter_eps), None)
    if spec.order == "topk_softmax":
        values, indices = torch.topk(logits, top_k, dim=-1)
        weights = torch.softmax(values, dim=-1)
    else:
        scores = torch.softmax(logits, dim=-1) if spec.scoring == "softmax" else logits.sigmoid()
        choice = (
            scores + correction.float()
            if spec.correction_bias and correction is not None
            else scores
        )
        if spec.n_group > 1:
            groups = choice.view(-1, spec.n_group, choice.shape[-1] // spec.n_group)
            group_scores = groups.topk(min(2, groups.shape[-1]), dim=-1)[0].sum(dim=-1)
            keep = torch.topk(group_scores, spec.topk_group, dim=-1)[1]
            mask = torch.zeros_like(group_scores).scatter_(1, keep, 1.0).bool()
            mask = mask.unsqueeze(-1).expand_as(groups).reshape(choice.shape)
            choice = choice.masked_fill(~mask, float("-inf"))
        indices = torch.topk(choice, top_k, dim=-1)[1]
        weights = scores.gather(1, indices)
        if shared is not None:  # the shared experts' sigmoid joins the chosen ones'
            weights = torch.cat([weights, shared.sigmoid()], dim=-1)
        if spec.renormalize:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    weights = weights * spec.routed_scaling_factor
    if spec.learned_scale:
        weights = weights * getattr(router, spec.learned_scale).float()
    if shared is not None:
        weights, shared = weights[:, :top_k], weights[:, top_k:]
    return weights, indices, shared


def sparsemixer(logits: Any, jitter_eps: float) -> tuple[Any, Any]:
    """PhiMoE's router at inference: two experts, each the best one left, weighted by a softmax
    over the logits that lie within a relative ``2 x jitter_eps`` of it (the others masked)."""
    import torch

    weights, indices, left = [], [], logits
    for _ in range(2):  # HF picks two, whatever num_experts_per_tok says
        best, index = left.max(dim=-1, keepdim=True)
        far = (best - logits) / logits.abs().clamp(min=best) > 2 * jitter_eps
        gates = torch.softmax(left.masked_fill(far, float("-inf")), dim=-1)
        weights.append(gates.gather(-1, index))
        indices.append(index)
        left = left.scatter(-1, index, float("-inf"))
    return torch.cat(weights, dim=-1), torch.cat(indices, dim=-1)


def dense_routing(weights: Any, indices: Any, num_experts: int) -> Any:
    import torch

    dense = torch.zeros(weights.shape[0], num_experts, dtype=torch.float32)
    return dense.scatter_(1, indices, weights.float())


# Config keys HF reads the routed weights' scale from (Inkling: route_scale, HY-V3:
# router_scaling_factor)
_SCALE_KEYS = ("routed_scaling_factor", "route_scale", "router_scaling_factor")


@dataclass(frozen=True)
class RouterShape:
    """What the probe saw of a router: parameters the candidates may use."""

    has_correction: bool
    has_bias: bool
    shared_logits: int = 0  # rows of the router beyond the routed experts (shared experts')
    shared_logits_key: str | None = None  # the config key that counts them
    learned_scale: str | None = None  # a learned scalar parameter of the router


def _candidates(tiny: Any, shape: RouterShape) -> list[RouterSpec]:
    n_group = getattr(tiny, "n_group", None) or 1
    topk_group = getattr(tiny, "topk_group", None) or 1
    found = []
    learned = sorted({None, shape.learned_scale}, key=lambda n: n or "")
    for scoring, order, renorm, (scale, key), own in itertools.product(
        ("softmax", "sigmoid"),
        ("softmax_topk", "topk_softmax"),
        (False, True),
        _scalings(tiny),
        learned,
    ):
        if order == "topk_softmax" and (scoring == "sigmoid" or renorm):
            continue
        if shape.shared_logits and (order, scoring) != ("softmax_topk", "sigmoid"):
            continue
        found.append(
            RouterSpec(
                scoring=scoring,
                order=order,
                renormalize=renorm,
                correction_bias=shape.has_correction,
                n_group=n_group if order == "softmax_topk" else 1,
                topk_group=topk_group if order == "softmax_topk" else 1,
                routed_scaling_factor=scale,
                bias=shape.has_bias,
                scale_key=key,
                shared_logits=shape.shared_logits,
                shared_logits_key=shape.shared_logits_key,
                learned_scale=own,
            )
        )
    margin = getattr(tiny, ROUTER_MARGIN_KEY, None)
    if is_number(margin) and not shape.has_correction and not shape.shared_logits:
        found.append(
            RouterSpec(
                "softmax",
                "sparsemixer",
                False,
                jitter_eps=float(margin),
                jitter_key=ROUTER_MARGIN_KEY,
            )
        )
    return found


def _scalings(tiny: Any) -> list[tuple[float, str]]:
    """(scale, config key) of every routed-weights scale the tiny config sets, and no scale."""
    found = [(1.0, "routed_scaling_factor")]
    for key in _SCALE_KEYS:
        value = getattr(tiny, key, None)
        if is_number(value) and float(value) != 1.0:
            found.append((float(value), key))
    return found


def scaled_by_block(
    spec: RouterSpec, block: Any, tiny: Any, where: str
) -> tuple[RouterSpec, tuple[str, Evidence] | None]:
    """A router that does not scale its weights, in a block that multiplies the routed
    experts' sum by a config scale (MiniMax-M3's ``routed_scaling_factor``): the same as the
    router scaling each weight, since the experts' sum is linear in them. The block's attribute
    must hold the tiny config's value; the spec check runs the whole block to prove it."""
    if spec.routed_scaling_factor != 1.0 or spec.shared_logits:
        return spec, None
    for key in _SCALE_KEYS:
        held, configured = getattr(block, key, None), getattr(tiny, key, None)
        if is_number(held) and is_number(configured) and float(held) == float(configured) != 1.0:
            scaled = replace(spec, routed_scaling_factor=float(held), scale_key=key)
            detail = f"the block multiplies the routed experts' sum by config.{key}"
            return scaled, ("text.moe.router", Evidence("probe", where, detail))
    return spec, None


def _learned_scalar(router: Any) -> str | None:
    """The router's one learned scalar parameter besides its weight and bias (Inkling's
    global_scale), if it has one."""
    scalars = [
        name
        for name, tensor in router.named_parameters(recurse=False)
        if name not in ("weight", "bias") and tensor.numel() == 1
    ]
    return scalars[0] if len(scalars) == 1 else None


def find_router(block: Any) -> tuple[str, Any, Any]:
    """(name of the router's linear in the block, the router module, that linear): the router
    itself (Mixtral's gate), or the one linear inside it (HunYuan's gate.wg)."""
    import torch

    for name in ("gate", "router"):
        router = getattr(block, name, None)
        if router is None:
            continue
        if getattr(router, "weight", None) is not None:
            return name, router, router
        linears = [(n, c) for n, c in router.named_children() if isinstance(c, torch.nn.Linear)]
        own = {id(p) for p in router.parameters()}
        if len(linears) == 1 and own == {id(p) for p in linears[0][1].parameters()}:
            return f"{name}.{linears[0][0]}", router, linears[0][1]
        return name, router, None
    return "gate", None, None


def probe_router(
    router: Any,
    linear: Any,
    block: Any,
    tiny: Any,
    real: Any,
    counts: tuple[int, int],
    prefix: str,
    shared_keys: tuple[str, ...] = (),
) -> tuple[RouterSpec | None, list[tuple[str, Evidence]], Delta | None]:
    """``router`` is the module HF calls, ``linear`` the one that holds its weight; ``counts``
    are the tiny model's top-k and routed experts; ``shared_keys`` are the config keys that may
    count the shared experts, which a router with more rows than routed experts may score."""
    import torch

    top_k, num_experts = counts
    weight, bias = linear.weight, getattr(linear, "bias", None)
    correction = correction_bias(router, block)
    where = f"{prefix} router ({type(router).__name__})"
    inputs, missing = _router_inputs(router, block)
    if missing:
        return (
            None,
            [],
            Delta(
                f"router needs {missing!r} besides the hidden states",
                source_location(type(router).forward) or where,
                f"{where}: the spec's routers read only the hidden states",
            ),
        )
    extra_rows = max(weight.shape[0] - num_experts, 0)
    counted_by = (k for k in shared_keys if getattr(tiny, k, None) == extra_rows)
    shape = RouterShape(
        correction is not None,
        bias is not None,
        shared_logits=extra_rows,
        shared_logits_key=next(counted_by, None),
        learned_scale=_learned_scalar(linear) if linear is router else None,
    )
    torch.manual_seed(3)
    hidden = torch.randn(64, weight.shape[1])
    with torch.no_grad():
        if not weight.any():  # zero-initialised by HF (AFMoE): every router would agree
            weight.normal_(generator=torch.Generator().manual_seed(5))
        if correction is not None:  # zero-initialised by HF: give it values so it matters
            correction.add_(torch.randn(correction.shape) * 0.5)
        if shape.learned_scale:  # initialised to one: move it so it matters
            getattr(linear, shape.learned_scale).add_(0.375)
        try:
            output = _call_router(router, hidden, inputs)
            output = _routed_by_block(block, hidden, output)
        except Exception as exc:  # HF's router cannot run on what the probe feeds it
            return None, [], Delta("router could not be probed", where, f"{type(exc).__name__}")
        outputs = _router_outputs(output, hidden.shape[0], shape.shared_logits)
        in_block = outputs is None and _only_logits(output, linear, hidden)
        if in_block:  # 2024 MoE code routes the gate's logits in the block's own forward
            from onboard.analysis.expert_lists import block_routing

            routed = block_routing(block, hidden, top_k)
            outputs = routed and _router_outputs(routed, hidden.shape[0], 0)
    if outputs is None:
        return (
            None,
            [],
            Delta("router output not understood", where, "expected weights and expert indices"),
        )
    candidates = _candidates(tiny, shape)
    matches = []
    for spec in candidates:
        with torch.no_grad():
            found = route_with_shared(hidden, linear, spec, top_k, correction)
        if _reproduces(found, outputs, num_experts):
            matches.append(spec)
    if not matches:
        return None, [], Delta("router computes something no known router does", where, "")
    # Equivalent variants (top-k then softmax = softmax, top-k, renormalise): the one HF writes.
    written = type(block) if in_block else type(router)  # the class whose code routes
    order = _source_order(written)
    spec = next((m for m in matches if m.order == order), matches[0])
    detail = (
        f"{describe_router(spec)}; the only match of {len(candidates)} router variants run on "
        "the tiny router"
    )
    if len(matches) > 1:
        detail = f"{describe_router(spec)}; equivalent here to {len(matches) - 1} other variant(s)"
    if spec is not matches[0]:
        detail += f", written so at {source_location(written.forward)}"
    if in_block:
        detail += f"; routed in the block's forward ({source_location(type(block).forward)})"
    if shape.learned_scale and spec.learned_scale is None:
        return (
            None,
            [],
            Delta(
                "parameter with no role in the spec",
                where,
                f"{shape.learned_scale}: no router variant that multiplies by it matches",
            ),
        )
    spec = _with_renormalize_key(spec, real)
    return spec, [("text.moe.router", Evidence("probe", where, detail))], None


@dataclass(frozen=True)
class RouterOutputs:
    """HF's router outputs: the chosen experts, and every tensor that may hold their weights or
    (shared_logits > 0) the shared experts'."""

    indices: Any  # [T, k]
    weights: tuple[Any, ...]  # candidates for the chosen experts' weights, [T, k]
    shared: tuple[Any, ...] = ()  # candidates for the shared experts' weights, [T, shared]


def _router_outputs(output: Any, tokens: int, shared: int) -> RouterOutputs | None:
    if not shared:
        routed = _routing_outputs(output, tokens)
        return routed and RouterOutputs(routed[1], (routed[0],))
    import torch

    outputs = output if isinstance(output, tuple) else (output,)
    tensors = [t for t in outputs if isinstance(t, torch.Tensor) and t.dim() == 2]
    indices = [t for t in tensors if not t.is_floating_point() and t.shape[0] == tokens]
    if len(indices) != 1:
        return None
    floats = [t for t in tensors if t.is_floating_point()]
    return RouterOutputs(
        indices[0],
        tuple(t for t in floats if t.shape == indices[0].shape),
        tuple(t for t in floats if t.shape == (tokens, shared)),
    )


def _reproduces(found: tuple[Any, Any, Any], hf: RouterOutputs, num_experts: int) -> bool:
    """Whether a candidate's (weights, indices, shared weights) are HF's: its routed weights one
    of HF's weight tensors, its shared weights another."""
    weights, indices, shared = found
    got = dense_routing(weights, indices, num_experts)
    for hf_weights in hf.weights:
        expected = dense_routing(hf_weights, hf.indices, num_experts)
        if (got - expected).abs().max().item() > ROUTER_TOLERANCE:
            continue
        if shared is None:
            return True
        others = (t for t in hf.shared if t is not hf_weights)
        if any((shared - t.float()).abs().max().item() <= ROUTER_TOLERANCE for t in others):
            return True
    return False


def _only_logits(output: Any, linear: Any, hidden: Any) -> bool:
    """The router gave back nothing but its linear's logits (a bare ``nn.Linear`` gate)."""
    import torch

    if not isinstance(output, torch.Tensor) or output.shape != (
        hidden.shape[0],
        linear.weight.shape[0],
    ):
        return False
    return bool(
        torch.allclose(output, torch.nn.functional.linear(hidden, linear.weight, linear.bias))
    )


def _routed_by_block(block: Any, hidden: Any, output: Any) -> Any:
    """A router that is a bare linear gives logits; Jamba's block routes them in its own
    ``route_tokens_to_experts`` (returning indices, weights), which then stands for the router."""
    import torch

    route = getattr(block, "route_tokens_to_experts", None)
    if isinstance(output, torch.Tensor) and callable(route):
        return route(hidden, output)
    return output


def _call_router(router: Any, hidden: Any, inputs: list[Any]) -> Any:
    """The router on tokens (T, H), or on a batch of them (1, T, H) when it wants one (AFMoE)."""
    try:
        return router(hidden, *inputs)
    except (ValueError, RuntimeError):
        return router(hidden.unsqueeze(0), *inputs)


def _router_inputs(router: Any, block: Any) -> tuple[list[Any], str | None]:
    """Tensors the router's forward takes after the hidden states, from the router or its block.

    MiniMax-M2 and HY-V3 pass the block's ``e_score_correction_bias``; DeepSeek-V4's hash router
    takes the ``input_ids``, which neither module holds: that name is returned as missing.
    """
    import torch

    parameters = list(inspect.signature(router.forward).parameters.values())[1:]
    inputs = []
    for parameter in parameters:
        if parameter.default is not parameter.empty or parameter.kind in (
            parameter.VAR_POSITIONAL,
            parameter.VAR_KEYWORD,
        ):
            continue
        value = getattr(router, parameter.name, None)
        if not isinstance(value, torch.Tensor):
            value = getattr(block, parameter.name, None)
        if not isinstance(value, torch.Tensor):
            return [], parameter.name
        inputs.append(value)
    return inputs, None


def _routing_outputs(output: Any, tokens: int) -> tuple[Any, Any] | None:
    """(weights [T, k], indices [T, k]) among the router's outputs, told apart by dtype and shape.

    Routers return them in different orders: (logits, weights, indices) in Mixtral,
    (indices, weights, logits) in Aria and GraniteMoe.
    """
    import torch

    outputs = output if isinstance(output, tuple) else (output,)
    tensors = [t for t in outputs if isinstance(t, torch.Tensor)]
    indices = [
        t for t in tensors if not t.is_floating_point() and t.dim() == 2 and t.shape[0] == tokens
    ]
    if len(indices) != 1:
        return None
    weights = [t for t in tensors if t.is_floating_point() and t.shape == indices[0].shape]
    if len(weights) > 1:  # one expert chosen of one (HunYuan's default): logits fit too
        at = next(i for i, t in enumerate(tensors) if t is indices[0])
        weights = [
            t for i, t in enumerate(tensors) if abs(i - at) == 1 and any(t is w for w in weights)
        ]
    return (weights[0], indices[0]) if len(weights) == 1 else None


def _source_order(router_class: type) -> str | None:
    """``softmax_topk`` or ``topk_softmax``: which of the two the router's forward calls first."""
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(router_class.forward)))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    calls = sorted(
        (node.lineno, node.col_offset, name)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and (name := _called_name(node.func)) in ("softmax", "topk")
    )
    if not calls:
        return None
    return "softmax_topk" if calls[0][2] == "softmax" else "topk_softmax"


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _with_renormalize_key(spec: RouterSpec, real: Any) -> RouterSpec:
    key = "norm_topk_prob" if getattr(real, "norm_topk_prob", None) is not None else None
    if key and bool(real.norm_topk_prob) == spec.renormalize:
        return replace(spec, renormalize_key=key)
    return spec


def describe_router(spec: RouterSpec, *, values: bool = True) -> str:
    """The router in words; ``values=False`` names the config key of its scale instead of one
    checkpoint's number (for library code)."""
    if spec.order == "sparsemixer":
        return (
            "sparsemixer: two experts, each the best left, weighted by a softmax over the logits "
            f"within a relative 2 x config.{spec.jitter_key} of it"
        )
    if spec.order == "topk_softmax":
        text = "top-k of the logits, then softmax"
    else:
        text = f"{spec.scoring} over all experts, then top-k"
        if spec.correction_bias:
            text += " (choice shifted by e_score_correction_bias)"
        if spec.n_group > 1:
            text += f", best {spec.topk_group} of {spec.n_group} groups first"
        if spec.shared_logits:
            text += (
                f"; the last {spec.shared_logits} logits score the shared experts, whose "
                "sigmoid joins the chosen experts'"
            )
        if spec.renormalize:
            text += ", renormalised"
    if spec.routed_scaling_factor != 1.0 and not values and spec.scale_key:
        text += f", x config.{spec.scale_key}"
    elif spec.routed_scaling_factor != 1.0:
        text += f", x {spec.routed_scaling_factor:g}"
        if spec.scale_key != "routed_scaling_factor":
            text += f" (config.{spec.scale_key})"
    if spec.learned_scale:
        text += f", x the learned {spec.learned_scale}"
    if spec.shared_logits:
        text += "; each shared expert scaled by its weight"
    return text
