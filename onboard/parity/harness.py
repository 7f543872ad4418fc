"""The parity scenarios, shared by every target.

A ``Runner`` is anything that runs a causal LM step on numpy inputs: the HF reference, an ONNX
session, a generated torch model. The harness feeds the reference and a candidate the same
inputs (a prompt longer than any sliding window, decode steps that feed the reference's argmax,
a batch of two with left or right padding) and turns every comparison into a ``Check``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from onboard.parity.report import Check, Metrics, Status

PROMPT_LEN = 9  # longer than the tiny sliding window (4), so windows are exercised
DECODE_STEPS = 2
PAD = 2  # tokens of padding in the second row of the padded batch


@dataclass(frozen=True)
class Batch:
    input_ids: np.ndarray  # [B, S] int64
    attention_mask: np.ndarray  # [B, past + S] int64
    position_ids: np.ndarray  # [B, S] int64


@dataclass(frozen=True)
class Step:
    logits: np.ndarray  # [B, S, vocab]
    kv: tuple[
        tuple[np.ndarray, np.ndarray], ...
    ]  # per layer: key, value [B, kv_heads, T, head_dim]
    state: Any = None  # what the runner needs to continue decoding


class Runner(Protocol):
    provider: str
    supports_left_padding: bool

    def prefill(self, batch: Batch) -> Step: ...

    def decode(self, previous: Step, batch: Batch) -> Step: ...


def prompt_batch(vocab_size: int, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    high = max(2, min(vocab_size - 1, 200))
    ids = rng.integers(1, high, size=(1, PROMPT_LEN), dtype=np.int64)
    mask = np.ones_like(ids)
    return Batch(ids, mask, np.arange(PROMPT_LEN, dtype=np.int64)[None])


def padded_batch(vocab_size: int, side: str, seed: int = 1) -> Batch:
    rng = np.random.default_rng(seed)
    high = max(2, min(vocab_size - 1, 200))
    ids = rng.integers(1, high, size=(2, PROMPT_LEN), dtype=np.int64)
    mask = np.ones_like(ids)
    if side == "left":
        mask[1, :PAD] = 0
    else:
        mask[1, -PAD:] = 0
    ids[mask == 0] = 0
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int64)
    return Batch(ids, mask, positions)


def run_scenarios(
    reference: Runner, candidate: Runner, vocab_size: int, *, compare_kv: bool = True
) -> tuple[Check, ...]:
    """Every scenario; ``compare_kv=False`` when the reference caches something else than K and V
    (transformers keeps MLA's compressed latents), which decode steps then cover."""
    provider = candidate.provider
    checks: list[Check] = []
    prompt = prompt_batch(vocab_size)
    ref_step, got_step, error = _both(reference, candidate, lambda r: r.prefill(prompt))
    if error:
        return (Check("prefill", provider, Status.FAIL, detail=error),)
    checks.append(_logits_check("prefill", provider, ref_step.logits, got_step.logits))
    if not ref_step.kv:
        detail = "the reference keeps no KV cache; decode steps rerun it on every token"
        checks.append(Check("kv-cache", provider, Status.SKIP, detail=detail))
    elif compare_kv:
        checks.append(_kv_check(provider, ref_step.kv, got_step.kv))
    else:
        detail = "the reference caches compressed latents; decode steps compare instead"
        checks.append(Check("kv-cache", provider, Status.SKIP, detail=detail))

    metrics: list[Metrics] = []
    mask = prompt.attention_mask
    for step in range(DECODE_STEPS):
        token = ref_step.logits[:, -1:].argmax(-1).astype(np.int64)
        mask = np.concatenate([mask, np.ones((1, 1), dtype=np.int64)], axis=1)
        position = np.full((1, 1), PROMPT_LEN + step, dtype=np.int64)
        batch = Batch(token, mask, position)
        try:
            ref_step = reference.decode(ref_step, batch)
            got_step = candidate.decode(got_step, batch)
        except Exception as exc:  # a candidate that cannot decode fails the check, never crashes
            checks.append(Check("decode", provider, Status.FAIL, detail=_error(exc)))
            break
        metrics.append(Metrics.compare(ref_step.logits, got_step.logits))
    if metrics:
        worst = max(metrics, key=lambda m: m.max_abs)
        status = Status.PASS if all(m.passes() for m in metrics) else Status.FAIL
        detail = f"{len(metrics)} steps after a {PROMPT_LEN}-token prompt"
        checks.append(Check("decode", provider, status, worst, detail))

    for side in ("left", "right"):
        name = f"pad-{side}"
        if side == "left" and not candidate.supports_left_padding:
            checks.append(Check(name, provider, Status.SKIP, detail="provider needs right padding"))
            continue
        batch = padded_batch(vocab_size, side)
        ref_pad, got_pad, error = _both(reference, candidate, lambda r, b=batch: r.prefill(b))
        if error:
            checks.append(Check(name, provider, Status.FAIL, detail=error))
            continue
        valid = batch.attention_mask.astype(bool)
        checks.append(
            _logits_check(name, provider, ref_pad.logits[valid], got_pad.logits[valid], "batch 2")
        )
    return tuple(checks)


def _both(reference: Runner, candidate: Runner, call: Any) -> tuple[Any, Any, str]:
    ref = call(reference)
    try:
        got = call(candidate)
    except Exception as exc:  # reported as a failing check with the error, not a traceback
        return ref, None, _error(exc)
    return ref, got, ""


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def _logits_check(
    name: str, provider: str, ref: np.ndarray, got: np.ndarray, detail: str = ""
) -> Check:
    try:
        metrics = Metrics.compare(ref, got)
    except ValueError as exc:
        return Check(name, provider, Status.FAIL, detail=f"logits {exc}")
    status = Status.PASS if metrics.passes() else Status.FAIL
    return Check(name, provider, status, metrics, detail)


def _kv_check(
    provider: str,
    ref: tuple[tuple[np.ndarray, np.ndarray], ...],
    got: tuple[tuple[np.ndarray, np.ndarray], ...],
) -> Check:
    """Keys and values of every layer; sliding layers may keep fewer positions (the tail)."""
    if len(ref) != len(got):
        return Check("kv-cache", provider, Status.FAIL, detail=f"{len(got)} layers != {len(ref)}")
    worst: Metrics | None = None
    for layer, (ref_kv, got_kv) in enumerate(zip(ref, got, strict=True)):
        for which, r, g in (("key", ref_kv[0], got_kv[0]), ("value", ref_kv[1], got_kv[1])):
            keep = min(r.shape[2], g.shape[2])
            if r.shape[:2] + r.shape[3:] != g.shape[:2] + g.shape[3:] or keep == 0:
                detail = f"layer {layer} {which} shape {g.shape} != {r.shape}"
                return Check("kv-cache", provider, Status.FAIL, detail=detail)
            metrics = Metrics.compare(r[:, :, -keep:], g[:, :, -keep:])
            if worst is None or metrics.max_abs > worst.max_abs:
                worst = metrics
    status = Status.PASS if worst is not None and worst.passes(logits=False) else Status.FAIL
    return Check("kv-cache", provider, status, worst, f"{len(ref)} layers, keys and values")
