"""The MoE block of a decoder: experts, router semantics, shared experts, on-disk names.

Routers differ in small ways that decide every token's experts (softmax or sigmoid, before or
after top-k, renormalised or not, a correction bias, group-limited choice, a scaling factor).
Instead of guessing from names, every plausible router is run on the tiny model's own router
weights and kept only if it reproduces the HF router's output exactly; ambiguity is reported,
never resolved by a guess.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from onboard.spec import Delta, Evidence, MoESpec, RouterSpec, SharedExpertSpec

_EXPERT_COUNT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
ROUTER_TOLERANCE = 1e-6


@dataclass(frozen=True)
class MoEFindings:
    spec: MoESpec | None
    evidence: tuple[tuple[str, Evidence], ...]
    deltas: tuple[Delta, ...]


def find_moe(model: Any, tiny: Any, real: Any, checkpoint: dict[str, Any]) -> MoEFindings:
    """Describe the MoE block of the first MoE layer of the tiny ``model``."""
    layers = model.model.layers
    index = next((i for i, layer in enumerate(layers) if hasattr(layer.mlp, "experts")), None)
    if index is None:
        return MoEFindings(None, (), ())
    block = layers[index].mlp
    prefix = f"model.layers.{index}.mlp"
    evidence: list[tuple[str, Evidence]] = []
    deltas: list[Delta] = []

    experts = block.experts
    gate_up = getattr(experts, "gate_up_proj", None)
    down = getattr(experts, "down_proj", None)
    if gate_up is None or down is None or gate_up.dim() != 3:
        return MoEFindings(
            None,
            (),
            (Delta("expert layout not understood", f"{prefix}.experts", type(experts).__name__),),
        )
    num_experts, width = gate_up.shape[0], gate_up.shape[1] // 2
    evidence.append(
        (
            "text.moe.experts",
            Evidence("probe", f"{prefix}.experts.gate_up_proj", f"shape {tuple(gate_up.shape)}"),
        )
    )
    width_keys = ("moe_intermediate_size", "intermediate_size")
    width_key = _size_key(width, tiny, real, width_keys) or "moe_intermediate_size"
    real_width = _real_size(width, tiny, real, width_keys)
    if real_width is None:
        deltas.append(Delta("expert width not explained", f"{prefix}.experts", str(width)))
        real_width = width

    router = getattr(block, "gate", None) or getattr(block, "router", None)
    if router is None or getattr(router, "weight", None) is None:
        return MoEFindings(None, tuple(evidence), (*deltas, Delta("no router found", prefix, "")))
    top_k_keys = ("num_experts_per_tok", "moe_topk", "moe_k")
    top_k = _first_int(real, top_k_keys)
    tiny_top_k = _first_int(tiny, top_k_keys) or 1
    router_spec, router_evidence, router_delta = _probe_router(
        router, tiny, real, tiny_top_k, prefix
    )
    evidence += router_evidence
    if router_delta:
        deltas.append(router_delta)

    shared, shared_deltas = _shared_experts(block, tiny, real, prefix, evidence)
    deltas += shared_deltas
    activation = getattr(real, "hidden_act", None) or getattr(real, "hidden_activation", "silu")
    block_name, leaves, disk_deltas = _disk_names(model, index, checkpoint, num_experts, width)
    deltas += disk_deltas
    spec = MoESpec(
        num_experts=_first_int(real, _EXPERT_COUNT_KEYS) or num_experts,
        top_k=top_k or 1,
        intermediate_size=real_width,
        router=router_spec or RouterSpec("softmax", "softmax_topk", False),
        shared=shared,
        activation=str(activation),
        block_name=block_name,
        expert_leaves=leaves,
        router_name="gate" if hasattr(block, "gate") else "router",
        count_key=_first_key(real, _EXPERT_COUNT_KEYS) or "num_local_experts",
        top_k_key=_first_key(real, top_k_keys) or "num_experts_per_tok",
        width_key=width_key,
    )
    return MoEFindings(spec, tuple(evidence), tuple(deltas))


def _first_key(config: Any, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return key
    return None


def _first_int(config: Any, keys: tuple[str, ...]) -> int | None:
    key = _first_key(config, keys)
    return getattr(config, key) if key else None


def _size_key(tiny_value: int, tiny: Any, real: Any, keys: tuple[str, ...]) -> str | None:
    """Which size field of the config the tiny value came from."""
    return next(
        (k for k in keys if getattr(tiny, k, None) == tiny_value and getattr(real, k, None)), None
    )


def _real_size(tiny_value: int, tiny: Any, real: Any, keys: tuple[str, ...]) -> int | None:
    """The real config's value of whichever size field the tiny value came from."""
    key = _size_key(tiny_value, tiny, real, keys)
    return int(getattr(real, key)) if key else None


