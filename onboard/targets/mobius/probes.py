"""Probes of a mobius model: the values its probe modules compute, as extra graph outputs.

mobius builds one ONNX graph by calling ``onnxscript.nn`` modules; each call returns the
``ir.Value`` its forward computed. While the graph is built, the forwards of the probe modules
(found by structure, ``parity.divergence.find_points``) are wrapped on the instances to keep
those values; the task then lists them as graph outputs, before mobius optimises the graph, so
that no fusion removes them. Only a graph built for localising carries them: the graph whose
numbers were checked is never changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onboard.parity.divergence import Capture, find_points

PROBE_OUTPUT = "onboard_probe_{}"


class Recorder:
    """Wraps the probe modules' forwards of one mobius module and keeps the values they see."""

    def __init__(self, module: Any, num_layers: int) -> None:
        modules = dict(module.named_modules())
        points = find_points(
            [(name, type(m).__name__) for name, m in modules.items()],
            num_layers,
            "lm_head" if "lm_head" in modules else None,
        )
        self.values: dict[str, Any] = {}
        self.task_outputs = 0  # the graph's own outputs, before the probes
        self.appended: list[list[str]] = []  # the probes each appended output serves
        for capture in points.captures():
            target = modules[capture.module]
            target.forward = self._wrap(target.forward, capture)

    def _wrap(self, forward: Callable[..., Any], capture: Capture) -> Callable[..., Any]:
        def recorded(op: Any, *args: Any, **kwargs: Any) -> Any:
            if capture.side == "input":
                self._keep(capture.probe, args[0] if args else kwargs.get("hidden_states"))
            result = forward(op, *args, **kwargs)
            if capture.side == "output":
                self._keep(capture.probe, result)
            return result

        return recorded

    def _keep(self, probe: str, value: Any) -> None:
        import onnx_ir as ir

        while isinstance(value, tuple | list) and value:
            value = value[0]
        if probe not in self.values and isinstance(value, ir.Value):
            self.values[probe] = value


def probing_task(inner: Any, recorder: Recorder) -> Any:
    """``inner`` (a mobius ModelTask) whose graph also outputs the recorded values, each once."""
    from mobius.tasks import ModelTask

    class ProbingTask(ModelTask):
        model_roles = inner.model_roles

        def build(self, module: Any, config: Any) -> Any:
            package = inner.build(module, config)
            graph = package["model"].graph
            listed = {id(v) for v in (*graph.inputs, *graph.outputs)}
            recorder.task_outputs = len(graph.outputs)
            index: dict[int, int] = {}
            for probe, value in recorder.values.items():
                if id(value) in index:
                    recorder.appended[index[id(value)]].append(probe)
                elif id(value) not in listed:
                    index[id(value)] = len(recorder.appended)
                    recorder.appended.append([probe])
                    graph.outputs.append(value)
            return package

    return ProbingTask()


def name_probe_outputs(graph: Any, recorder: Recorder) -> dict[str, str]:
    """Name the probe outputs after optimisation, which keeps the outputs' order but may have
    replaced their values; returns probe -> output name."""
    names: dict[str, str] = {}
    for index, value in enumerate(list(graph.outputs)[recorder.task_outputs :]):
        value.name = PROBE_OUTPUT.format(index)
        names.update(dict.fromkeys(recorder.appended[index], value.name))
    return names
