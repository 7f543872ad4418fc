"""A hybrid's recurrent token mixers, as the generated mobius module builds them.

mobius' ``hybrid-text-generation`` task gives each layer the state inputs its label in
``config.layer_types`` asks for, in mobius' own words (``conv`` for a short convolution's
``conv_state``). The generated config maps HF's labels to those words, and each kind gets a
generated component where mobius 0.1.0 has none that computes what HF computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.spec import ArchitectureSpec
from onboard.targets.mobius.settings import ExtraField, Setting, why

HYBRID_TASK = "hybrid-text-generation"
# onboard's kind -> mobius' layer_types word for its state inputs
MOBIUS_LABELS = {"short_conv": "conv"}


@dataclass(frozen=True)
class MixerDesign:
    """One recurrent kind: the generated component and the decoder layer that holds it."""

    kind: str
    label: str  # mobius' word in config.layer_types
    attribute: str  # the layer's attribute (HF's name, so weights need no rename)
    component: str  # generated class names
    layer_class: str
    spec: Any  # the kind's spec (onboard.token_mixers)
    reason: str


def mixer_designs(spec: ArchitectureSpec, prefix: str) -> tuple[MixerDesign, ...]:
    text = spec.text
    designs = []
    for kind in text.mixers.in_use():
        mixer = text.mixers.of(kind)
        if kind == "short_conv":
            reason = why(
                "short-convolution layers: c * conv(b * x) over in_proj's thirds, with the last "
                f"{mixer.kernel - 1} inputs as state",
                spec,
                "text.mixers.short_conv",
            )
            designs.append(
                MixerDesign(
                    kind,
                    MOBIUS_LABELS[kind],
                    mixer.attribute,
                    f"{prefix}ShortConv",
                    f"{prefix}ShortConvDecoderLayer",
                    mixer,
                    reason,
                )
            )
    return tuple(designs)


def mixer_settings(
    spec: ArchitectureSpec, designs: tuple[MixerDesign, ...]
) -> tuple[list[Setting], list[ExtraField]]:
    """The config fields the hybrid task and the generated mixers read."""
    if not designs:
        return [], []
    text = spec.text
    words = {label: MOBIUS_LABELS[kind] for label, kind in text.mixer_labels}
    renamed = {label: word for label, word in words.items() if label != word}
    key = text.layer_types_key or "layer_types"
    expr = (
        f"[{renamed!r}.get(kind, kind) for kind in config.{key}]"
        if renamed
        else f"list(config.{key})"
    )
    settings = [
        Setting(
            "layer_types",
            expr,
            why("each layer's kind in mobius' words (its state inputs)", spec, "text.layer_types"),
        )
    ]
    extra: list[ExtraField] = []
    for design in designs:
        if design.kind == "short_conv":
            mixer = design.spec
            extra += [
                ExtraField("short_conv_kernel", "int", "3"),
                ExtraField("short_conv_bias", "bool", "False"),
            ]
            kernel = f"config.{mixer.kernel_key}" if mixer.kernel_key else repr(mixer.kernel)
            bias = f"bool(config.{mixer.bias_key})" if mixer.bias_key else repr(mixer.bias)
            settings += [
                Setting(
                    "short_conv_kernel",
                    kernel,
                    why("short convolution taps", spec, "text.mixers.short_conv"),
                ),
                Setting(
                    "short_conv_bias",
                    bias,
                    why("short convolution biases", spec, "text.mixers.short_conv"),
                ),
            ]
    return settings, extra
