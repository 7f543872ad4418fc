"""Read the recurrent token mixers of a hybrid: which kind each non-attention label is.

The config's label says little (transformers 5 calls Mamba layers ``linear_attention`` in some
models and DeltaNet layers in others), so each label is read from what its tiny layer holds: the
one learned child that is neither a norm nor the feed-forward block, recognised by one of the
kinds of ``analysis.mixers``. A label no kind recognises is a delta at its class's line. A label
whose layers hold a feed-forward block and no token mixer (NemotronH's one-block MLP and MoE
layers) is the kind ``mlp`` or ``moe``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.layers import FFN_BLOCK_NAMES
from onboard.analysis.layout import hf_module, learns
from onboard.analysis.mixers import MIXERS
from onboard.analysis.probe import is_norm
from onboard.analysis.reader import Context, Read, Reader
from onboard.analysis.source_lines import find_line
from onboard.token_mixers import TokenMixers, sized_for


@dataclass(frozen=True)
class MixersReading:
    mixers: TokenMixers
    labels: tuple[tuple[str, str], ...]  # HF label -> onboard kind
    # Layer-relative parameter names the mixers explain (conv.in_proj.weight ...)
    parameters: tuple[str, ...] = ()


class MixerReader(Reader):
    """``read(labels)`` for the layer-type labels that are not attention kinds."""

    def __init__(self, context: Context, tiny_labels: Sequence[str]) -> None:
        super().__init__(context)
        self.tiny_labels = tuple(tiny_labels)

    def read(self, labels: Sequence[str]) -> Read[MixersReading]:
        mixers = TokenMixers()
        kinds: list[tuple[str, str]] = []
        parameters: list[str] = []
        for label in labels:
            found = self._read_label(label)
            if found is None:
                continue
            kind, reading = found
            if reading is None:  # a feed-forward layer: nothing to read here
                kinds.append((label, kind))
                continue
            # the tiny layer's sizes, as the real model has them where a config key says
            mixers = dataclasses.replace(mixers, **{kind: sized_for(reading.spec, self.cfg)})
            kinds.append((label, kind))
            parameters += [f"{reading.spec.attribute}.{p}" for p in reading.parameters]
            self.log.add(f"text.mixers.{kind}", *reading.evidence)
            self.deltas.extend(reading.deltas)
        return self.done(MixersReading(mixers, tuple(kinds), tuple(parameters)))

    def _read_label(self, label: str) -> tuple[str, Any] | None:
        index = next((i for i, t in enumerate(self.tiny_labels) if t == label), None)
        if self.model is None or index is None:
            self._delta(f"layer kind {label!r}", "config.json:layer_types", "no tiny layer has it")
            return None
        layer = self.model.model.layers[index]
        if self._attention_kind(label, layer, index):
            return None
        feed_forward = _feed_forward_kind(layer)
        if feed_forward is not None:
            self._probe(
                "text.layer_types", f"model.layers.{index}", f"{label!r}: a {feed_forward} block"
            )
            return feed_forward, None
        mixer = self._mixer_of(label, layer, index)
        return self._recognised(label, index, *mixer) if mixer else None

    def _attention_kind(self, label: str, layer: Any, index: int) -> bool:
        """A label that names attention in a layer that attends (Llama 4's chunked_attention,
        MiniMax's lightning linear_attention): an attention kind onboard does not read."""
        attention = getattr(layer, "self_attn", None)
        if "attention" not in label or attention is None:
            return False
        cls = type(hf_module(attention)).__name__
        found = find_line(self.files, rf"^class {cls}\b")
        where = found.where if found else f"model.layers.{index}.self_attn"
        self._delta(f"attention layer kind {label!r} ({cls})", where, "no kind onboard reads")
        return True

    def _mixer_of(self, label: str, layer: Any, index: int) -> tuple[str, Any] | None:
        """(attribute, HF module) of the layer's token mixer. What the attention layer (layer 0)
        also has, of the same class, is the rest of every layer (norms, the MLP, Granite's
        shared_mlp), and so is a per-channel scale (ZAYA's residual scales): the mixer is what
        only this layer has (NemotronH keeps each layer's one block under one name, mixer). A
        kind layer 0 itself has (FalconH1's) is not compared."""
        first = {
            name: type(hf_module(child))
            for name, child in self.model.model.layers[0].named_children()
            if index != 0
        }
        candidates = [
            (name, child)
            for name, child in layer.named_children()
            if name not in FFN_BLOCK_NAMES
            and first.get(name) is not type(hf_module(child))
            and not is_norm(child)
            and learns(child)
            and not _elementwise(child)
        ]
        if len(candidates) != 1:
            names = ", ".join(n for n, _ in candidates) or "none"
            self._delta(f"layer kind {label!r}: no one token mixer", f"model.layers.{index}", names)
            return None
        attribute, module = candidates[0]
        return attribute, hf_module(module)

    def _recognised(
        self, label: str, index: int, attribute: str, module: Any
    ) -> tuple[str, Any] | None:
        """(kind, reading) of the first kind that reads the module; else a delta at its class."""
        for kind in MIXERS:
            reading = kind.read(attribute, module, self.tiny, self.files)
            if reading is None:
                continue
            if reading.spec is None:  # the kind's parameters, something else computed
                self.deltas.extend(reading.deltas)
                return None
            return kind.name, reading
        cls = type(module).__name__
        found = find_line(self.files, rf"^class {cls}\b")
        self._delta(
            f"layer kind {label!r}: token mixer {cls} is no kind onboard computes",
            found.where if found else f"model.layers.{index}.{attribute}",
            f"known kinds: {', '.join(m.name for m in MIXERS)}",
        )
        return None


def _elementwise(module: Any) -> bool:
    """Every parameter a vector (ZAYA's residual scales and biases): a per-channel affine map,
    which mixes no tokens, so it is not the layer's token mixer; every mixer has a matrix."""
    return all(p.dim() <= 1 for p in module.parameters())


def _feed_forward_kind(layer: Any) -> str | None:
    """``mlp`` or ``moe`` for a layer that holds a feed-forward block and nothing else that
    learns but norms; None for any other layer."""
    learned = [
        (name, child)
        for name, child in layer.named_children()
        if learns(child) and not is_norm(child)
    ]
    if len(learned) != 1 or learned[0][0] not in FFN_BLOCK_NAMES:
        return None
    return "moe" if hasattr(learned[0][1], "experts") else "mlp"
