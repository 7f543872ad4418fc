"""Parity for mobius: build the ONNX graph of a model class, load HF weights, run onnxruntime.

Follows the module-path recipe that is known to work offline (target-mobius notes, section 2):
config through ``_config_from_hf`` with the class's own ``config_class``, ``build_from_module``
per execution provider, initializer names read *before* ``apply_weights`` (it folds transposes
into new initializers), the checkpoint through the class's ``preprocess_weights``. The task is
the class's own ``default_task``: hybrids build ``hybrid-text-generation``, whose cache holds
conv and recurrent states next to keys and values (hybrid notes, section 2.3).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from onboard.hf_config import make_hf_config
from onboard.parity.divergence import Divergence, localise, worth_localising
from onboard.parity.harness import (
    DEFAULT_SCENARIOS,
    Batch,
    LayerStates,
    Scenarios,
    Step,
    run_scenarios,
    split_cache,
)
from onboard.parity.reference import HFRunner, build_reference, saved_checkpoint
from onboard.parity.report import Check, ParityReport, Status, TargetBug
from onboard.targets.mobius.bugs import (
    CPU_WITHOUT_GQA,
    KnownBug,
    WeightBug,
    applicable,
    counterfactual,
    register_cpu_without_gqa,
    weight_bugs,
)
from onboard.targets.mobius.probes import Recorder, name_probe_outputs, probing_task
from onboard.targets.mobius.static_cache import static_cache_check
from onboard.weightmap import WeightMapProof, prove

EXECUTION_PROVIDERS = ("default", "cpu")
DEFAULT_TASK = "text-generation"


@dataclasses.dataclass(frozen=True)
class BuiltModel:
    """One execution provider's ONNX model with weights applied, ready for onnxruntime."""

    provider: str
    session: Any
    proof: WeightMapProof
    memory_layout: str  # "" when the in-memory (fused) layout converts to the same weights
    config_class: str
    build_seconds: float
    probes: Mapping[str, str] = dataclasses.field(default_factory=dict)  # probe -> output name


class BuildError(Exception):
    """The graph was built and its weights proved, but onnxruntime could not load it."""

    def __init__(self, message: str, proof: WeightMapProof) -> None:
        super().__init__(message)
        self.proof = proof


def mobius_config(module_class: type, hf_config: Any) -> Any:
    """The mobius config exactly as the registry path resolves it for ``module_class``."""
    import onnx_ir as ir
    from mobius._config_resolver import _config_from_hf

    config = _config_from_hf(hf_config, parent_config=hf_config, module_class=module_class)
    return dataclasses.replace(config, dtype=ir.DataType.FLOAT)


