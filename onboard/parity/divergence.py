"""Where a failing parity run starts: the first layer and module whose outputs diverge.

A failed logits check says that the candidate computes something else, not where. Both sides of
a comparison can report the same named intermediate outputs ("probes") of one step: the hidden
states entering the first decoder layer (``embeddings``), each layer's attention output, MLP
output and output (the residual stream), the input of the LM head (``final norm``) and the
logits. The probe points are found by structure on either side (``find_points``), so HF's
``transformer.h.1.attn`` and mobius' ``model.layers.1.self_attn`` are both "layer 1 attention".

The residual stream decides which layer: the first of embeddings, layer outputs, final norm and
logits that diverges beyond the parity gate; inside that layer, the first of its attention and
MLP outputs that diverges names the module. A difference of module boundaries (a scale applied
inside one side's module and after the other's) cannot move the layer, only the module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onboard.parity.harness import (
    DECODE_STEPS,
    Runner,
    Scenarios,
    Step,
    decode_batch,
    padded_batch,
    prompt_batch,
)
from onboard.parity.report import Check, Metrics, Status

EMBEDDINGS = "embeddings"
FINAL_NORM = "final norm"
LOGITS = "logits"
ATTENTION, MLP, OUTPUT = "attention", "mlp", "output"

# A child of a decoder layer is its token mixer or its MLP when its attribute or class name says
# so (norms excluded): self_attn / attn / attention / linear_attn / mixer; mlp / feed_forward /
# block_sparse_moe / ffn. The first such child, in registration order, wins.
_ROLE_WORDS = {
    ATTENTION: ("attn", "attention", "mixer"),
    MLP: ("mlp", "moe", "feed_forward", "feedforward", "ffn", "experts"),
}


# The checks whose numbers a divergence can explain (weights and build failures have their own)
SCENARIO_CHECKS = ("prefill", "kv-cache", "decode", "states", "pad-left", "pad-right")


def worth_localising(checks: Sequence[Check]) -> bool:
    """Whether a scenario check failed (an excused failure is the library's, not localised)."""
    return any(c.status is Status.FAIL and c.name in SCENARIO_CHECKS for c in checks)


def layer_probe(layer: int, part: str) -> str:
    return f"layer {layer} {part}"


@dataclass(frozen=True)
class Capture:
    """One probe: the ``side`` ("input" or "output") of the module called ``module``."""

    probe: str
    module: str
    side: str


@dataclass(frozen=True)
class ProbePoints:
    """Module names of a model's probe points; ``None`` where the structure shows no such module."""

    layers: tuple[str, ...]
    attention: tuple[str | None, ...]
    mlp: tuple[str | None, ...]
    head: str | None

    def captures(self) -> tuple[Capture, ...]:
        found = [Capture(EMBEDDINGS, self.layers[0], "input")] if self.layers else []
        for index, layer in enumerate(self.layers):
            for part, module in ((ATTENTION, self.attention[index]), (MLP, self.mlp[index])):
                if module is not None:
                    found.append(Capture(layer_probe(index, part), module, "output"))
            found.append(Capture(layer_probe(index, OUTPUT), layer, "output"))
        if self.head is not None:
            found.append(Capture(FINAL_NORM, self.head, "input"))
        return tuple(found)


def find_points(
    modules: Sequence[tuple[str, str]], num_layers: int, head: str | None
) -> ProbePoints:
    """The probe points among ``modules`` (qualified name, class name, in registration order):
    the first container whose children ``0 .. num_layers - 1`` are exactly its numbered ones."""
    names = [name for name, _ in modules]
    classes = dict(modules)
    prefix = next((p for p in _layer_prefixes(names) if _numbered(names, p) == num_layers), None)
    if prefix is None:
        return ProbePoints((), (), (), head if head in classes else None)
    layers = tuple(f"{prefix}{i}" for i in range(num_layers))
    roles = [_roles(layer, names, classes) for layer in layers]
    return ProbePoints(
        layers,
        tuple(r.get(ATTENTION) for r in roles),
        tuple(r.get(MLP) for r in roles),
        head if head in classes else None,
    )


def _layer_prefixes(names: Sequence[str]) -> list[str]:
    """``"model.layers."`` for every ``model.layers.0``, outermost first."""
    found = [name[:-1] for name in names if name == "0" or name.endswith(".0")]
    return sorted(dict.fromkeys(found), key=lambda p: p.count("."))


def _numbered(names: Sequence[str], prefix: str) -> int:
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    indices = {int(m[1]) for name in names if (m := pattern.fullmatch(name))}
    return len(indices) if indices == set(range(len(indices))) else -1


def _roles(layer: str, names: Sequence[str], classes: Mapping[str, str]) -> dict[str, str]:
    roles: dict[str, str] = {}
    for name in names:
        attribute = name[len(layer) + 1 :]
        if not name.startswith(layer + ".") or "." in attribute:
            continue
        words = f"{attribute} {classes[name]}".lower()
        if "norm" in words:
            continue
        for role, markers in _ROLE_WORDS.items():
            if role not in roles and any(marker in words for marker in markers):
                roles[role] = name
                break
    return roles


def stream_order(probes: Mapping[str, Any]) -> list[str]:
    """The residual-stream probes of ``probes`` in the order the forward computes them."""
    layers = sorted(
        int(m[1]) for name in probes if (m := re.fullmatch(r"layer (\d+) output", name))
    )
    order = [EMBEDDINGS, *(layer_probe(i, OUTPUT) for i in layers), FINAL_NORM, LOGITS]
    return [name for name in order if name in probes]


def probe_order(probes: Mapping[str, Any]) -> list[str]:
    """Every probe of ``probes`` in the order the forward computes them."""
    order: list[str] = []
    for name in stream_order(probes):
        match = re.fullmatch(r"layer (\d+) output", name)
        if match:
            order += [
                layer_probe(int(match[1]), p)
                for p in (ATTENTION, MLP)
                if layer_probe(int(match[1]), p) in probes
            ]
        order.append(name)
    return order


@dataclass(frozen=True)
class Divergence:
    """The first probe past the gate in one step of one provider's run, and the last probe
    before it that still agrees."""

    provider: str
    phase: str  # "the prefill", "decode step 2", "the left-padded batch"
    where: str  # "layer 1 mlp", "embeddings", "logits"
    max_abs: float
    agreed: str = ""  # "layer 0 output"; empty when the first probe already diverges
    agreed_max_abs: float = 0.0
    detail: str = ""  # a shape mismatch, when that is the difference

    @property
    def layer(self) -> int | None:
        match = re.match(r"layer (\d+) ", self.where)
        return int(match[1]) if match else None

    @property
    def module(self) -> str:
        return self.where.rsplit(" ", 1)[-1] if self.layer is not None else self.where

    def line(self) -> str:
        size = self.detail or f"max abs {self.max_abs:.2g}"
        before = (
            f"; {self.agreed} agrees (max abs {self.agreed_max_abs:.2g})" if self.agreed else ""
        )
        return f"{self.provider}: first diverges at {self.where} in {self.phase}, {size}{before}"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Divergence:
        """Back from ``to_dict`` (AutoModel's parity subprocess reports it as JSON)."""
        fields = ("provider", "phase", "where", "max_abs", "agreed", "agreed_max_abs", "detail")
        return cls(**{name: data[name] for name in fields if name in data})

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "phase": self.phase,
            "where": self.where,
            "layer": self.layer,
            "module": self.module,
            "max_abs": self.max_abs,
            "agreed": self.agreed,
            "agreed_max_abs": self.agreed_max_abs,
            "detail": self.detail,
        }


