"""HF's dropouts in train mode, and where the generated AutoModel model drops as HF does.

HF's modules read their dropout probabilities from config keys that differ by architecture
(``attention_dropout``, ``resid_pdrop``, ``embd_pdrop``, ``residual_dropout``, ...). The
generated model keeps most of HF's modules whole (decoder layers, MLPs, norms, recurrent
mixers, a kept attention or base model), whose forwards drop as HF's do; where the generated
code writes a forward instead (the attention, the base model, the causal LM, AutoModel's MoE in
place of HF's sparse block), it drops only where the form here recognises HF's: the attention
weights' dropout, the attention output's after ``o_proj`` and the embeddings'. Every other key
HF reads there is one the generated model does not honour, which the design refuses by name.
A key HF's own module refuses non-zero (DiffLlama's attention) has nothing to match. A VLM's
text model is not placed (design._vlm_design): its generated tests do not train it.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onboard.targets.automodel.hf_facts import flat, method_source

if TYPE_CHECKING:
    from onboard.analysis.probe import Probe
    from onboard.targets.automodel.design import ModelDesign

KEY = re.compile(r"\bconfig\.(\w*(?:dropout|pdrop)\w*)\b")
HELD = re.compile(r"self\.(\w+) = config\.(\w*(?:dropout|pdrop)\w*)\b")  # (attribute, key)
# Where a key's dropout runs in the generated model
KEPT = "kept"  # inside a module of HF's the generated model keeps whole
ATTENTION = "attention"  # on the attention weights (the attention interface's dropout=)
ATTENTION_OUTPUT = "attention_output"  # on the attention's output, after o_proj
EMBEDDINGS = "embeddings"  # on the input embeddings, before the first layer
NOT_DROPPED = "not_dropped"  # HF drops there, the generated code does not
HF_REFUSES = "hf_refuses"  # HF raises for a non-zero value (DiffLlama's attention)


@dataclass(frozen=True)
class DropoutRead:
    """One HF class reading one dropout key of the config."""

    key: str
    reader: str  # the HF class
    where: str  # modeling_x.py:N of the read
    site: str  # KEPT, ATTENTION, ATTENTION_OUTPUT, EMBEDDINGS, NOT_DROPPED or HF_REFUSES
    why: str = ""  # for NOT_DROPPED: the generated module that has no such dropout

    def __str__(self) -> str:
        return f"config.{self.key} ({self.reader}, {self.where})"


@dataclass(frozen=True)
class Dropouts:
    """The dropout keys HF's causal LM reads, for the design and the generated train-mode test."""

    reads: tuple[DropoutRead, ...] = ()
    attention_output: str = ""  # HF's attention attribute holding the output's probability
    embeddings: str = ""  # the config key of the embeddings' dropout

    @property
    def honoured(self) -> tuple[str, ...]:
        """Keys every reader of which drops in the generated model as in HF's."""
        keys = dict.fromkeys(r.key for r in self.reads)
        left_out = {*self.not_honoured, *self.hf_refuses}
        return tuple(k for k in keys if k not in left_out)

    @property
    def not_honoured(self) -> tuple[str, ...]:
        """Keys HF drops by somewhere the generated code does not."""
        refused = set(self.hf_refuses)
        found = (r.key for r in self.reads if r.site == NOT_DROPPED and r.key not in refused)
        return tuple(dict.fromkeys(found))

    @property
    def hf_refuses(self) -> tuple[str, ...]:
        """Keys HF's own modules refuse non-zero: no train-mode behaviour to match."""
        return tuple(dict.fromkeys(r.key for r in self.reads if r.site == HF_REFUSES))

    def reads_of(self, key: str) -> tuple[DropoutRead, ...]:
        return tuple(r for r in self.reads if r.key == key)


@dataclass(frozen=True)
class Written:
    """The HF classes whose forward the generated code writes, and what it drops there."""

    attention: str = ""  # the HF attention, when its forward is written (not kept whole)
    attention_key: str = ""  # the key the written attention's weights dropout reads
    base_model: str = ""  # the HF base model, when its forward is written
    replaced: tuple[tuple[str, str], ...] = ()  # HF class -> the generated module in its place


def design_dropouts(design: ModelDesign, probe: Probe, tiny: dict[str, Any]) -> Dropouts:
    """The dropouts of ``design``'s HF causal LM (``probe``: its module tree), placed by what
    the generated code writes: the causal LM always, the base model and attention forwards
    unless kept whole, AutoModel's MoE in place of each sparse block and what it holds."""
    hf, layout = design.hf, design.layout
    modules = _hf_modules(hf.module, hf.causal_lm, tiny) or {
        "": probe.model_class,
        **dict(probe.modules),
    }
    replaced = {hf.causal_lm: "the generated causal LM"}
    if design.moe is not None:
        blocks = [name for name, cls in modules.items() if cls == hf.sparse_block]
        for name, cls in modules.items():
            if any(name == b or name.startswith(f"{b}.") for b in blocks):
                replaced.setdefault(cls, "AutoModel's MoE")
    written = Written(replaced=tuple(replaced.items()))
    if design.kept_base is None:
        attention_key = "attention_dropout" if design.attention_dropout else ""
        written = Written(
            attention="" if design.kept_attention else hf.attention,
            attention_key=attention_key,
            base_model=modules.get(layout.base, ""),
            replaced=written.replaced,
        )
    return dropouts(hf.module, hf.source_file, modules, tiny, written)


