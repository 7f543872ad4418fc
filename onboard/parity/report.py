"""Parity results: one ``Check`` per comparison, gathered in a ``ParityReport``.

A check fails on numbers (max abs diff over the gate, argmax disagreement) or on weights (a
checkpoint tensor left unconsumed, a parameter left unfilled). A failing check that a known
target-library bug explains, confirmed by a counterfactual re-run, is reported as ``xfail`` with
that bug's id: the generated code is not at fault, the library is, and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from onboard.weightmap import WeightMapProof

if TYPE_CHECKING:
    from onboard.parity.divergence import Divergence

MAX_ABS_GATE = 1e-4  # fp32, every parameter perturbed; passing cases measure ~1e-6
COSINE_FLOOR = 0.99999


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    XFAIL = "xfail"  # fails because of a confirmed, known target-library bug
    SKIP = "skip"  # not applicable (reason given)


@dataclass(frozen=True)
class Metrics:
    max_abs: float
    mean_abs: float
    cosine: float
    argmax_agree: float  # fraction of positions whose argmax token agrees

    @classmethod
    def compare(cls, reference: np.ndarray, candidate: np.ndarray) -> Metrics:
        ref = np.asarray(reference, dtype=np.float64)
        got = np.asarray(candidate, dtype=np.float64)
        if ref.shape != got.shape:
            raise ValueError(f"shape {got.shape} != reference {ref.shape}")
        diff = np.abs(ref - got)
        denom = np.linalg.norm(ref) * np.linalg.norm(got)
        cosine = float(np.dot(ref.ravel(), got.ravel()) / denom) if denom else 1.0
        agree = float(np.mean(ref.argmax(-1) == got.argmax(-1))) if ref.ndim else 1.0
        finite = np.isfinite(got).all()
        return cls(
            max_abs=float(diff.max()) if finite else float("inf"),
            mean_abs=float(diff.mean()) if finite else float("inf"),
            cosine=cosine if finite else 0.0,
            argmax_agree=agree,
        )

    def passes(self, *, logits: bool = True) -> bool:
        ok = self.max_abs <= MAX_ABS_GATE and self.cosine >= COSINE_FLOOR
        return ok and (self.argmax_agree == 1.0 or not logits)


@dataclass(frozen=True)
class Check:
    name: str  # prefill, decode, kv-cache, pad-left, pad-right, weights
    provider: str  # execution provider or device the candidate ran on
    status: Status
    metrics: Metrics | None = None
    detail: str = ""
    bug: str | None = None  # known target-library bug id when status is xfail

    def excused_by(self, bug: str) -> Check:
        """A failure a confirmed target-library bug explains becomes xfail; others stay."""
        return replace(self, status=Status.XFAIL, bug=bug) if self.status is Status.FAIL else self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "provider": self.provider,
            "status": str(self.status),
            "detail": self.detail,
        }
        if self.metrics is not None:
            out["metrics"] = self.metrics.__dict__.copy()
        if self.bug:
            out["bug"] = self.bug
        return out


@dataclass(frozen=True)
class TargetBug:
    id: str
    title: str
    evidence: str


@dataclass(frozen=True)
class ParityReport:
    target: str
    model_type: str
    model_class: str
    checks: tuple[Check, ...]
    weights: WeightMapProof | None
    bugs: tuple[TargetBug, ...] = ()
    versions: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    # per provider with a failing scenario: where its outputs first diverge (parity.divergence)
    divergences: tuple[Divergence, ...] = ()

    @property
    def passed(self) -> bool:
        return all(c.status in (Status.PASS, Status.XFAIL, Status.SKIP) for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status is Status.FAIL)

    def with_checks(self, checks: tuple[Check, ...]) -> ParityReport:
        return replace(self, checks=checks)

    def beside(self, other: ParityReport, label: str) -> ParityReport:
        """This report and ``other``'s checks of the same class on another tiny config (the
        flags flipped), each of those named with a ``+`` so the table tells them apart."""
        return replace(
            self,
            checks=self.checks + tuple(replace(c, name=f"{c.name}+") for c in other.checks),
            bugs=self.bugs + tuple(b for b in other.bugs if b.id not in {k.id for k in self.bugs}),
            seconds=self.seconds + other.seconds,
            notes=(*self.notes, f"checks marked + ran with {label}", *other.notes),
            divergences=self.divergences + other.divergences,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "model_type": self.model_type,
            "model_class": self.model_class,
            "passed": self.passed,
            "checks": [c.to_dict() for c in self.checks],
            "weights": None
            if self.weights is None
            else {
                "checkpoint_tensors": self.weights.checkpoint_tensors,
                "parameters": self.weights.parameters,
                "ok": self.weights.ok,
                "problems": list(self.weights.problems),
                "groups": [row.__dict__.copy() for row in self.weights.rows],
            },
            "target_bugs": [b.__dict__.copy() for b in self.bugs],
            "divergences": [d.to_dict() for d in self.divergences],
            "versions": dict(self.versions),
            "seconds": round(self.seconds, 2),
            "notes": list(self.notes),
        }