def first_divergence(
    provider: str,
    phase: str,
    reference: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
) -> Divergence | None:
    """The first probe both sides report that diverges, or None when every one agrees."""
    shared = {name: reference[name] for name in reference if name in candidate}
    diffs = {name: _diff(reference[name], candidate[name]) for name in shared}
    stream = stream_order(shared)
    first = next((name for name in stream if not diffs[name][0]), None)
    if first is None:
        return None
    where = first
    match = re.fullmatch(r"layer (\d+) output", first)
    if match:
        parts = (layer_probe(int(match[1]), p) for p in (ATTENTION, MLP))
        where = next((p for p in parts if p in diffs and not diffs[p][0]), first)
    order = probe_order(shared)
    before = [name for name in order[: order.index(where)] if diffs[name][0]]
    agreed = before[-1] if before else ""
    _, max_abs, detail = diffs[where]
    return Divergence(
        provider,
        phase,
        where,
        max_abs,
        agreed,
        diffs[agreed][1] if agreed else 0.0,
        detail,
    )


def _diff(reference: np.ndarray, candidate: np.ndarray) -> tuple[bool, float, str]:
    """(agrees, max abs, why not comparable). A candidate laid out flat ([B*S, H]) is compared
    in the reference's shape."""
    got = np.asarray(candidate)
    if got.shape != reference.shape and got.size == reference.size:
        got = got.reshape(reference.shape)
    try:
        metrics = Metrics.compare(reference, got)
    except ValueError as exc:
        return False, float("inf"), str(exc)
    return metrics.passes(logits=False), metrics.max_abs, ""


def valid_positions(probes: Mapping[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """Each probe at the positions a padded batch's mask keeps (``[B, S, ...]`` probes only)."""
    valid = mask.astype(bool)
    return {
        name: value[valid] if value.shape[:2] == valid.shape else value
        for name, value in probes.items()
    }


def localise(
    reference: Runner, candidate: Runner, vocab_size: int, scenarios: Scenarios
) -> Divergence | None:
    """Rerun the scenarios with probing runners and name the first divergence: in the prefill,
    else in a decode step, else in a padded batch. None when every probe agrees everywhere (a
    cache that differs without changing any output) or a run raises (its check said so)."""
    provider = candidate.provider
    prompt = prompt_batch(vocab_size, length=scenarios.prompt_len)
    try:
        ref, got = reference.prefill(prompt), candidate.prefill(prompt)
        found = _step_divergence(provider, "the prefill", ref, got)
        mask = prompt.attention_mask
        for step in range(DECODE_STEPS):
            if found is not None:
                return found
            batch = decode_batch(prompt, mask, ref, step)
            mask = batch.attention_mask
            ref, got = reference.decode(ref, batch), candidate.decode(got, batch)
            found = _step_divergence(provider, f"decode step {step + 1}", ref, got)
        for side in ("left", "right"):
            if found is not None or (side == "left" and candidate.left_padding_refused):
                continue
            batch = padded_batch(vocab_size, side)
            ref, got = reference.prefill(batch), candidate.prefill(batch)
            phase = f"the {side}-padded batch"
            found = _step_divergence(provider, phase, ref, got, batch.attention_mask)
    except Exception:  # the failing check already carries the error
        return None
    return found


def _step_divergence(
    provider: str, phase: str, ref: Step, got: Step, mask: np.ndarray | None = None
) -> Divergence | None:
    sides = [{**step.probes, LOGITS: step.logits} for step in (ref, got)]
    if mask is not None:
        sides = [valid_positions(side, mask) for side in sides]
    return first_divergence(provider, phase, *sides)
