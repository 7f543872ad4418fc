"""The HF classes a generated AutoModel package builds on, and the reasons its comments give.

Every choice the spec drives carries the evidence behind it: a ``Reason`` is one sentence and
the place (an HF source line, the config, or the probe) a reviewer can check it at.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass

from onboard.spec import ArchitectureSpec, Evidence


@dataclass(frozen=True)
class HFNames:
    """Where the architecture's HF implementation lives, and the classes the design reuses."""

    module: str  # transformers.models.qwen3.modeling_qwen3
    source_file: str  # modeling_qwen3.py
    causal_lm: str
    pretrained: str
    decoder_layer: str
    attention: str
    mlp: str
    norm: str  # the final norm's class
    rotary: str
    embedding: str
    config: str  # exported by the top-level transformers package
    sparse_block: str = ""  # the MoE block HF's decoder layer builds for sparse layers
    # ``causal_lm`` is onboard's causal-LM view of this base model (a VLM's text backbone that
    # transformers runs only inside its VLM): the generated tests build it, HF has no such class
    view_of: str = ""


@dataclass(frozen=True)
class Reason:
    """One sentence a generated comment says, and where the fact behind it was seen."""

    text: str
    where: str = ""

    def __str__(self) -> str:
        return f"{self.text} ({self.where})" if self.where else self.text


def cite(spec: ArchitectureSpec, path: str) -> str:
    """The best place a reviewer can check ``path``: an HF source line, else config or probe."""
    return best(spec.evidence_for(path))


def best(evidence: tuple[Evidence, ...]) -> str:
    source = next((e for e in evidence if e.kind == "source"), None)
    chosen = source or next(iter(evidence), None)
    if chosen is None:
        return ""
    return chosen.where if chosen.kind in ("source", "config") else f"probe: {chosen.cite()}"


def source_line(module_path: str, needle: str) -> int | None:
    """The 1-based line of ``needle`` in the HF module's source, if it has it."""
    try:
        source = inspect.getsource(importlib.import_module(module_path))
    except (ImportError, OSError, TypeError):
        return None
    for number, line in enumerate(source.splitlines(), start=1):
        if needle in line:
            return number
    return None


def class_location(hf: HFNames, cls_name: str) -> str:
    """``modeling_x.py:N`` where ``cls_name`` is defined in the HF module, else the file."""
    try:
        cls = getattr(importlib.import_module(hf.module), cls_name)
        _, line = inspect.getsourcelines(cls)
    except (AttributeError, ImportError, OSError, TypeError):
        return hf.source_file
    return f"{hf.source_file}:{line}"


def method_source(function: object) -> str:
    """The source of an HF method (unwrapped from its decorators), or "" where it has none."""
    try:
        return inspect.getsource(inspect.unwrap(function))
    except (OSError, TypeError):
        return ""


def flat(source: str) -> str:
    """Source without comments, on one line, single-spaced (so line breaks do not matter)."""
    source = re.sub(r"#[^\n]*", "", source)
    source = re.sub(r"\s+", " ", source).replace("( ", "(").replace(" )", ")")
    return source.replace(",)", ")")
