"""The MoE block of a decoder: experts, shared experts, on-disk names; the router is read by
``router``."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onboard.analysis.clamped_glu import describe as describe_glu
from onboard.analysis.clamped_glu import expert_glu, glu_function, shared_glu
from onboard.analysis.layers import moe_block_name
from onboard.analysis.probe import source_location
from onboard.analysis.router import find_router, passed_bias, probe_router, scaled_by_block
from onboard.spec import (
    Delta,
    Evidence,
    MoESpec,
    RouterSpec,
    SharedExpertSpec,
)

_EXPERT_COUNT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
# What MoE blocks call their shared experts (HunYuan: shared_mlp).
SHARED_EXPERT_NAMES = ("shared_expert", "shared_experts", "shared_mlp")
_SHARED_COUNT_KEYS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
_GATED_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")

EXPERTS_TOLERANCE = 1e-5


@dataclass(frozen=True)
class MoEFindings:
    spec: MoESpec | None
    evidence: tuple[tuple[str, Evidence], ...]
    deltas: tuple[Delta, ...]


def find_moe(model: Any, tiny: Any, real: Any, checkpoint: dict[str, Any]) -> MoEFindings:
    """Describe the MoE block of the first MoE layer of the tiny ``model``."""
    layers = model.model.layers
    found = next(
        ((i, name) for i, layer in enumerate(layers) if (name := moe_block_name(layer))), None
    )
    if found is None:
        return MoEFindings(None, (), ())
    index, attr = found
    block = getattr(layers[index], attr)
    prefix = f"model.layers.{index}.{attr}"
    evidence: list[tuple[str, Evidence]] = []
    deltas: list[Delta] = []

    experts = block.experts
    layout = expert_layout(experts)
    if layout is None:
        return MoEFindings(None, (), (_unread_experts(experts, prefix),))
    num_experts, width = layout.num_experts, layout.width
    first = layout.first_name
    shape = tuple(getattr(experts, first).shape)
    kind = "down(act(up)), no gate" if layout.plain else "gated"
    evidence.append(
        (
            "text.moe.experts",
            Evidence("probe", f"{prefix}.experts.{first}", f"shape {shape}, {kind}"),
        )
    )
    if _per_expert(experts):  # a ModuleList of per-expert MLPs read as stacked (expert_lists)
        cls = type(experts[0])
        detail = f"{len(experts)} x {cls.__name__}: {experts.roles.formula()}, read as stacked"
        where = source_location(cls.forward) or f"{prefix}.experts.0"
        evidence.append(("text.moe.experts", Evidence("probe", where, detail)))
    width_keys = ("moe_intermediate_size", "intermediate_size")
    width_key = _size_key(width, tiny, real, width_keys) or "moe_intermediate_size"
    real_width = _real_size(width, tiny, real, width_keys)
    if real_width is None:
        deltas.append(Delta("expert width not explained", f"{prefix}.experts", str(width)))
        real_width = width

    router_name, router, linear = find_router(block)
    if linear is None:
        return MoEFindings(None, tuple(evidence), (*deltas, Delta("no router found", prefix, "")))
    top_k_keys = ("num_experts_per_tok", "moe_topk", "moe_k")
    top_k = _first_int(real, top_k_keys)
    tiny_top_k = _first_int(tiny, top_k_keys) or 1
    activation = _activation(experts, real)
    glu = None if layout.plain else expert_glu(experts, layout, tiny, real, tiny_top_k)
    glu_fn = glu_function(glu, tiny) if glu else None
    experts_delta = _check_experts(experts, layout, str(activation), tiny_top_k, prefix, glu_fn)
    if glu is not None:
        where = source_location(getattr(type(experts), "_apply_gate", None)) or prefix
        detail = f"{type(experts).__name__}: {describe_glu(glu)}"
        evidence.append(("text.moe.glu", Evidence("probe", where, detail)))
    if experts_delta:
        deltas.append(experts_delta)
    router_spec, router_evidence, router_delta = probe_router(
        router, linear, block, tiny, real, (tiny_top_k, num_experts), prefix, _SHARED_COUNT_KEYS
    )
    evidence += router_evidence
    if router_spec is not None:
        where = source_location(type(block).forward) or prefix
        router_spec, scaled = scaled_by_block(router_spec, block, tiny, where)
        evidence += [scaled] if scaled else []
    if router_delta:
        deltas.append(router_delta)

    shared, shared_deltas = _shared_experts(block, tiny, real, prefix, evidence)
    deltas += shared_deltas
    sink_delta = _sink_mismatch(router_spec, shared, block, prefix)
    if sink_delta:
        deltas.append(sink_delta)
    block_name, leaves, disk_deltas = _disk_names(experts, index, checkpoint, width)
    fused_on_disk: tuple[tuple[str, str], ...] = ()
    if disk_deltas and not layout.plain:
        fused_on_disk = _fused_disk_names(experts, index, checkpoint)
        if fused_on_disk:
            disk_deltas, block_name = [], attr
            where = f"model.layers.{index}.{fused_on_disk[0][1]}"
            order = "(in, out)" if layout.transposed else "(out, in)"
            detail = f"experts saved fused, 3-D, each expert {order}"
            evidence.append(("text.moe.experts", Evidence("probe", where, detail)))
    deltas += disk_deltas
    router_on_disk = _on_disk_name(linear.weight, index, checkpoint)
    if router_on_disk in (f"{attr}.{router_name}.weight", f"{block_name}.{router_name}.weight"):
        router_on_disk = None  # the block's rename covers it (Mixtral saves block_sparse_moe)
    own = f"{attr}.{router_name}.e_score_correction_bias"
    names = _correction_names(block, attr, index, checkpoint) or _passed_names(
        router, block, attr, index, checkpoint
    )
    correction_names = tuple(dict.fromkeys(n for n in names if n != own))
    spec = MoESpec(
        num_experts=_first_int(real, _EXPERT_COUNT_KEYS) or num_experts,
        top_k=top_k or 1,
        intermediate_size=real_width,
        router=router_spec or RouterSpec("softmax", "softmax_topk", False),
        shared=shared,
        activation=str(activation),
        plain=layout.plain,
        block_name=block_name,
        expert_leaves=leaves,
        router_name=router_name,
        fused_on_disk=fused_on_disk,
        fused_transposed=bool(fused_on_disk) and layout.transposed,
        router_on_disk=router_on_disk,
        correction_names=correction_names,
        count_key=_first_key(real, _EXPERT_COUNT_KEYS) or "num_local_experts",
        top_k_key=_first_key(real, top_k_keys) or "num_experts_per_tok",
        width_key=width_key,
        glu=glu,
    )
    return MoEFindings(spec, tuple(evidence), tuple(deltas))


@dataclass(frozen=True)
class ExpertLayout:
    """How HF holds the experts: 3-D ``gate_up_proj`` and ``down_proj``, one slice per expert."""

    num_experts: int
    width: int  # each expert's intermediate size
    transposed: bool  # slices are (in, out), not nn.Linear's (out, in) (Aria, GPT-OSS)
    plain: bool = False  # 3-D up_proj, no gate: down(act(up(x))) (NemotronH)

    @property
    def first_name(self) -> str:
        """HF's name of the experts' first projection."""
        return "up_proj" if self.plain else "gate_up_proj"


def _unread_experts(experts: Any, prefix: str) -> Delta:
    """What the experts are, when they are neither transformers 5's stacked 3-D parameters nor a
    ModuleList of per-expert MLPs ``stack_expert_lists`` reads as such."""
    import torch

    from onboard.analysis.expert_lists import expert_list_roles

    if isinstance(experts, torch.nn.ModuleList) and len(experts):
        first = experts[0]
        linears = [n for n, m in first.named_children() if isinstance(m, torch.nn.Linear)]
        why = expert_list_roles(experts)
        return Delta(
            "experts kept as a ModuleList of per-expert MLPs that are neither gated "
            "(down(act(gate) * up)) nor plain (down(act(up))): each expert "
            + (why if isinstance(why, str) else "was not read"),
            source_location(type(first).forward) or f"{prefix}.experts",
            f"{prefix}.experts: {len(experts)} x {type(first).__name__}({', '.join(linears)})",
        )
    return Delta("expert layout not understood", f"{prefix}.experts", type(experts).__name__)


def _per_expert(experts: Any) -> bool:
    """The experts are per-expert MLPs that ``expert_lists`` reads as stacked."""
    from onboard.analysis.expert_lists import StackedExperts

    return isinstance(experts, StackedExperts)


def expert_layout(experts: Any) -> ExpertLayout | None:
    plain = getattr(experts, "gate_up_proj", None) is None
    first = getattr(experts, "up_proj" if plain else "gate_up_proj", None)
    down = getattr(experts, "down_proj", None)
    if first is None or down is None or first.dim() != 3 or down.dim() != 3:
        return None
    # transformers' use_experts_implementation records the storage order on the module.
    transposed = bool(getattr(experts, "is_transposed", False))
    width = first.shape[2] if transposed else first.shape[1]
    return ExpertLayout(first.shape[0], width if plain else width // 2, transposed, plain)


def expert_matrices(experts: Any, expert: int) -> tuple[Any, Any, Any, Any]:
    """Expert ``expert``'s gate_up (2W, H) or, without a gate, up (W, H), and down (H, W), in
    nn.Linear layout, and their biases."""
    first = "up_proj" if getattr(experts, "gate_up_proj", None) is None else "gate_up_proj"
    gate_up, down = getattr(experts, first)[expert], experts.down_proj[expert]
    if getattr(experts, "is_transposed", False):
        gate_up, down = gate_up.T, down.T
    biases = (getattr(experts, f"{name}_bias", None) for name in (first, "down_proj"))
    gate_up_bias, down_bias = (b[expert] if b is not None else None for b in biases)
    return gate_up, down, gate_up_bias, down_bias


def routed_output(
    experts: Any,
    hidden: Any,
    indices: Any,
    weights: Any,
    act: Any,
    plain: bool | None = None,
    glu: Callable[[Any], Any] | None = None,
) -> Any:
    """The spec's routed experts: each chosen expert's act(gate) * up MLP (down(act(up)) when
    ``plain``; None: as the module holds them; ``glu`` of the fused gate_up projection when
    given), times its weight."""
    import torch

    out = torch.zeros_like(hidden)
    if plain is None:
        plain = getattr(experts, "gate_up_proj", None) is None
    for slot in range(indices.shape[1]):
        for expert in range(experts.down_proj.shape[0]):
            rows = indices[:, slot] == expert
            if not rows.any():
                continue
            gate_up, down, gate_up_bias, down_bias = expert_matrices(experts, expert)
            fused = hidden[rows] @ gate_up.T
            fused = fused if gate_up_bias is None else fused + gate_up_bias
            if plain:
                value = act(fused) @ down.T
            elif glu is not None:
                value = glu(fused) @ down.T
            else:
                gate, up = fused.chunk(2, dim=-1)
                value = (act(gate) * up) @ down.T
            value = value if down_bias is None else value + down_bias
            out[rows] += value * weights[rows, slot, None].to(value.dtype)
    return out


def probe_routing(experts: Any, layout: ExpertLayout, top_k: int) -> tuple[Any, Any, Any]:
    """Fixed hidden states, chosen experts and weights to run the experts on."""
    import torch

    torch.manual_seed(4)
    first = getattr(experts, layout.first_name)
    hidden = torch.randn(8, first.shape[1 if layout.transposed else 2])
    k = min(top_k, layout.num_experts)
    indices = (torch.arange(8)[:, None] + torch.arange(k)[None, :]) % layout.num_experts
    return hidden, indices, torch.rand(8, k)


def _check_experts(
    experts: Any,
    layout: ExpertLayout,
    activation: str,
    top_k: int,
    prefix: str,
    glu: Callable[[Any], Any] | None = None,
) -> Delta | None:
    """Run the HF experts on fixed routing: a delta unless ``routed_output`` reproduces them
    (with ``glu`` in place of act(gate) * up when the experts clamp a GLU)."""
    import torch
    from transformers.activations import ACT2FN

    hidden, indices, weights = probe_routing(experts, layout, top_k)
    gate_fn = getattr(type(experts), "_apply_gate", None)
    custom_gate = gate_fn is not None and gate_fn.__module__ != "transformers.integrations.moe"
    # Per-expert MLPs read as stacked (expert_lists): their own forward is what computes
    own = type(experts[0]) if _per_expert(experts) else type(experts)
    where = source_location(gate_fn if custom_gate else own.forward) or prefix
    try:
        with torch.no_grad():
            theirs = experts(hidden, indices, weights)
            act = ACT2FN[activation]
            ours = routed_output(experts, hidden, indices, weights, act, None, glu)
        diff = (ours.float() - theirs.float()).abs().max().item()
    except Exception as exc:  # another forward signature, an unknown activation ...
        detail = f"{prefix}.experts: {type(exc).__name__}: {str(exc)[:120]}"
        return Delta(f"{own.__name__} forward not understood", where, detail)
    if math.isfinite(diff) and diff <= EXPERTS_TOLERANCE:
        return None
    return Delta(
        f"{own.__name__} computes something the spec does not describe",
        where,
        f"{prefix}.experts: max abs {diff:.2g} against "
        + (f"{activation}(up)" if layout.plain else f"{activation}(gate) * up"),
    )


def _activation(experts: Any, real: Any) -> str:
    """The experts' activation: the config's ``hidden_act``, unless the experts' own ``act_fn``
    computes another known one (NemotronH's experts read ``mlp_hidden_act``)."""
    from onboard.analysis.mlp_reader import activation_of

    configured = getattr(real, "hidden_act", None) or getattr(real, "hidden_activation", "silu")
    act_fn = getattr(experts, "act_fn", None)
    measured = activation_of(act_fn) if act_fn is not None else None
    return str(measured or configured)


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


def _shared_experts(
    block: Any, tiny: Any, real: Any, prefix: str, evidence: list[tuple[str, Evidence]]
) -> tuple[SharedExpertSpec | None, list[Delta]]:
    from onboard.analysis.expert_lists import mlp_roles

    for name in SHARED_EXPERT_NAMES:
        module = getattr(block, name, None)
        if module is None:
            continue
        where = f"{prefix}.{name}"
        stacked = _stacked_width(module)
        if stacked is not None:
            return _stacked_shared(stacked, name, tiny, real, where, evidence)
        width = _gated_linear_width(module)
        plain = width is None and (width := _plain_linear_width(module)) is not None
        projections = SharedExpertSpec.projections
        glu = None
        if width is None:  # MiniMax-M3: a fused gate_up_proj, a clamped GLU
            glu, width = shared_glu(module, tiny, real)
            if glu is not None:
                projections = (("gate_up", "gate_up_proj"), ("down", "down_proj"))
                where_glu = source_location(type(module).forward) or where
                detail = f"{type(module).__name__}: {describe_glu(glu)}"
                evidence.append(("text.moe.shared", Evidence("probe", where_glu, detail)))
        if width is None:  # other names (2024 remote code's w1 / w3 / w2), told by values
            roles = mlp_roles(module)
            if isinstance(roles, str):
                return None, [
                    Delta(
                        "shared expert layout not understood",
                        source_location(type(module).forward) or where,
                        f"{where} ({type(module).__name__}) is not gate_proj / up_proj / "
                        f"down_proj linear layers, and it {roles}",
                    )
                ]
            width = int(getattr(module, roles.down).in_features)
            plain, projections = roles.plain, roles.leaves()
            evidence.append(("text.moe.shared", Evidence("probe", where, roles.formula())))
        real_width, width_expr = _shared_width(width, tiny, real)
        gated = getattr(block, "shared_expert_gate", None) is not None
        evidence.append(
            ("text.moe.shared", Evidence("probe", where, f"width {width}, gated {gated}"))
        )
        deltas = (
            [] if real_width else [Delta("shared expert width not explained", where, str(width))]
        )
        spec = SharedExpertSpec(
            real_width or width,
            gated,
            name,
            width_expr,
            bool(plain),
            projections=projections,
            glu=glu,
        )
        return spec, deltas
    return None, []


def _sink_mismatch(
    router: RouterSpec | None, shared: SharedExpertSpec | None, block: Any, prefix: str
) -> Delta | None:
    """Router-weighted shared experts are read only as Inkling holds them: as many 3-D stacked
    experts as the router has extra logits."""
    sink = router is not None and router.shared_logits > 0
    stacked = shared is not None and shared.stacked
    if sink == stacked:
        if not sink:
            return None
        count = getattr(block, shared.name).gate_proj.shape[0]
        if count == router.shared_logits:
            return None
    return Delta(
        "shared experts weighted by the router not understood",
        source_location(type(block).forward) or prefix,
        f"{prefix}: router scores {router.shared_logits if router else 0} shared experts, "
        f"stacked shared experts {stacked}",
    )


def _stacked_shared(
    width: int, name: str, tiny: Any, real: Any, where: str, evidence: list[tuple[str, Evidence]]
) -> tuple[SharedExpertSpec | None, list[Delta]]:
    """Several shared experts in 3-D parameters (Inkling), each as wide as a routed expert."""
    keys = ("moe_intermediate_size", "shared_expert_intermediate_size", "intermediate_size")
    key = _size_key(width, tiny, real, keys)
    evidence.append(
        ("text.moe.shared", Evidence("probe", where, f"3-D gate/up/down, width {width} each"))
    )
    if key is None:
        return None, [Delta("shared expert width not explained", where, str(width))]
    return SharedExpertSpec(int(getattr(real, key)), False, name, key, stacked=True), []


def _stacked_width(module: Any) -> int | None:
    """The width of each of several gated experts held as 3-D gate_proj / up_proj / down_proj
    parameters [n, W, H], [n, W, H], [n, H, W] and nothing else, else None."""
    import torch

    gate, up, down = (getattr(module, p, None) for p in _GATED_PROJECTIONS)
    tensors = (gate, up, down)
    if not all(isinstance(t, torch.nn.Parameter) and t.dim() == 3 for t in tensors):
        return None
    if len(list(module.parameters())) != 3 or gate.shape != up.shape:
        return None
    if down.shape != (gate.shape[0], gate.shape[2], gate.shape[1]):
        return None
    return int(gate.shape[1])


def _gated_linear_width(module: Any) -> int | None:
    """The width of an MLP of gate_proj / up_proj / down_proj linear layers, else None."""
    import torch

    weights = [getattr(getattr(module, p, None), "weight", None) for p in _GATED_PROJECTIONS]
    if not all(isinstance(w, torch.Tensor) and w.dim() == 2 for w in weights):
        return None
    return int(weights[0].shape[0])


def _plain_linear_width(module: Any) -> int | None:
    """The width of an MLP of up_proj and down_proj linear layers only, else None."""
    import torch

    learned = {name for name, _ in module.named_parameters()}
    up = getattr(getattr(module, "up_proj", None), "weight", None)
    allowed = {f"{p}.{leaf}" for p in ("up_proj", "down_proj") for leaf in ("weight", "bias")}
    if not isinstance(up, torch.Tensor) or up.dim() != 2 or learned - allowed:
        return None
    return int(up.shape[0])


def _shared_width(width: int, tiny: Any, real: Any) -> tuple[int | None, str]:
    """The real shared-expert width and the config expression it comes from.

    Either its own field, or ``n`` experts fused in one: ``moe_intermediate_size *
    n_shared_experts`` (DeepSeek), ``* num_shared_experts`` (EXAONE-MoE), ``intermediate_size *
    moe_num_shared_experts`` (Aria).
    """
    owns = (
        "shared_expert_intermediate_size",
        "moe_shared_expert_intermediate_size",
        "shared_intermediate_size",  # MiniMax-M3
    )
    for own in owns:
        real_width = _real_size(width, tiny, real, (own,))
        if real_width is not None:
            return real_width, own
    own = "shared_expert_intermediate_size"
    for base, count in itertools.product(
        ("moe_intermediate_size", "intermediate_size"), _SHARED_COUNT_KEYS
    ):
        tiny_values = (_positive_int(tiny, base), _positive_int(tiny, count))
        real_values = (_positive_int(real, base), _positive_int(real, count))
        if None in tiny_values or None in real_values:
            continue
        if tiny_values[0] * tiny_values[1] == width:
            return real_values[0] * real_values[1], f"{base} * {count}"
    # One dense MLP as wide as the config's MLPs (HunYuan's shared_mlp)
    found = _real_size(width, tiny, real, ("intermediate_size",))
    return (found, "intermediate_size") if found is not None else (None, own)


def _positive_int(config: Any, key: str) -> int | None:
    value = getattr(config, key, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _on_disk_name(value: Any, index: int, checkpoint: dict[str, Any]) -> str | None:
    """The layer-relative name of the one checkpoint tensor of layer ``index`` equal to
    ``value``, if exactly one is."""
    prefix = f"model.layers.{index}."
    found = [
        key.removeprefix(prefix)
        for key, tensor in checkpoint.items()
        if key.startswith(prefix) and tensor.shape == value.shape and bool((tensor == value).all())
    ]
    return found[0] if len(found) == 1 else None


def _correction_names(
    block: Any, attr: str, index: int, checkpoint: dict[str, Any]
) -> tuple[str, ...]:
    """The layer-relative names of the layer's one e_score_correction_bias in the checkpoint and
    in memory (Ernie 4.5: moe_statics on disk, gate.moe_statics in memory)."""
    leaf = ".e_score_correction_bias"
    prefix = f"model.layers.{index}."
    on_disk = [
        k.removeprefix(prefix) for k in checkpoint if k.startswith(prefix) and k.endswith(leaf)
    ]
    tensors = itertools.chain(block.named_parameters(), block.named_buffers())
    in_memory = [f"{attr}.{name}" for name, _ in tensors if f".{name}".endswith(leaf)]
    return (*on_disk, *in_memory) if len(on_disk) == len(in_memory) == 1 else ()


def _passed_names(
    router: Any, block: Any, attr: str, index: int, checkpoint: dict[str, Any]
) -> tuple[str, ...]:
    """The layer-relative name of the choice bias the block passes its router (AFMoE's
    ``expert_bias``), saved under the same name."""
    name = passed_bias(router, block)
    found = f"{attr}.{name}" if name else None
    return (found,) if found and f"model.layers.{index}.{found}" in checkpoint else ()


def _fused_disk_names(experts: Any, index: int, checkpoint: dict[str, Any]) -> tuple:
    """Where a checkpoint keeps the experts fused, 3-D as in memory, under other names (Granite
    MoE's input_linear and output_linear), found by value; () when it does not."""
    found = tuple(
        (role, _on_disk_name(getattr(experts, name).detach(), index, checkpoint))
        for role, name in (("gate_up", "gate_up_proj"), ("down", "down_proj"))
    )
    return found if all(name for _, name in found) else ()


def _disk_names(
    experts: Any, index: int, checkpoint: dict[str, Any], width: int
) -> tuple[str, tuple[tuple[str, str], ...], list[Delta]]:
    """Where the checkpoint keeps expert 0's gate / up / down, matched by value to memory."""
    gate_up, down, _, _ = expert_matrices(experts, 0)
    gate_up, down = gate_up.detach(), down.detach()
    if getattr(experts, "gate_up_proj", None) is None:  # no gate: up is the first projection
        wanted = {"up": gate_up, "down": down}
    else:
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
    return (
        block_name,
        tuple((role, leaves[role]) for role in ("gate", "up", "down") if role in leaves),
        [],
    )
