"""Experts kept as a ``ModuleList`` of per-expert MLPs (2024 MoE remote code: ``w1``/``w3``/``w2``
modules), read as transformers 5's stacked experts.

transformers 5 holds an MoE block's experts as 3-D ``gate_up_proj`` (or ``up_proj``) and
``down_proj`` parameters and calls ``experts(hidden, top_k_index, top_k_weights)``; the MoE
readers, the spec check and the on-disk matching read that layout. Older code keeps one small MLP
module per expert, with linear layers named as its authors liked. ``stack_expert_lists`` finds each
linear's role by its values (the one that writes the hidden size is down; of the two that read it,
the one whose activation reproduces the expert's own forward is the gate) and swaps, on the tiny
analysis model only, a ``StackedExperts`` in for the list: the same child modules (HF's forward
still indexes them, and the parameters keep their names, so the checkpoint saved is the one real
checkpoints hold, ``experts.N.w1.weight``), plus the stacked layout computed from them at each
access, so a perturbation of the children shows.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch

from onboard.analysis.mlp_reader import MEASURED_ACTIVATIONS, activation_of

# A role assignment reproduces the module's forward within this (float32, tiny values).
ROLE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class MLPRoles:
    """Which linear child of a per-expert MLP does what: ``down(act(gate) * up)``, or
    ``down(act(up))`` when ``gate`` is None."""

    gate: str | None
    up: str
    down: str
    activation: str  # an ACT2FN name

    @property
    def plain(self) -> bool:
        return self.gate is None

    def leaves(self) -> tuple[tuple[str, str], ...]:
        """(role, linear name) pairs, as ``MoESpec.expert_leaves`` and
        ``SharedExpertSpec.projections`` hold them."""
        roles = (("gate", self.gate), ("up", self.up), ("down", self.down))
        return tuple((role, name) for role, name in roles if name is not None)

    def formula(self) -> str:
        inner = f"{self.activation}({self.up})"
        if self.gate is not None:
            inner = f"{self.activation}({self.gate}) * {self.up}"
        return f"{self.down}({inner})"


def mlp_roles(module: Any) -> MLPRoles | str:
    """The roles of ``module``'s linear children, told by its own forward; else why not (one
    sentence). The module must learn nothing but two or three bias-free linear layers."""
    linears = {n: m for n, m in module.named_children() if isinstance(m, torch.nn.Linear)}
    owned = {f"{name}.weight" for name in linears}
    learned = sorted(n for n, _ in module.named_parameters() if n not in owned)
    if learned:
        return f"learns more than bias-free linear weights ({', '.join(learned[:4])})"
    if len(linears) not in (2, 3):
        return f"has {len(linears)} linear layer(s), not 2 (up, down) or 3 (gate, up, down)"
    activations = _candidate_activations(module)
    sizes = _hidden_sizes(linears)
    if not sizes:
        return "has no linear that writes the width the others read"
    errors, ran = [], False
    for hidden in sizes:  # square linears fit either way round: the forward says which runs
        x = torch.randn(5, hidden, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            try:
                want = module(x)
            except Exception as exc:  # another signature, or not this width
                errors.append(type(exc).__name__)
                continue
            ran = True
            found = _assignment(linears, hidden, activations, x, want)
        if found is not None:
            return found
    if not ran:
        return f"cannot run on hidden states alone ({errors[0]})"
    shapes = ", ".join(f"{n} {tuple(m.weight.shape)}" for n, m in linears.items())
    kind = "down(act(gate) * up)" if len(linears) == 3 else "down(act(up))"
    return f"computes no {kind} of its linears ({shapes}) with any of {', '.join(activations)}"


class StackedExperts(torch.nn.ModuleList):
    """A ``ModuleList`` of per-expert MLPs that also reads as transformers 5's stacked experts:
    ``gate_up_proj`` (E, 2W, H) or ``up_proj`` (E, W, H), ``down_proj`` (E, H, W), ``act_fn`` and
    ``forward(hidden, top_k_index, top_k_weights)``, each computed from the children."""

    def __init__(self, experts: Any, roles: MLPRoles) -> None:
        super().__init__(list(experts))
        self.roles = roles

    def _stack(self, role: str) -> torch.Tensor:
        name = dict(self.roles.leaves())[role]
        return torch.stack([getattr(expert, name).weight for expert in self])

    @property
    def down_proj(self) -> torch.Tensor:
        return self._stack("down")

    @property
    def act_fn(self) -> Any:
        from transformers.activations import ACT2FN

        return ACT2FN[self.roles.activation]

    def forward(self, hidden: Any, top_k_index: Any, top_k_weights: Any) -> Any:
        """The experts' own forwards on each token's chosen experts, times their weights."""
        out = torch.zeros_like(hidden)
        for slot in range(top_k_index.shape[1]):
            for index, expert in enumerate(self):
                rows = top_k_index[:, slot] == index
                if rows.any():
                    weight = top_k_weights[rows, slot, None].to(hidden.dtype)
                    out[rows] += expert(hidden[rows]) * weight
        return out


class StackedGatedExperts(StackedExperts):
    @property
    def gate_up_proj(self) -> torch.Tensor:
        return torch.cat((self._stack("gate"), self._stack("up")), dim=1)


class StackedPlainExperts(StackedExperts):
    @property
    def up_proj(self) -> torch.Tensor:
        return self._stack("up")


def expert_list_roles(experts: Any) -> MLPRoles | str:
    """The shared roles of a ``ModuleList`` of per-expert MLPs of one class; else why not."""
    kinds = {type(expert).__name__ for expert in experts}
    if len(kinds) != 1:
        return f"holds experts of several classes ({', '.join(sorted(kinds))})"
    found = [mlp_roles(expert) for expert in experts]
    reasons = [f for f in found if isinstance(f, str)]
    if reasons:
        return reasons[0]
    if len(set(found)) != 1:
        return "its experts name their roles differently"
    return found[0]


def stack_expert_lists(model: Any) -> Any:
    """Swap a ``StackedExperts`` in for every readable ``experts`` ``ModuleList`` of ``model``
    (in place; the model is returned). A list that is not read stays as it is: the MoE reader
    names it and says why (``expert_list_roles``)."""
    for module in list(model.modules()):
        experts = getattr(module, "experts", None)
        if type(experts) is not torch.nn.ModuleList or not len(experts):
            continue
        roles = expert_list_roles(experts)
        if isinstance(roles, MLPRoles):
            kind = StackedPlainExperts if roles.plain else StackedGatedExperts
            module.experts = kind(experts, roles)
    return model


def _candidate_activations(module: Any) -> tuple[str, ...]:
    """The module's own activation child first (what it measures as), then every one the MLP
    reader measures."""
    own = [found for child in module.children() if (found := activation_of(child))]
    return tuple(dict.fromkeys((*own, *MEASURED_ACTIVATIONS)))


def _hidden_sizes(linears: dict[str, Any]) -> list[int]:
    """The widths the hidden states may have: what all the linears but one read and that one
    writes."""
    sizes = []
    for down in linears.values():
        feeding = [m for m in linears.values() if m is not down]
        if all(m.in_features == down.out_features for m in feeding):
            sizes.append(int(down.out_features))
    return list(dict.fromkeys(sizes))


def _assignment(
    linears: dict[str, Any], hidden: int, activations: tuple[str, ...], x: Any, want: Any
) -> MLPRoles | None:
    """The first role assignment and activation that computes ``want`` from ``x``."""
    from transformers.activations import ACT2FN

    for order in itertools.permutations(linears):
        roles = dict(zip(("down", "up", "gate"), order, strict=False))
        if not _fits(linears, roles, hidden):
            continue
        for name in activations:
            act = ACT2FN[name]
            up = linears[roles["up"]](x)
            inner = act(linears[roles["gate"]](x)) * up if "gate" in roles else act(up)
            got = linears[roles["down"]](inner)
            if got.shape == want.shape and torch.allclose(got, want, atol=ROLE_TOLERANCE):
                return MLPRoles(roles.get("gate"), roles["up"], roles["down"], name)
    return None


def _fits(linears: dict[str, Any], roles: dict[str, str], hidden: int) -> bool:
    """Whether the shapes allow the assignment: gate and up read the hidden states and write
    the width down reads, down writes the hidden states."""
    down = linears[roles["down"]]
    feeding = [linears[roles[r]] for r in ("gate", "up") if r in roles]
    return down.out_features == hidden and all(
        m.in_features == hidden and m.out_features == down.in_features for m in feeding
    )


class _Tag(torch.nn.Module):
    """Stands in for expert ``index``: every token it is given comes out as ``scale`` times the
    one-hot vector of ``index``."""

    def __init__(self, index: int, scale: float) -> None:
        super().__init__()
        self.index, self.scale = index, scale

    def forward(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        out = torch.zeros_like(x)
        out[..., self.index] = self.scale
        return out


def block_routing(block: Any, hidden: Any, top_k: int) -> tuple[Any, Any] | None:
    """(weights [T, k], indices [T, k]) the MoE ``block`` gives the tokens ``hidden`` [T, H]
    when it routes them in its own forward (the router a bare linear), read through the block:
    each expert of its ``StackedExperts`` swapped for a one-hot tag, once with scale 1, once with
    0; the difference of the block's outputs is each token's weight on each expert (whatever
    else the block adds, a shared expert say, cancels). None when the block cannot be read so."""
    experts = getattr(block, "experts", None)
    if not isinstance(experts, StackedExperts) or len(experts) > hidden.shape[-1]:
        return None
    originals = list(experts)
    runs = []
    try:
        for scale in (1.0, 0.0):
            for index in range(len(originals)):
                experts[index] = _Tag(index, scale)
            with torch.no_grad():
                output = block(hidden.unsqueeze(0))
            output = output[0] if isinstance(output, tuple) else output
            runs.append(output.reshape(hidden.shape).float())
    except Exception:  # a block that cannot run on (1, T, H) alone
        return None
    finally:
        for index, expert in enumerate(originals):
            experts[index] = expert
    dense = runs[0] - runs[1]
    if dense[:, len(originals) :].abs().max().item() > ROLE_TOLERANCE:
        return None  # something other than the tags moved
    weights, indices = dense[:, : len(originals)].topk(top_k, dim=-1)
    chosen = (dense[:, : len(originals)] != 0).sum(dim=-1)
    if bool((chosen > top_k).any()):
        return None
    return weights, indices