def _hf_modules(module_path: str, causal_lm: str, tiny: dict[str, Any]) -> dict[str, str]:
    """Name -> class of HF's causal LM's modules, built on the meta device from the tiny config
    (the probe may have seen a Llama-shaped view of them); {} where there is no such class."""
    import torch

    from onboard.hf_config import make_hf_config

    cls = getattr(importlib.import_module(module_path), causal_lm, None)
    if cls is None or "model_type" not in tiny:
        return {}
    with torch.device("meta"):
        model = cls(make_hf_config(tiny))
    return {name: type(module).__name__ for name, module in model.named_modules()}


def dropouts(
    module_path: str,
    source_file: str,
    modules: dict[str, str],
    tiny: dict[str, Any],
    written: Written,
) -> Dropouts:
    """HF's dropout reads over the classes of HF's causal LM (``modules``: name -> class, the
    root under ""), the keys those of ``tiny`` (the config), each placed by ``written``."""
    module = importlib.import_module(module_path)
    output = _attention_output(module, written.attention)
    embedding_key = _embedding_key(module, written.base_model)
    replaced = dict(written.replaced)
    reads = []
    for name in dict.fromkeys(modules.values()):
        cls = getattr(module, name, None)
        if cls is None or getattr(cls, "__module__", "") != module_path:
            continue
        for key, line, refused in _reads(cls):
            if key not in tiny:
                continue
            where = f"{source_file}:{line}"
            site, why = _site(name, key, written, replaced, output, embedding_key)
            if refused:
                site, why = HF_REFUSES, "HF raises for a non-zero value"
            reads.append(DropoutRead(key, name, where, site, why))
    return Dropouts(
        reads=tuple(reads),
        attention_output=output[0] if output else "",
        embeddings=embedding_key or "",
    )


def _site(
    name: str,
    key: str,
    written: Written,
    replaced: dict[str, str],
    output: tuple[str, str] | None,
    embedding_key: str | None,
) -> tuple[str, str]:
    if name in replaced:
        return NOT_DROPPED, f"{replaced[name]} has no dropout"
    if name == written.attention:
        if key == written.attention_key:
            return ATTENTION, ""
        if output and key == output[1]:
            return ATTENTION_OUTPUT, ""
        return NOT_DROPPED, "the generated attention forward does not read it"
    if name == written.base_model:
        if key == embedding_key:
            return EMBEDDINGS, ""
        return NOT_DROPPED, "the generated base model's forward does not read it"
    return KEPT, ""


def _reads(cls: type) -> list[tuple[str, int, bool]]:
    """(key, line, refused) of every ``config.<...dropout...>`` read in the class' own source;
    refused: the read is the condition of an ``if`` whose body raises."""
    try:
        lines, start = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return []
    found = []
    for offset, line in enumerate(lines):
        code = line.split("#", 1)[0]
        guard = code.strip().startswith("if ") and code.rstrip().endswith(":")
        body = lines[offset + 1 : offset + 2]
        refused = guard and bool(body) and body[0].strip().startswith("raise ")
        found += [(m.group(1), start + offset, refused) for m in KEY.finditer(code)]
    return found


def _attention_output(module: Any, attention: str) -> tuple[str, str] | None:
    """(attribute, key) when HF's attention drops its output after o_proj with a probability
    read from the config: ``self.a = config.k`` and ``attn_output =
    nn.functional.dropout(attn_output, p=self.a, training=self.training)`` after the
    projection, the last thing before it returns."""
    cls = getattr(module, attention, None) if attention else None
    if cls is None:
        return None
    init, forward = flat(method_source(cls.__init__)), flat(method_source(cls.forward))
    for attribute, key in HELD.findall(init):
        drop = (
            f"attn_output = self.o_proj(attn_output) attn_output = nn.functional.dropout("
            f"attn_output, p=self.{attribute}, training=self.training) return attn_output"
        )
        if drop in forward:
            return attribute, key
    return None


def _embedding_key(module: Any, base_model: str) -> str | None:
    """The key of HF's embeddings' dropout, when the base model's forward drops the input
    embeddings right after looking them up (or taking them), before anything else draws:
    ``nn.Dropout(config.k)`` applied to ``inputs_embeds`` (Phi) or
    ``nn.functional.dropout(..., p=self.a)`` of ``self.a = config.k`` (Starcoder2)."""
    cls = getattr(module, base_model, None) if base_model else None
    if cls is None:
        return None
    init, forward = flat(method_source(cls.__init__)), flat(method_source(cls.forward))
    for attribute, key in re.findall(r"self\.(\w+) = nn\.Dropout\(config\.(\w+)\)", init):
        if f"inputs_embeds = self.{attribute}(inputs_embeds)" in forward:
            return key
    for attribute, key in HELD.findall(init):
        drop = f"nn.functional.dropout(hidden_states, p=self.{attribute}, training=self.training)"
        if f"hidden_states = inputs_embeds hidden_states = {drop}" in forward:
            return key
    return None
