"""Parity for mobius: build the ONNX graph of a model class, load HF weights, run onnxruntime.

Follows the module-path recipe that is known to work offline (target-mobius notes, section 2):
config through ``_config_from_hf`` with the class's own ``config_class``, ``build_from_module``
per execution provider, initializer names read *before* ``apply_weights`` (it folds transposes
into new initializers), the checkpoint through the class's ``preprocess_weights``.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from onboard.parity.harness import Batch, Step
from onboard.parity.report import WeightAccount

EXECUTION_PROVIDERS = ("default", "cpu")


@dataclasses.dataclass(frozen=True)
class BuiltModel:
    """One execution provider's ONNX model with weights applied, ready for onnxruntime."""

    provider: str
    session: Any
    account: WeightAccount
    config_class: str
    build_seconds: float


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
) -> BuiltModel:
    import mobius
    import onnxruntime as ort

    start = time.perf_counter()
    config = mobius_config(module_class, hf_config)
    module = module_class(config)
    with _quiet_mobius():
        package = mobius.build_from_module(
            module, config, "text-generation", execution_provider=provider
        )
    graph = package["model"].graph
    initializer_names = set(graph.initializers)
    converted = module.preprocess_weights(dict(checkpoint))
    account = _account(checkpoint, converted, initializer_names, graph, config)
    with _quiet_mobius():
        package.apply_weights(converted)
    out = workdir / provider
    package.save(str(out), progress_bar=False, check_weights=False)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        str(out / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    return BuiltModel(
        provider, session, account, type(config).__name__, time.perf_counter() - start
    )


def _account(
    checkpoint: Mapping[str, Any],
    converted: Mapping[str, Any],
    initializer_names: set[str],
    graph: Any,
    config: Any,
) -> WeightAccount:
    """Which checkpoint tensors reached a parameter, and which parameters got a tensor.

    Every name the conversion leaves must be a graph initializer; the one exception is the
    ``lm_head.weight`` copy that tied embeddings derive (it is not in the checkpoint and the graph
    shares the embedding's initializer instead).
    """
    leftover = sorted(name for name in converted if name not in initializer_names)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    derived = tuple(n for n in leftover if tied and n == "lm_head.weight" and n not in checkpoint)
    unconsumed = tuple(n for n in leftover if n not in derived)
    filled = {name for name in converted if name in initializer_names}
    unfilled = tuple(
        sorted(
            name
            for name, value in graph.initializers.items()
            if name not in filled and value.const_value is None
        )
    )
    return WeightAccount(
        checkpoint_tensors=len(checkpoint),
        parameters=len(initializer_names),
        unconsumed=unconsumed,
        unfilled=unfilled,
        derived=derived,
    )


@contextmanager
def _quiet_mobius() -> Iterator[None]:
    loggers = [logging.getLogger(n) for n in ("mobius", "onnxscript", "onnx_ir")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


class OnnxRunner:
    """Runs a built model in onnxruntime; its ``Step.state`` is unused (presents are in kv)."""

    def __init__(self, built: BuiltModel) -> None:
        self.provider = built.provider
        self.session = built.session
        # GroupQueryAttention derives sequence lengths as sum(mask) - 1: right padding only.
        self.supports_left_padding = built.provider != "cpu"
        self._inputs = {i.name: i for i in self.session.get_inputs()}
        self._outputs = [o.name for o in self.session.get_outputs()]
        self._layers = sum(1 for n in self._inputs if n.endswith(".key"))

    def prefill(self, batch: Batch) -> Step:
        past = []
        for i in range(self._layers):
            shape = self._inputs[f"past_key_values.{i}.key"].shape
            kv_heads, head_dim = shape[1], shape[3]
            empty = np.zeros((batch.input_ids.shape[0], kv_heads, 0, head_dim), np.float32)
            past.append((empty, empty))
        return self._run(batch, tuple(past))

    def decode(self, previous: Step, batch: Batch) -> Step:
        return self._run(batch, previous.kv)

    def _run(self, batch: Batch, past: tuple[tuple[np.ndarray, np.ndarray], ...]) -> Step:
        feeds: dict[str, np.ndarray] = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "position_ids": batch.position_ids,
        }
        for i, (key, value) in enumerate(past):
            feeds[f"past_key_values.{i}.key"] = key
            feeds[f"past_key_values.{i}.value"] = value
        feeds = {k: v for k, v in feeds.items() if k in self._inputs}
        results = dict(zip(self._outputs, self.session.run(self._outputs, feeds), strict=True))
        kv = tuple(
            (results[f"present.{i}.key"], results[f"present.{i}.value"])
            for i in range(self._layers)
        )
        return Step(logits=results["logits"], kv=kv)


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="onboard-mobius-")