def _router_parameters(router: Any) -> tuple[Any, Any, Any]:
    bias = getattr(router, "bias", None)
    correction = getattr(router, "e_score_correction_bias", None)
    return router.weight, bias, correction


def route(hidden: Any, router: Any, spec: RouterSpec, top_k: int) -> tuple[Any, Any]:
    """(weights [T, k], indices [T, k]) of ``spec`` with the router module's parameters."""
    import torch

    weight, bias, correction = _router_parameters(router)
    logits = hidden.float() @ weight.float().T
    if spec.bias and bias is not None:
        logits = logits + bias.float()
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
        if spec.renormalize:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * spec.routed_scaling_factor, indices


def dense_routing(weights: Any, indices: Any, num_experts: int) -> Any:
    import torch

    dense = torch.zeros(weights.shape[0], num_experts, dtype=torch.float32)
    return dense.scatter_(1, indices, weights.float())


def _candidates(tiny: Any, has_correction: bool, has_bias: bool) -> list[RouterSpec]:
    n_group = getattr(tiny, "n_group", None) or 1
    topk_group = getattr(tiny, "topk_group", None) or 1
    scaling = float(getattr(tiny, "routed_scaling_factor", None) or 1.0)
    found = []
    scalings = sorted({1.0, scaling})
    for scoring, order, renorm, scale in itertools.product(
        ("softmax", "sigmoid"), ("softmax_topk", "topk_softmax"), (False, True), scalings
    ):
        if order == "topk_softmax" and (scoring == "sigmoid" or renorm):
            continue
        found.append(
            RouterSpec(
                scoring=scoring,
                order=order,
                renormalize=renorm,
                correction_bias=has_correction,
                n_group=n_group if order == "softmax_topk" else 1,
                topk_group=topk_group if order == "softmax_topk" else 1,
                routed_scaling_factor=scale,
                bias=has_bias,
            )
        )
    return found


def _probe_router(
    router: Any, tiny: Any, real: Any, top_k: int, prefix: str
) -> tuple[RouterSpec | None, list[tuple[str, Evidence]], Delta | None]:
    import torch

    weight, bias, correction = _router_parameters(router)
    torch.manual_seed(3)
    hidden = torch.randn(64, weight.shape[1])
    with torch.no_grad():
        if correction is not None:  # zero-initialised by HF: give it values so it matters
            correction.add_(torch.randn(correction.shape) * 0.5)
        output = router(hidden)
    where = f"{prefix} router ({type(router).__name__})"
    if not (isinstance(output, tuple) and len(output) == 3):
        return (
            None,
            [],
            Delta("router output not understood", where, "expected (logits, weights, indices)"),
        )
    _, hf_weights, hf_indices = output
    num_experts = weight.shape[0]
    expected = dense_routing(hf_weights, hf_indices, num_experts)
    matches = []
    for spec in _candidates(tiny, correction is not None, bias is not None):
        with torch.no_grad():
            weights, indices = route(hidden, router, spec, top_k)
        got = dense_routing(weights, indices, num_experts)
        if (got - expected).abs().max().item() <= ROUTER_TOLERANCE:
            matches.append(spec)
    if not matches:
        return None, [], Delta("router computes something no known router does", where, "")
    spec = _with_renormalize_key(matches[0], real)
    tried = len(_candidates(tiny, correction is not None, bias is not None))
    detail = (
        f"{describe_router(spec)}; the only match of {tried} router variants run on the tiny router"
    )
    if len(matches) > 1:
        detail = f"{describe_router(spec)}; equivalent here to {len(matches) - 1} other variant(s)"
    return spec, [("text.moe.router", Evidence("probe", where, detail))], None


