"""Read RoPE per layer kind: type, theta, the rotated share of the head, scaling, and which
layers rotate at all.

The rotated share is measured on the probe's rotary tables; whether a kind's layers apply RoPE is
measured by running their attention with RoPE as the identity. Layers of one kind that differ
must be named by a per-layer config list (SmolLM3's no_rope_layers), or they are a delta.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis.attention_kinds import declared_kinds
from onboard.analysis.probe import source_location
from onboard.analysis.reader import Context, Read, Reader
from onboard.spec import Evidence, FrequencyOrder, RopeSpec
from onboard.tiny import PER_LAYER_KEYS, is_number

# rope_parameters keys that list a table's sections (M-RoPE's h, w, t)
SECTION_KEYS = ("mrope_section",)


@dataclass(frozen=True)
class RopeReading:
    rope: tuple[tuple[str, RopeSpec], ...]  # per layer kind
    rope_layers_key: str | None  # a config list: layer i rotates iff config.<key>[i]


class RopeReader(Reader):
    def __init__(self, context: Context, layer_types: tuple[str, ...]) -> None:
        super().__init__(context)
        self.layer_types = layer_types
        self.rope_layers_key: str | None = None  # set by _rope_layers_from_config

    def read(self) -> Read[RopeReading]:
        rope = self.rope(self.layer_types)
        return self.done(RopeReading(rope, self.rope_layers_key))

    def rope(self, layer_types: tuple[str, ...]) -> tuple[tuple[str, RopeSpec], ...]:
        if not layer_types:  # no layer attends (a pure state-space model): nothing rotates
            return ()
        params = rope_parameters_of(self.cfg)
        dims = dict(self.probe.rotary_dims)
        tiny_head_dim = self.ctx.tiny_head_dim
        applied = self._rope_applied()
        result = []
        for kind in dict.fromkeys(layer_types):
            per_kind = params.get(kind) if isinstance(params.get(kind), dict) else params
            theta = float(per_kind.get("rope_theta", 10000.0))
            dim = dims.get(kind, dims.get("default"))
            if dim is None:
                result.append((kind, RopeSpec(None, 0.0)))
                self._probe(f"text.rope.{kind}", "model.rotary_emb", "no rotary embedding")
                continue
            if applied.get(kind) is False:  # the rotary embedding exists, these layers skip it
                result.append((kind, RopeSpec(None, theta)))
                continue
            factor = dim / tiny_head_dim
            extra = tuple(
                sorted(
                    (k, _plain(v))
                    for k, v in per_kind.items()
                    if k not in ("rope_type", "rope_theta", "partial_rotary_factor")
                )
            )
            interleaved = bool(getattr(self.cfg, "rope_interleave", False))
            if interleaved:
                self._config(f"text.rope.{kind}", "rope_interleave", True)
            order = None
            if str(per_kind.get("rope_type", "default")) == "default":
                order = self._check_frequencies(kind, theta, dim)
            spec = RopeSpec(
                rope_type=str(per_kind.get("rope_type", "default")),
                theta=theta,
                partial_rotary_factor=factor,
                scaling=extra,
                interleaved=interleaved,
                order=order,
            )
            self._config(f"text.rope.{kind}", "rope_parameters", per_kind)
            self._probe(
                f"text.rope.{kind}", "model.rotary_emb", f"rotary dim {dim} of {tiny_head_dim}"
            )
            result.append((kind, spec))
        return tuple(result)

    def _check_frequencies(self, kind: str, theta: float, dim: int) -> FrequencyOrder | None:
        """The tiny rotary's frequencies, if a permutation of RoPE's 1 / theta^(2i / d), are
        in that order, or in an order a ``FrequencyOrder`` names from the kind's
        ``rope_parameters`` (Cohere Compass' M-RoPE pre-rotation by ``mrope_section``); any
        other order is a delta. ``d`` is the rotary dim, or one less (MiMo-V2-Flash's odd
        int(16 x 0.334) turns as many frequencies as 6); other tables are the other readers' to
        judge."""
        import torch

        rotary = getattr(getattr(self.model, "model", None), "rotary_emb", None)
        buffers = dict(rotary.named_buffers(recurse=False)) if rotary is not None else {}
        table = buffers.get(f"{kind}_inv_freq", buffers.get("inv_freq"))
        if table is None or 2 * table.numel() != dim:
            return None
        table = table.detach().float().cpu()
        for width in (dim, dim - 1):
            expected = 1.0 / theta ** (torch.arange(0, width, 2, dtype=torch.float) / width)
            if torch.allclose(table, expected, rtol=1e-5, atol=0.0):
                return None
            if not torch.allclose(table.sort().values, expected.sort().values, rtol=1e-5, atol=0):
                continue
            compute = getattr(rotary, "compute_default_rope_parameters", None)
            where = source_location(compute or type(rotary).forward) or "model.rotary_emb"
            tiny = rope_parameters_of(self.tiny).get(kind)
            order = _named_order(table, expected, tiny if isinstance(tiny, dict) else {})
            if order is not None:
                path = f"text.rope.{kind}"
                sections = tiny[order.key]
                self._probe(
                    path, "model.rotary_emb", f"inv_freq in {order.rule} order of {sections}"
                )
                self.log.add(path, Evidence("source", where, "inv_freq reordered"))
                return order
            self._delta(
                "RoPE frequencies reordered",
                where,
                f"{type(rotary).__name__}: the {kind} inv_freq is 1 / theta^(2i / {width}) "
                "in another order",
            )
            return None
        return None

    def _rope_applied(self) -> dict[str, bool | None]:
        """Per layer kind, whether its attention applies RoPE (None: the probe cannot tell).

        EXAONE 4 and Cohere 2 skip it in full-attention layers; a kind whose layers differ
        (SmolLM3's ``no_rope_layers``) is a delta.
        """
        flags = self.probe.rope_layers
        declared = declared_kinds(self.tiny)
        sliding = "sliding_attention" if getattr(self.tiny, "sliding_window", None) else None
        kinds = (
            [str(k) for k in declared] if declared else [sliding or "full_attention"] * len(flags)
        )
        by_kind: dict[str, set[bool | None]] = {}
        for kind, flag in zip(kinds, flags, strict=False):
            by_kind.setdefault(kind, set()).add(flag)
        applied: dict[str, bool | None] = {}
        for kind, found in by_kind.items():
            layers = [i for i, k in enumerate(kinds) if k == kind and i < len(flags)]
            module = f"model.layers.{layers[0]}.self_attn"
            if found == {False}:
                self._probe(f"text.rope.{kind}", module, "output unchanged with RoPE as identity")
                applied[kind] = False
            elif found == {False, True}:
                if not self._rope_layers_from_config(flags):
                    self._rope_per_layer_delta(kind, layers)
                applied[kind] = True
            else:
                applied[kind] = True if found == {True} else None
        return applied

    def _rope_layers_from_config(self, flags: Sequence[bool | None]) -> bool:
        """A per-layer config list that says, layer by layer, what the probe measured (kept in
        ``rope_layers_key``)."""
        for key in PER_LAYER_KEYS:
            values = getattr(self.tiny, key, None)
            if isinstance(values, list | tuple) and [bool(v) for v in values] == list(flags):
                self.rope_layers_key = key
                self._config("text.rope_layers_key", key, getattr(self.cfg, key, None))
                self._source("text.rope_layers_key", rf"config\.{key}\[")
                self._probe("text.rope_layers_key", "model.layers.*.self_attn", f"{flags}")
                return True
        return False

    def _rope_per_layer_delta(self, kind: str, layers: list[int]) -> None:
        module = f"model.layers.{layers[0]}.self_attn"
        class_name = dict(self.probe.modules).get(module, "attention")
        attention = self.model.get_submodule(module) if self.model is not None else None
        where = source_location(type(attention).forward) if attention is not None else None
        plain = [i for i in layers if self.probe.rope_layers[i] is False]
        self._delta(
            "RoPE skipped in some layers of one kind",
            where or module,
            f"{class_name}: tiny {kind} layers {plain} of {layers} do not rotate q and k",
        )


def rope_parameters_of(config: Any) -> dict[str, Any]:
    """An HF config object's ``rope_parameters``; for a config without it, its ``rope_theta``
    and ``partial_rotary_factor`` attributes (``tiny.rope_parameters`` reads config.json dicts)."""
    params = getattr(config, "rope_parameters", None)
    if params:
        return params
    legacy = {}
    for key in ("rope_theta", "partial_rotary_factor"):
        value = getattr(config, key, None)
        if is_number(value):
            legacy[key] = value
    return legacy


def _plain(value: Any) -> Any:
    """A rope_parameters value made hashable (the spec is frozen and compared in sets)."""
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _plain(v)) for k, v in value.items()))
    return value


def _named_order(table: Any, expected: Any, per_kind: dict[str, Any]) -> FrequencyOrder | None:
    """The ``FrequencyOrder`` whose sections (a list in the kind's rope_parameters) put the
    standard frequencies ``expected`` in the measured ``table``'s order, if one does."""
    import torch

    for key in SECTION_KEYS:
        sections = per_kind.get(key)
        if not isinstance(sections, list | tuple) or sum(map(int, sections)) != len(table):
            continue
        order = FrequencyOrder(key)
        reordered = expected[list(order.indices(sections, len(table)))]
        if torch.allclose(table, reordered, rtol=1e-5, atol=0.0):
            return order
    return None
