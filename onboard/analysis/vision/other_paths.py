"""The parts of a VLM only another path reads: videos, or image generation.

mobius' vision-language task takes images and generates text, so the generated graphs hold the
image-understanding path. A child of the base model beside the tower, projector and language
model is read by another path (Video-LLaVA's second tower, LLaVA-NeXT-Video's frame pooler,
Janus' VQ-VAE and the heads that predict image tokens): which one is read from the methods that
name it, and its tensors are named in the spec (``VisionSpec.other_paths``) so that the
generated weight map skips them and the weight proof lists them; none is dropped silently. A
part no video or generation method names is not understood and is refused at its class.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.vision.parts import VLMParts
from onboard.spec import Delta, Evidence
from onboard.vision import PathPartSpec

# The path a method serves, by its name
_PATHS = (("videos", re.compile(r"video")), ("image generation", re.compile(r"generat|decode")))


@dataclass(frozen=True)
class OtherPaths:
    parts: tuple[PathPartSpec, ...] = ()
    evidence: tuple[tuple[str, tuple[Evidence, ...]], ...] = ()
    deltas: tuple[Delta, ...] = ()


def read_other_paths(model: Any, parts: VLMParts, saved: dict[str, Any]) -> OtherPaths:
    """The children of ``model``'s base model off the image path, with their tensors in
    ``saved``, and what reads each."""
    base = model.base_model
    known = {parts.tower, parts.projector, parts.language_model}
    found, evidence, deltas = [], [], []
    for name, child in base.named_children():
        if name in known:
            continue
        readers = _readers(model, name)
        path = next((p for p, rule in _PATHS if any(rule.search(m) for m, _ in readers)), None)
        label = f"{type(base).__name__}.{name} ({type(child).__name__})"
        if path is None:
            where = source_location(type(child).forward) or type(child).__name__
            deltas.append(
                Delta(
                    f"{label} is off the image path, and no video or image-generation method "
                    "reads it",
                    where,
                    "onboard generates the image path and names the parts only videos or image "
                    "generation read; this one is neither",
                )
            )
            continue
        count = sum(1 for _ in child.parameters())
        where = readers[0][1]
        evidence.append(
            Evidence("source", where, f"{label}, {count} weight tensor(s): read for {path} only")
        )
        if count:
            found.append(_part(label, path, child, saved))
    cited = (("vision.other_paths", tuple(evidence)),) if evidence else ()
    return OtherPaths(tuple(found), cited, tuple(deltas))


def _readers(model: Any, name: str) -> list[tuple[str, str]]:
    """(method, file:line) of the VLM's and its base model's methods that name ``.name``."""
    pattern = re.compile(rf"\.{re.escape(name)}\b")
    found = []
    for owner in (type(model.base_model), type(model)):
        for method, function in vars(owner).items():
            if method.startswith("__") or not inspect.isfunction(function):
                continue
            try:
                source = inspect.getsource(function)
            except (OSError, TypeError):
                continue
            if pattern.search(source):
                found.append((method, source_location(function) or method))
    return found


def _part(label: str, path: str, child: Any, saved: dict[str, Any]) -> PathPartSpec:
    """``child``'s on-disk names, found by name suffix and value (the tiny weights are random),
    and the prefix they share."""
    names, prefixes = [], set()
    for relative, value in child.named_parameters():
        value = value.detach()
        for name, tensor in saved.items():
            same = tensor.shape == value.shape and tensor.equal(value)
            if same and name.endswith(f".{relative}"):
                names.append(name)
                prefixes.add(name.removesuffix(relative))
    if len(prefixes) != 1:
        raise ValueError(f"the checkpoint keeps {label} under the prefixes {sorted(prefixes)}")
    return PathPartSpec(label, path, prefixes.pop(), tuple(sorted(names)))