def _with_renormalize_key(spec: RouterSpec, real: Any) -> RouterSpec:
    from dataclasses import replace

    key = "norm_topk_prob" if getattr(real, "norm_topk_prob", None) is not None else None
    if key and bool(real.norm_topk_prob) == spec.renormalize:
        return replace(spec, renormalize_key=key)
    return spec


def describe_router(spec: RouterSpec) -> str:
    if spec.order == "topk_softmax":
        text = "top-k of the logits, then softmax"
    else:
        text = f"{spec.scoring} over all experts, then top-k"
        if spec.correction_bias:
            text += " (choice shifted by e_score_correction_bias)"
        if spec.n_group > 1:
            text += f", best {spec.topk_group} of {spec.n_group} groups first"
        if spec.renormalize:
            text += ", renormalised"
    if spec.routed_scaling_factor != 1.0:
        text += f", x {spec.routed_scaling_factor:g}"
    return text


def _shared_experts(
    block: Any, tiny: Any, real: Any, prefix: str, evidence: list[tuple[str, Evidence]]
) -> tuple[SharedExpertSpec | None, list[Delta]]:
    for name in ("shared_expert", "shared_experts"):
        module = getattr(block, name, None)
        if module is None:
            continue
        width = module.gate_proj.weight.shape[0]
        width_expr = "shared_expert_intermediate_size"
        real_width = _real_size(width, tiny, real, (width_expr,))
        shared_count = getattr(real, "n_shared_experts", None)
        if real_width is None and shared_count:  # DeepSeek: n_shared_experts experts fused in one
            tiny_moe = getattr(tiny, "moe_intermediate_size", None)
            if tiny_moe and width == tiny_moe * getattr(tiny, "n_shared_experts", 1):
                real_width = real.moe_intermediate_size * shared_count
                width_expr = "moe_intermediate_size * n_shared_experts"
        gated = getattr(block, "shared_expert_gate", None) is not None
        evidence.append(
            (
                "text.moe.shared",
                Evidence("probe", f"{prefix}.{name}", f"width {width}, gated {gated}"),
            )
        )
        deltas = (
            []
            if real_width
            else [Delta("shared expert width not explained", f"{prefix}.{name}", str(width))]
        )
        return SharedExpertSpec(real_width or width, gated, name, width_expr), deltas
    return None, []


def _disk_names(
    model: Any, index: int, checkpoint: dict[str, Any], num_experts: int, width: int
) -> tuple[str, tuple[tuple[str, str], ...], list[Delta]]:
    """Where the checkpoint keeps expert 0's gate / up / down, matched by value to memory."""
    gate_up = model.model.layers[index].mlp.experts.gate_up_proj[0].detach()
    down = model.model.layers[index].mlp.experts.down_proj[0].detach()
    wanted = {"gate": gate_up[:width], "up": gate_up[width:], "down": down}
    pattern = re.compile(rf"^model\.layers\.{index}\.(\w+)\.experts\.0\.(\w+)\.weight$")
    block_name, leaves = "mlp", {}
    for key, tensor in checkpoint.items():
        match = pattern.match(key)
        if not match:
            continue
        for role, value in wanted.items():
            if tensor.shape == value.shape and bool((tensor == value).all()):
                block_name, leaves[role] = match.group(1), match.group(2)
    if set(leaves) != set(wanted):
        return (
            "mlp",
            (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")),
            [
                Delta(
                    "on-disk expert tensors not found",
                    f"model.layers.{index}.*.experts.0",
                    str(sorted(leaves)),
                )
            ],
        )
    return block_name, tuple((role, leaves[role]) for role in ("gate", "up", "down")), []
