"""Gated norms in mobius (AXK2's GatedRMSNorm): mobius' norms have no gate of their own, so a
gated norm is a generated component holding the plain norm and the gate's two linears under
HF's names, built by the layers for the roles, and in the layers, the spec gates. The rank is
a config field where HF reads it from its config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from onboard.spec import ArchitectureSpec
from onboard.targets.mobius.settings import ExtraField, Setting, why

SPEC_PATH = "text.norm.gate"
Rule = Literal["all", "moe", "dense"]


@dataclass(frozen=True)
class NormGateDesign:
    """What the generated gated norm holds and computes, and which layer norms are gated."""

    norm: str  # the plain norm's attribute
    holder: str | None  # the module holding the two linears (AXK2: mlp); None: the norm itself
    down: str
    up: str
    activation: str
    reads: Literal["normed", "input"]
    rank: str  # Python source of the rank: a config field, or HF's constant
    # layer attribute -> the layers whose norm of that attribute is gated: all, moe or dense
    where: tuple[tuple[str, Rule], ...]

    def gated(self, attr: str) -> str | None:
        return dict(self.where).get(attr)


def norm_gate_design(spec: ArchitectureSpec) -> NormGateDesign | None:
    gate = spec.text.norm.gate
    if gate is None:
        return None
    names = dict(spec.text.norm.names)
    kinds = {"dense", "moe"} if spec.text.moe is not None else {"dense"}
    where: list[tuple[str, Rule]] = []
    for role, gated in gate.roles:
        wanted = set(gated) & kinds
        if wanted == kinds:
            where.append((names[role], "all"))
        elif wanted:
            where.append((names[role], "moe" if "moe" in wanted else "dense"))
    holder, _, down = gate.down.rpartition(".")
    _, _, up = gate.up.rpartition(".")
    return NormGateDesign(
        norm=gate.norm,
        holder=holder or None,
        down=down,
        up=up,
        activation=gate.activation,
        reads=gate.reads,
        rank=f"config.{gate.rank_key}" if gate.rank_key else str(gate.rank),
        where=tuple(where),
    )


def gate_settings(spec: ArchitectureSpec, extra: list[ExtraField]) -> list[Setting]:
    """The gate's rank as a config field, where HF reads it from its config."""
    gate = spec.text.norm.gate
    if gate is None or gate.rank_key is None:
        return []
    extra.append(ExtraField(gate.rank_key, "int", "0"))
    reason = why("the gated norms' low rank", spec, SPEC_PATH)
    return [Setting(gate.rank_key, f"config.{gate.rank_key}", reason)]


def gate_reason(spec: ArchitectureSpec) -> str | None:
    """One docstring line for the generated model."""
    design = norm_gate_design(spec)
    if design is None:
        return None
    z = "y" if design.reads == "normed" else "x"
    layers = {"all": "every layer", "moe": "layers with experts", "dense": "dense layers"}
    norms = ", ".join(f"{attr} in {layers[rule]}" for attr, rule in design.where)
    return (
        f"gated norms: y * sigmoid(up({design.activation}(down({z})))), y the plain norm of x, "
        f"through a rank of {design.rank} ({norms})"
    )


def gate_blockers(spec: ArchitectureSpec) -> list[str]:
    """A gated norm whose gate the generated component cannot hold: linears in two modules."""
    gate = spec.text.norm.gate
    if gate is None:
        return []
    if gate.down.rpartition(".")[0] == gate.up.rpartition(".")[0]:
        return []
    evidence = spec.evidence_for(SPEC_PATH)
    at = evidence[0].where if evidence else SPEC_PATH
    return [
        f"a gated norm whose linears sit in different modules ({gate.down}, {gate.up}) at {at}: "
        "the generated gated norm holds both in one"
    ]
