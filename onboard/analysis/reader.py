"""What the section readers of a decoder share: the inputs they read and the shape of a reading.

Each section of ``TextDecoderSpec`` (the MLP, the norms, RoPE ...) has a reader that looks at
one ``Context`` and hands back a ``Read``: the value, the evidence behind it and the deltas it
could not explain. The decoder builder composes the readings, so no section writes into another's
state.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from onboard.analysis.probe import Probe
from onboard.analysis.source_lines import find_line, init_assignment
from onboard.source import SourceFile
from onboard.spec import Delta, Evidence, EvidenceLog

T = TypeVar("T")
LAYER0 = "model.layers.0."


@dataclass(frozen=True)
class Context:
    """The real config (normalised by transformers), the tiny config and its probe, the HF
    source, and the tiny model as the Llama layout sees it (None when it is not run)."""

    cfg: Any
    tiny: Any
    probe: Probe
    files: Sequence[SourceFile]
    model: Any = None

    @property
    def tiny_head_dim(self) -> int:
        tiny = self.tiny
        return getattr(tiny, "head_dim", None) or tiny.hidden_size // tiny.num_attention_heads

    @property
    def tiny_kv_heads(self) -> int:
        tiny = self.tiny
        return getattr(tiny, "num_key_value_heads", None) or tiny.num_attention_heads


@dataclass(frozen=True)
class Read(Generic[T]):
    """A section's value with the evidence (spec path, evidence) and the deltas found on the way."""

    value: T
    evidence: tuple[tuple[str, Evidence], ...] = ()
    deltas: tuple[Delta, ...] = ()


class Reader:
    """Gathers evidence and deltas while one section is read; ``done`` hands them back."""

    def __init__(self, context: Context) -> None:
        self.ctx = context
        self.log = EvidenceLog()
        self.deltas: list[Delta] = []

    @property
    def cfg(self) -> Any:
        return self.ctx.cfg

    @property
    def tiny(self) -> Any:
        return self.ctx.tiny

    @property
    def probe(self) -> Probe:
        return self.ctx.probe

    @property
    def files(self) -> Sequence[SourceFile]:
        return self.ctx.files

    @property
    def model(self) -> Any:
        return self.ctx.model

    def done(self, value: T) -> Read[T]:
        evidence = tuple((path, e) for path, items in self.log.entries.items() for e in items)
        return Read(value, evidence, tuple(self.deltas))

    def take(self, reading: Read[T]) -> T:
        """Another reader's value, with its evidence and deltas added to this one's."""
        for path, item in reading.evidence:
            self.log.add(path, item)
        self.deltas.extend(reading.deltas)
        return reading.value

    # -- evidence ---------------------------------------------------------------------------

    def _config(self, path: str, key: str, value: Any) -> None:
        self.log.add(path, Evidence("config", f"config.json:{key}", repr(value)))

    def _probe(self, path: str, where: str, detail: str) -> None:
        self.log.add(path, Evidence("probe", where, detail))

    def _source(self, path: str, pattern: str) -> None:
        found = find_line(self.ctx.files, pattern)
        if found is not None:
            self.log.add(path, found)

    def _delta(self, what: str, where: str, detail: str = "") -> None:
        self.deltas.append(Delta(what, where, detail))

    # -- lookups ----------------------------------------------------------------------------

    def _layer_param(self, name: str) -> tuple[int, ...] | None:
        return self.ctx.probe.param_shape(LAYER0 + name)

    def _config_key_of(self, path: str, module: str, attr: str, keyword: str) -> str | None:
        """The config key in ``self.<attr> = X(..., <keyword>=config.<key>)``, if HF reads one."""
        class_name = dict(self.ctx.probe.modules).get(module)
        found = init_assignment(self.ctx.files, class_name, attr) if class_name else None
        if found is None:
            return None
        self.log.add(path, found.evidence)
        value = found.keyword(keyword) or ""
        match = re.fullmatch(r"(?:self\.)?config\.(\w+)", value)
        return match.group(1) if match else None
