"""The parity scenarios, shared by every target.

A ``Runner`` is anything that runs a causal LM step on numpy inputs: the HF reference, an ONNX
session, a generated torch model. The harness feeds the reference and a candidate the same
inputs (a prompt longer than any sliding window, decode steps that feed the reference's argmax,
a batch of two with left or right padding) and turns every comparison into a ``Check``.

Caches come in two shapes. Attention-only models report ``Step.kv``: keys and values per layer.
Hybrids (Mamba, DeltaNet, short-convolution layers next to attention) report ``Step.states``:
per layer, mobius' state names (``key``, ``value``, ``conv_state``, ``ssm_state``,
``recurrent_state``) in mobius' layout, compared after the prefill and after every decode step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from onboard.parity.report import Check, Metrics, Status

if TYPE_CHECKING:
    from onboard.spec import TextDecoderSpec

PROMPT_LEN = 9  # longer than the tiny sliding window (4), so windows are exercised
DECODE_STEPS = 3  # a recurrent state must survive being fed back more than once
PAD = 2  # tokens of padding in the second row of the padded batch


@dataclass(frozen=True)
class Batch:
    input_ids: np.ndarray  # [B, S] int64
    attention_mask: np.ndarray  # [B, past + S] int64
    position_ids: np.ndarray  # [B, S] int64


LayerStates = Mapping[str, np.ndarray]  # state name -> array; empty for a stateless layer
KV_NAMES = ("key", "value")


@dataclass(frozen=True)
class Step:
    logits: np.ndarray  # [B, S, vocab]
    kv: tuple[
        tuple[np.ndarray, np.ndarray], ...
    ]  # per layer: key, value [B, kv_heads, T, head_dim]
    state: Any = None  # what the runner needs to continue decoding
    states: tuple[LayerStates, ...] = ()  # hybrids only, per layer, in mobius' layout
    # a probing runner's named intermediate outputs of this step (see parity.divergence)
    probes: Mapping[str, np.ndarray] = field(default_factory=dict)


def split_cache(
    layers: tuple[LayerStates, ...],
) -> tuple[tuple[tuple[np.ndarray, np.ndarray], ...], tuple[LayerStates, ...]]:
    """``(kv, states)`` for a cache read per layer: an attention-only cache is reported as keys
    and values, anything else (a recurrent or stateless layer) as states, so both runners of a
    comparison report the same kind."""
    if layers and all(set(layer) == set(KV_NAMES) for layer in layers):
        return tuple((layer["key"], layer["value"]) for layer in layers), ()
    return (), layers


class Runner(Protocol):
    provider: str
    left_padding_refused: str | None  # why the candidate cannot take left padding, if it cannot

    def prefill(self, batch: Batch) -> Step: ...

    def decode(self, previous: Step, batch: Batch) -> Step: ...


def prompt_length(chunks: Iterable[int] = ()) -> int:
    """PROMPT_LEN, or longer than every chunk a mixer's prefill scans in (HF's DeltaNet: 64),
    so that a chunked prefill and the step-by-step recurrence must agree."""
    return max([PROMPT_LEN, *(chunk + PROMPT_LEN for chunk in chunks)])


def prompt_batch(vocab_size: int, seed: int = 0, length: int = PROMPT_LEN) -> Batch:
    rng = np.random.default_rng(seed)
    high = max(2, min(vocab_size - 1, 200))
    ids = rng.integers(1, high, size=(1, length), dtype=np.int64)
    mask = np.ones_like(ids)
    return Batch(ids, mask, np.arange(length, dtype=np.int64)[None])


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


@dataclass(frozen=True)
class Scenarios:
    """How the scenarios run for one model. ``compare_kv`` False: the reference caches something
    else than K and V (transformers keeps MLA's compressed latents), which decode steps then
    cover; ``prompt_len``: the prefill's length (see ``prompt_length``)."""

    compare_kv: bool = True
    prompt_len: int = PROMPT_LEN


DEFAULT_SCENARIOS = Scenarios()


def scenarios_for(text: TextDecoderSpec) -> Scenarios:
    """The scenarios a decoder's spec asks for: K and V compared unless the attention is latent
    (MLA), a prompt past every chunk its mixers' prefill scans in."""
    attention = text.attention
    return Scenarios(
        compare_kv=attention is None or attention.mla is None,
        prompt_len=prompt_length(text.mixers.fixed_chunks()),
    )


def run_scenarios(
    reference: Runner,
    candidate: Runner,
    vocab_size: int,
    scenarios: Scenarios = DEFAULT_SCENARIOS,
) -> tuple[Check, ...]:
    """Every scenario: the prefill, its cache, decode steps (and states), padded batches."""
    provider = candidate.provider
    prompt = prompt_batch(vocab_size, length=scenarios.prompt_len)
    ref_step, got_step, error = _both(reference, candidate, lambda r: r.prefill(prompt))
    if error:
        return (Check("prefill", provider, Status.FAIL, detail=error),)
    checks = [logits_check("prefill", provider, ref_step.logits, got_step.logits)]
    takes_cache = getattr(candidate, "takes_cache", True)
    checks += _cache_checks(provider, ref_step, got_step, scenarios.compare_kv, takes_cache)
    checks += _decode_checks(
        reference, candidate, prompt, ref_step, got_step, compare_kv=scenarios.compare_kv
    )
    checks += _padding_checks(reference, candidate, vocab_size)
    return tuple(checks)


def _cache_checks(
    provider: str, ref: Step, got: Step, compare_kv: bool, takes_cache: bool = True
) -> list[Check]:
    """The prefill's KV cache; states are checked with the decode steps, which they also cover.

    A candidate whose forward takes no cache argument (AutoModel's own training classes) and
    returns none has nothing to compare: decode steps rerun it on every token.
    """
    if ref.states:
        if got.states:
            return []
        detail = "the candidate reports no recurrent states; decode steps compare instead"
        return [Check("states", provider, Status.SKIP, detail=detail)]
    if not ref.kv:
        detail = "the reference keeps no KV cache; decode steps rerun it on every token"
        return [Check("kv-cache", provider, Status.SKIP, detail=detail)]
    if not takes_cache and not got.kv:
        detail = "the candidate's forward takes no cache; decode steps rerun it on every token"
        return [Check("kv-cache", provider, Status.SKIP, detail=detail)]
    if compare_kv:
        return [_kv_check(provider, ref.kv, got.kv)]
    detail = "the reference caches compressed latents; decode steps compare instead"
    return [Check("kv-cache", provider, Status.SKIP, detail=detail)]


def _decode_checks(
    reference: Runner,
    candidate: Runner,
    prompt: Batch,
    ref_step: Step,
    got_step: Step,
    *,
    compare_kv: bool = True,
) -> list[Check]:
    """Decode steps feeding the reference's argmax; states after the prefill and every step
    (keys and values among them only when ``compare_kv``: latent attention's indexer keys are
    states beside a reference cache of compressed latents)."""
    provider = candidate.provider
    checks: list[Check] = []
    compare_states = bool(ref_step.states and got_step.states)
    skip = () if compare_kv else KV_NAMES
    diffs = list(state_diffs("the prefill", ref_step, got_step, skip))
    metrics: list[Metrics] = []
    mask = prompt.attention_mask
    for step in range(DECODE_STEPS):
        batch = decode_batch(prompt, mask, ref_step, step)
        mask = batch.attention_mask
        try:
            ref_step = reference.decode(ref_step, batch)
            got_step = candidate.decode(got_step, batch)
        except Exception as exc:  # a candidate that cannot decode fails the check, never crashes
            checks.append(Check("decode", provider, Status.FAIL, detail=error_text(exc)))
            break
        metrics.append(Metrics.compare(ref_step.logits, got_step.logits))
        diffs += state_diffs(f"decode {step + 1}", ref_step, got_step, skip)
    if metrics:
        worst = max(metrics, key=lambda m: m.max_abs)
        status = Status.PASS if all(m.passes() for m in metrics) else Status.FAIL
        detail = f"{len(metrics)} steps after a {prompt.input_ids.shape[1]}-token prompt"
        checks.append(Check("decode", provider, status, worst, detail))
    if compare_states:
        checks.append(states_check(provider, diffs, len(metrics)))
    return checks


def decode_batch(prompt: Batch, mask: np.ndarray, ref_step: Step, step: int) -> Batch:
    """Decode step ``step`` (from 0) after ``prompt``: the reference's argmax as the next token,
    ``mask`` (the previous step's) one position longer."""
    token = ref_step.logits[:, -1:].argmax(-1).astype(np.int64)
    mask = np.concatenate([mask, np.ones((1, 1), dtype=np.int64)], axis=1)
    position = np.full((1, 1), prompt.input_ids.shape[1] + step, dtype=np.int64)
    return Batch(token, mask, position)


def _padding_checks(reference: Runner, candidate: Runner, vocab_size: int) -> list[Check]:
    provider = candidate.provider
    checks: list[Check] = []
    for side in ("left", "right"):
        name = f"pad-{side}"
        if side == "left" and candidate.left_padding_refused:
            checks.append(Check(name, provider, Status.SKIP, detail=candidate.left_padding_refused))
            continue
        batch = padded_batch(vocab_size, side)
        ref_pad, got_pad, error = _both(reference, candidate, lambda r, b=batch: r.prefill(b))
        if error:
            checks.append(Check(name, provider, Status.FAIL, detail=error))
            continue
        valid = batch.attention_mask.astype(bool)
        checks.append(
            logits_check(name, provider, ref_pad.logits[valid], got_pad.logits[valid], "batch 2")
        )
    return checks


def _both(reference: Runner, candidate: Runner, call: Any) -> tuple[Any, Any, str]:
    ref = call(reference)
    try:
        got = call(candidate)
    except Exception as exc:  # reported as a failing check with the error, not a traceback
        return ref, None, error_text(exc)
    return ref, got, ""


def error_text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def logits_check(
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
            same_heads = r.shape[:2] + r.shape[3:] == g.shape[:2] + g.shape[3:]
            if not same_heads or min(r.shape[2], g.shape[2]) == 0:
                detail = f"layer {layer} {which} shape {g.shape} != {r.shape}"
                return Check("kv-cache", provider, Status.FAIL, detail=detail)
            metrics = Metrics.compare(*_common_tail(r, g))
            if worst is None or metrics.max_abs > worst.max_abs:
                worst = metrics
    status = Status.PASS if worst is not None and worst.passes(logits=False) else Status.FAIL
    return Check("kv-cache", provider, status, worst, f"{len(ref)} layers, keys and values")


@dataclass(frozen=True)
class StateDiff:
    """One state of one layer after one step: how far apart, or why it cannot be compared."""

    layer: int
    name: str  # "" when the layer's state names differ
    phase: str  # "the prefill", "decode 2"
    metrics: Metrics | None
    problem: str = ""

    @property
    def where(self) -> str:
        return " ".join(filter(None, ("layer", str(self.layer), self.name, "after", self.phase)))

    @property
    def passes(self) -> bool:
        return self.metrics is not None and self.metrics.passes(logits=False)


def state_diffs(
    phase: str, ref_step: Any, got_step: Any, skip: tuple[str, ...] = ()
) -> tuple[StateDiff, ...]:
    """Every state of every layer when both report states, but those named in ``skip``; a
    layer one side lacks (mobius skips stateless layers at the end) counts as stateless."""
    ref, got = ref_step.states, got_step.states
    if not ref or not got:
        return ()
    diffs: list[StateDiff] = []
    for layer in range(max(len(ref), len(got))):
        ref_layer = ref[layer] if layer < len(ref) else {}
        got_layer = got[layer] if layer < len(got) else {}
        ref_layer = {n: v for n, v in ref_layer.items() if n not in skip}
        got_layer = {n: v for n, v in got_layer.items() if n not in skip}
        if set(ref_layer) != set(got_layer):
            problem = f"states {sorted(got_layer)} != {sorted(ref_layer)}"
            diffs.append(StateDiff(layer, "", phase, None, problem))
            continue
        diffs += (
            _state_diff(layer, name, phase, ref_layer[name], got_layer[name])
            for name in sorted(ref_layer)
        )
    return tuple(diffs)


def _common_tail(ref: np.ndarray, got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keys or values ``[B, heads, T, head_dim]`` over the positions both kept: a sliding layer
    may keep only the tail."""
    keep = min(ref.shape[2], got.shape[2])
    return ref[:, :, ref.shape[2] - keep :], got[:, :, got.shape[2] - keep :]


def _state_diff(layer: int, name: str, phase: str, ref: np.ndarray, got: np.ndarray) -> StateDiff:
    if name in KV_NAMES and ref.ndim == got.ndim == 4:
        ref, got = _common_tail(ref, got)
    try:
        return StateDiff(layer, name, phase, Metrics.compare(ref, got))
    except ValueError as exc:
        return StateDiff(layer, name, phase, None, str(exc))


def states_check(provider: str, diffs: list[StateDiff], decode_steps: int) -> Check:
    """One check over the prefill and every decode step; a failure names the first state off."""
    phases = f"after the prefill and {decode_steps} decode steps"
    compared = [d for d in diffs if d.metrics is not None]
    if not compared:
        return Check("states", provider, Status.FAIL, detail=f"no states compared {phases}")
    worst = max(compared, key=lambda d: d.metrics.max_abs)
    names = ", ".join(sorted({d.name for d in compared}))
    summary = f"{len({d.layer for d in diffs})} layers ({names}) {phases}"
    failed = next((d for d in diffs if not d.passes), None)
    if failed is None:
        detail = f"{summary}; worst {worst.where}"
        return Check("states", provider, Status.PASS, worst.metrics, detail)
    reason = failed.problem or f"max abs {failed.metrics.max_abs:.3g}"
    detail = f"{failed.where}: {reason}; {summary}"
    return Check("states", provider, Status.FAIL, worst.metrics, detail)