def build(
    module_class: type,
    hf_config: Any,
    checkpoint: Mapping[str, Any],
    provider: str,
    workdir: Path,
    *,
    memory_state: Mapping[str, Any] | None = None,
    expected_name: Callable[[str], str | Collection[str]] | None = None,
    probe: bool = False,
) -> BuiltModel:
    """Build, prove the weight map, apply the checkpoint, save, and load in onnxruntime.

    ``memory_state`` is the HF model's own state dict (transformers v5 fuses MoE experts in
    memory); its conversion must give exactly the weights the on-disk checkpoint gives.
    ``probe``: the graph also outputs the probe modules' values (``probes.py``).
    """
    import mobius
    import onnxruntime as ort
    from mobius.tasks import get_task

    start = time.perf_counter()
    config = mobius_config(module_class, hf_config)
    module = module_class(config)
    task = get_task(getattr(module_class, "default_task", DEFAULT_TASK))
    recorder = Recorder(module, config.num_hidden_layers) if probe else None
    if recorder is not None:
        task = probing_task(task, recorder)
    with quiet_mobius():
        package = mobius.build_from_module(module, config, task, execution_provider=provider)
    graph = package["model"].graph
    probes = name_probe_outputs(graph, recorder) if recorder is not None else {}
    # Read before apply_weights, which folds transposes into new initializers (notes, step 8).
    parameters = {
        name: tuple(int(d) for d in value.shape)
        for name, value in graph.initializers.items()
        if value.const_value is None
    }
    tied = bool(getattr(config, "tie_word_embeddings", False))
    proof = prove(
        {k: tuple(v.shape) for k, v in checkpoint.items()},
        module.preprocess_weights,
        parameters,
        expected_name=expected_name,
        derived_ok=("lm_head.weight",) if tied else (),
    )
    converted = module.preprocess_weights(dict(checkpoint))
    memory_layout = _compare_memory_layout(module, converted, memory_state, checkpoint)
    with quiet_mobius():
        package.apply_weights(converted)
    out = workdir / (provider + ("-probed" if probe else ""))
    try:
        with quiet_mobius():
            package.save(str(out), progress_bar=False, check_weights=False)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(
            str(out / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime rejects the graph: report it with the proof
        raise BuildError(f"{type(exc).__name__}: {first_line(exc)}", proof) from exc
    return BuiltModel(
        provider,
        session,
        proof,
        memory_layout,
        type(config).__name__,
        time.perf_counter() - start,
        probes,
    )


def without_tied_aliases(state: Mapping[str, Any], checkpoint: Mapping[str, Any]) -> dict:
    """The HF model's state dict less the names transformers does not save because they share
    a saved tensor (BERT's lm_head.decoder.bias is lm_head.bias): the same tensor twice, which
    a conversion of the in-memory layout need not consume twice."""
    saved = {state[k].data_ptr() for k in checkpoint if k in state}
    return {
        k: v.detach().cpu()
        for k, v in state.items()
        if k in checkpoint or k == "lm_head.weight" or v.data_ptr() not in saved
    }


def _compare_memory_layout(
    module: Any,
    converted: Mapping[str, Any],
    memory_state: Mapping[str, Any] | None,
    checkpoint: Mapping[str, Any],
) -> str:
    """Empty when converting the in-memory layout gives the on-disk conversion, else why not."""
    import torch

    if memory_state is None or set(memory_state) <= set(checkpoint) | {"lm_head.weight"}:
        return ""
    from_memory = module.preprocess_weights(dict(memory_state))
    missing = sorted(set(converted) - set(from_memory))
    extra = sorted(set(from_memory) - set(converted))
    if missing or extra:
        return f"missing {missing[:3]}, extra {extra[:3]}"
    differ = [k for k in converted if not torch.equal(converted[k], from_memory[k])]
    return f"values differ for {differ[:3]}" if differ else ""


def first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else ""


@contextmanager
def quiet_mobius() -> Iterator[None]:
    loggers = [logging.getLogger(n) for n in ("mobius", "onnxscript", "onnx_ir")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


# The cache inputs: past_key_values.{i}.<name>, or past_states.{i}.<name> in mobius' ssm tasks
_PAST = re.compile(r"(past_key_values|past_states)\.(\d+)\.(\w+)")


class OnnxRunner:
    """Runs a built model in onnxruntime; its ``Step.state`` is the cache to feed back, per layer.

    The cache is whatever the session declares: ``past_key_values.{i}.<name>`` inputs (key and
    value; conv_state, ssm_state or recurrent_state; ``past_states`` in mobius' ssm tasks), fed
    zeros for the prefill and the matching
    ``present.{i}.<name>`` outputs after. Stateless layers (MLP, MoE) have no inputs.
    """

    def __init__(self, built: BuiltModel) -> None:
        self.provider = built.provider
        self.session = built.session
        self._probes = built.probes
        self._inputs = {i.name: i for i in self.session.get_inputs()}
        self._outputs = [o.name for o in self.session.get_outputs()]
        self._past = past_inputs(self._inputs)
        self._past_prefix = next(
            (m[1] for name in self._inputs if (m := _PAST.fullmatch(name))), "past_key_values"
        )
        # GroupQueryAttention derives sequence lengths as sum(mask) - 1: right padding only.
        # Hybrids are padded on the left too: HF zeroes padded positions before they reach a
        # recurrent state, which a mixer that ignores the mask (mobius' own) gets wrong. A graph
        # without a mask (mobius' ssm tasks) cannot be told where padding is at all.
        self.left_padding_refused = (
            "the graph takes no attention_mask"
            if "attention_mask" not in self._inputs
            else "provider needs right padding"
            if built.provider == "cpu"
            else None
        )

    def prefill(self, batch: Batch) -> Step:
        batch_size = batch.input_ids.shape[0]
        empty = tuple(
            {name: empty_state(shape, batch_size) for name, shape in layer.items()}
            for layer in self._past
        )
        return self._run(batch, empty)

    def decode(self, previous: Step, batch: Batch) -> Step:
        return self._run(batch, previous.state)

    def _run(self, batch: Batch, past: tuple[LayerStates, ...]) -> Step:
        feeds: dict[str, np.ndarray] = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "position_ids": batch.position_ids,
        }
        for i, layer in enumerate(past):
            feeds.update(
                {f"{self._past_prefix}.{i}.{name}": value for name, value in layer.items()}
            )
        feeds = {k: v for k, v in feeds.items() if k in self._inputs}
        results = dict(zip(self._outputs, self.session.run(self._outputs, feeds), strict=True))
        present = tuple(
            {name: results[f"present.{i}.{name}"] for name in layer}
            for i, layer in enumerate(self._past)
        )
        kv, states = split_cache(present)
        probes = {probe: results[name] for probe, name in self._probes.items()}
        return Step(logits=results["logits"], kv=kv, state=present, states=states, probes=probes)


def past_inputs(inputs: Mapping[str, Any]) -> tuple[dict[str, tuple[Any, ...]], ...]:
    """Per layer index, the declared shape of each cache input; ``{}`` for a skipped layer."""
    found: dict[int, dict[str, tuple[Any, ...]]] = {}
    for name, arg in inputs.items():
        match = _PAST.fullmatch(name)
        if match:
            found.setdefault(int(match[2]), {})[match[3]] = tuple(arg.shape)
    return tuple(found.get(i, {}) for i in range(max(found, default=-1) + 1))


def empty_state(shape: tuple[Any, ...], batch_size: int) -> np.ndarray:
    """An empty cache: the batch first, no past positions (a symbolic dim), fixed state sizes."""
    dims = [batch_size] + [d if isinstance(d, int) else 0 for d in shape[1:]]
    return np.zeros(dims, np.float32)


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="onboard-mobius-")


def run_parity(
    module_class: type,
    tiny_config: Mapping[str, Any],
    *,
    model_type: str,
    bug_ids: tuple[str, ...],
    device: str = "cpu",
    scenarios: Scenarios = DEFAULT_SCENARIOS,
    expected_name: Callable[[str], str | Collection[str]] | None = None,
) -> ParityReport:
    """Every check on both execution providers; failures a known bug explains become xfail."""
    start = time.perf_counter()
    checks: list[Check] = []
    bugs: list[TargetBug] = []
    proof: WeightMapProof | None = None
    divergences: list[Divergence] = []
    for provider in EXECUTION_PROVIDERS:
        provider_checks, provider_proof = _provider_checks(
            module_class, tiny_config, provider, device, scenarios, expected_name
        )
        proof = proof or provider_proof
        if any(c.status is Status.FAIL for c in provider_checks):
            provider_checks, confirmed = _blame_known_bugs(
                module_class, tiny_config, provider, device, provider_checks, bug_ids, scenarios
            )
            bugs.extend(b for b in confirmed if b not in bugs)
        if worth_localising(provider_checks):
            found = _localise(module_class, tiny_config, provider, device, scenarios)
            divergences.extend([found] if found else [])
        checks.extend(provider_checks)
        # once per provider, outside the reruns that blame known (numeric) bugs
        if not any(c.name == "build" for c in provider_checks):
            static = static_cache_check(module_class, make_hf_config(tiny_config), provider)
            checks.extend([static] if static else [])
    return ParityReport(
        target="mobius",
        model_type=model_type,
        model_class=module_class.__name__,
        checks=tuple(checks),
        weights=proof,
        bugs=tuple(bugs),
        versions=library_versions(),
        seconds=time.perf_counter() - start,
        divergences=tuple(divergences),
    )


def _localise(
    module_class: type,
    tiny_config: Mapping[str, Any],
    provider: str,
    device: str,
    scenarios: Scenarios,
) -> Divergence | None:
    """The first layer and module whose outputs diverge, from a graph built with probes."""
    hf_config = make_hf_config(tiny_config)
    reference = build_reference(hf_config, device=device)
    with scratch_dir() as workdir:
        try:
            built = build(
                module_class,
                hf_config,
                saved_checkpoint(reference),
                provider,
                Path(workdir),
                probe=True,
            )
        except Exception:  # the build check already reports why
            return None
        runner = OnnxRunner(built)
        return localise(HFRunner(reference, probe=True), runner, hf_config.vocab_size, scenarios)


def _provider_checks(
    module_class: type,
    tiny_config: Mapping[str, Any],
    provider: str,
    device: str,
    scenarios: Scenarios = DEFAULT_SCENARIOS,
    expected_name: Callable[[str], str | Collection[str]] | None = None,
) -> tuple[list[Check], WeightMapProof | None]:
    hf_config = make_hf_config(tiny_config)
    reference = build_reference(hf_config, device=device)
    checkpoint = saved_checkpoint(reference)
    memory_state = without_tied_aliases(reference.state_dict(), checkpoint)
    with scratch_dir() as workdir:
        try:
            built = build(
                module_class,
                hf_config,
                checkpoint,
                provider,
                Path(workdir),
                memory_state=memory_state,
                expected_name=expected_name,
            )
        except BuildError as exc:
            return [
                weights_check(provider, exc.proof),
                Check("build", provider, Status.FAIL, detail=str(exc)),
            ], exc.proof
        except Exception as exc:  # any other build error is a failed check, reported, not raised
            detail = f"{type(exc).__name__}: {first_line(exc)}"
            return [Check("build", provider, Status.FAIL, detail=detail)], None
        checks = [weights_check(provider, built.proof)]
        if built.memory_layout:
            detail = f"the in-memory (fused) layout converts differently: {built.memory_layout}"
            checks.append(Check("weights-memory", provider, Status.FAIL, detail=detail))
        checks += run_scenarios(
            HFRunner(reference), OnnxRunner(built), hf_config.vocab_size, scenarios
        )
    return checks, built.proof


def weights_check(provider: str, proof: WeightMapProof) -> Check:
    if proof.ok:
        return Check("weights", provider, Status.PASS, detail=proof.summary())
    shown = "; ".join(proof.problems[:4])
    more = f" (+{len(proof.problems) - 4} more)" if len(proof.problems) > 4 else ""
    return Check("weights", provider, Status.FAIL, detail=f"{proof.summary()}; {shown}{more}")


def _blame_known_bugs(
    module_class: type,
    tiny_config: Mapping[str, Any],
    provider: str,
    device: str,
    checks: list[Check],
    bug_ids: tuple[str, ...],
    scenarios: Scenarios = DEFAULT_SCENARIOS,
) -> tuple[list[Check], tuple[TargetBug, ...]]:
    def rerun(config: Mapping[str, Any], on: str) -> list[Check]:
        return _provider_checks(module_class, config, on, device, scenarios)[0]

    return blame_known_bugs(tiny_config, provider, checks, bug_ids, rerun)


def _named(bugs: tuple[WeightBug, ...], problems: tuple[str, ...]) -> tuple[TargetBug, ...]:
    """Each conversion bug with the first problem it names, as its evidence."""
    return tuple(
        TargetBug(b.id, b.title, next(p for p in problems if b.unused.search(p))) for b in bugs
    )


def blame_known_bugs(
    text_config: Mapping[str, Any],
    provider: str,
    checks: list[Check],
    bug_ids: tuple[str, ...],
    rerun: Callable[[Mapping[str, Any], str], list[Check]],
) -> tuple[list[Check], tuple[TargetBug, ...]]:
    """Re-run (``rerun(text config, provider)``) with the triggers of the applicable bugs
    removed from the tiny text config; if that passes, xfail.

    With several suspects, each is kept only if the re-run fails without removing its trigger,
    so the report names the bugs that are needed to explain the failure.
    """
    # A checkpoint tensor left over or a parameter left empty is always the conversion's fault:
    # the library's, when a known conversion bug names those tensors.
    weight_failures = tuple(
        c.detail for c in checks if c.name == "weights" and c.status is Status.FAIL
    )
    if weight_failures:
        problems = tuple(p for detail in weight_failures for p in detail.split("; "))
        return checks, _named(weight_bugs(bug_ids, problems), problems)
    # A build that raises is the library's when a known conversion bug names the error.
    build_failures = tuple(
        c.detail for c in checks if c.name == "build" and c.status is Status.FAIL
    )
    if crashed := weight_bugs(bug_ids, build_failures, "build"):
        return checks, _named(crashed, build_failures)
    suspects = applicable(bug_ids, provider, text_config)
    if not suspects:
        return checks, ()

    def passes_without(bugs: tuple[KnownBug, ...]) -> tuple[bool, float]:
        rebuild = next((b.rebuild_provider for b in bugs if b.rebuild_provider), None)
        if rebuild == CPU_WITHOUT_GQA:
            register_cpu_without_gqa()
        rerun_checks = rerun(counterfactual(text_config, bugs), rebuild or provider)
        worst = max((c.metrics.max_abs for c in rerun_checks if c.metrics), default=0.0)
        return not any(c.status is Status.FAIL for c in rerun_checks), worst

    explained, best = passes_without(suspects)
    if not explained and len(suspects) > 1:
        # One trigger's removal can break what another's confirms (Bamba's config class pins
        # partial_rotary_factor, so M3's counterfactual changes HF's RoPE but not mobius'):
        # then a suspect that explains the failure alone is kept.
        alone = next((b for b in suspects if passes_without((b,))[0]), None)
        if alone is not None:
            suspects = (alone,)
            explained, best = passes_without(suspects)
    if not explained:
        return checks, ()
    needed = suspects
    if len(suspects) > 1:
        needed = tuple(
            b for b in suspects if not passes_without(tuple(o for o in suspects if o != b))[0]
        )
        needed = needed or suspects
    worst = max(
        (c.metrics.max_abs for c in checks if c.metrics and c.status is Status.FAIL), default=0.0
    )
    ids = "+".join(b.id for b in needed)
    marked = [c.excused_by(ids) for c in checks]
    found = tuple(
        TargetBug(
            b.id,
            b.title,
            f"{provider} EP: max abs {worst:.2g} as built; {best:.2g} with "
            + "; ".join(s.trigger for s in suspects)
            + (
                f"; still fails when only '{b.trigger}' is left out"
                if len(needed) < len(suspects) or len(suspects) > 1
                else ""
            ),
        )
        for b in needed
    )
    return marked, found


def library_versions() -> tuple[tuple[str, str], ...]:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("mobius-onnx", "onnxruntime", "onnxscript", "transformers", "torch"):
        try:
            found.append((package, version(package)))
        except PackageNotFoundError:
            continue
    return tuple(found)
