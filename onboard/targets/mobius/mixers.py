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
from onboard.targets.mobius.blocks import BLOCK_ATTRIBUTES
from onboard.targets.mobius.settings import ExtraField, Setting, why

HYBRID_TASK = "hybrid-text-generation"
# onboard's kind -> mobius' layer_types word for its state inputs
MOBIUS_LABELS = {
    "short_conv": "conv",
    "mamba": "mamba",
    "mamba2": "mamba2",
    "gated_deltanet": "linear_attention",
}
# the generated component of each kind (its decoder layer adds DecoderLayer)
_COMPONENTS = {
    "short_conv": "ShortConv",
    "mamba": "Mamba",
    "mamba2": "Mamba2",
    "gated_deltanet": "GatedDeltaNet",
}
# Mamba spec field -> the mobius config field (the hybrid task sizes a mamba layer's states
# from mamba_expand x hidden_size, mamba_d_conv and mamba_d_state), its annotation and default
_MAMBA_FIELDS = {
    "state_size": ("mamba_d_state", "int", "16"),
    "conv_kernel": ("mamba_d_conv", "int", "4"),
    "dt_rank": ("mamba_dt_rank", "int", "256"),
    "conv_bias": ("mamba_conv_bias", "bool", "True"),
    "proj_bias": ("mamba_proj_bias", "bool", "False"),
    "activation": ("mamba_activation", "str", '"silu"'),
}
# Mamba-2 spec field -> the mobius config field the hybrid task and the component read
_MAMBA2_FIELDS = {
    "num_heads": ("mamba_n_heads", "int", "8"),
    "head_dim": ("mamba_d_head", "int", "64"),
    "state_size": ("mamba_d_state", "int", "64"),
    "groups": ("mamba_n_groups", "int", "1"),
    "conv_kernel": ("mamba_d_conv", "int", "4"),
    "conv_bias": ("mamba_conv_bias", "bool", "True"),
    "proj_bias": ("mamba_proj_bias", "bool", "False"),
    "activation": ("mamba_activation", "str", '"silu"'),
    "norm_eps": ("mamba_norm_eps", "float", "1e-5"),
    "norm_groups": ("mamba_norm_groups", "int", "1"),
    "time_step_limit": ("mamba_time_step_limit", "tuple[float, float | None]", "(0.0, None)"),
}
# Gated DeltaNet spec field -> the mobius config field (the hybrid task sizes the states and
# its LinearAttention function from the linear_* ones mobius' config has), and for the two it
# lacks the annotation and default of the added field
_DELTANET_FIELDS = {
    "key_heads": ("linear_num_key_heads", None),
    "value_heads": ("linear_num_value_heads", None),
    "key_head_dim": ("linear_key_head_dim", None),
    "value_head_dim": ("linear_value_head_dim", None),
    "conv_kernel": ("linear_conv_kernel_dim", None),
    "activation": ("linear_activation", ("str", '"silu"')),
    "norm_eps": ("linear_norm_eps", ("float", "1e-6")),
}


@dataclass(frozen=True)
class MixerDesign:
    """One recurrent kind: the generated component and the decoder layer that holds it."""

    kind: str
    label: str  # mobius' word in config.layer_types
    attribute: str  # the layer's attribute (HF's name; mobius' in one-block layers)
    component: str  # generated class names
    layer_class: str
    spec: Any  # the kind's spec (onboard.token_mixers)
    reason: str


def mixer_designs(spec: ArchitectureSpec, prefix: str) -> tuple[MixerDesign, ...]:
    """A design for each kind in use that mobius renders (the others are blockers)."""
    designs = []
    for kind in spec.text.mixers.in_use():
        if kind not in MOBIUS_LABELS:
            continue
        mixer = spec.text.mixers.of(kind)
        component = _COMPONENTS[kind]
        # a model named for its mixer (Mamba2) calls it a mixer, as HF does: not Mamba2Mamba2
        name = f"{prefix}{'Mixer' if prefix.endswith(component) else component}"
        reason = why(_reason(kind, mixer), spec, f"text.mixers.{kind}")
        designs.append(
            MixerDesign(
                kind,
                MOBIUS_LABELS[kind],
                BLOCK_ATTRIBUTES[kind] if spec.text.blocks else mixer.attribute,
                name,
                f"{name}DecoderLayer",
                mixer,
                reason,
            )
        )
    return tuple(designs)


def _reason(kind: str, mixer: Any) -> str:
    """The generated module's docstring line for this kind."""
    if kind == "short_conv":
        return (
            "short-convolution layers: c * conv(b * x) over in_proj's thirds, with the last "
            f"{mixer.conv_kernel - 1} inputs as state"
        )
    if kind == "mamba":
        normed = ", dt/B/C RMS-normalised" if mixer.norms else ""
        return (
            f"Mamba layers ({mixer.inner} channels, state {mixer.state_size}{normed}), the whole "
            "prompt scanned at once, padded positions kept out of their states"
        )
    if kind == "gated_deltanet":
        return (
            f"gated DeltaNet layers ({mixer.key_heads} key heads, {mixer.value_heads} value "
            f"heads), q and k L2-normalised with HF's epsilon {mixer.l2_eps}"
        )
    return (
        f"Mamba-2 layers ({mixer.num_heads} heads, state {mixer.state_size}), padded positions "
        "kept out of their states"
    )


def mixer_settings(
    spec: ArchitectureSpec, designs: tuple[MixerDesign, ...]
) -> tuple[list[Setting], list[ExtraField]]:
    """The config fields the hybrid task and the generated mixers read."""
    if not designs:
        return [], []
    text = spec.text
    # the feed-forward kinds of one-block layers (mlp, moe) are mobius' words already
    words = {label: MOBIUS_LABELS.get(kind, kind) for label, kind in text.mixer_labels}
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
            kernel = (
                f"config.{mixer.conv_kernel_key}"
                if mixer.conv_kernel_key
                else repr(mixer.conv_kernel)
            )
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
        elif design.kind == "mamba":
            fields, more = _mamba_settings(spec, design.spec)
            settings += fields
            extra += more
        elif design.kind == "mamba2":
            fields, more = _mamba2_settings(spec, design.spec)
            settings += fields
            extra += more
        elif design.kind == "gated_deltanet":
            fields, more = _deltanet_settings(spec, design.spec)
            settings += fields
            extra += more
    return settings, extra


def _deltanet_settings(
    spec: ArchitectureSpec, mixer: Any
) -> tuple[list[Setting], list[ExtraField]]:
    """Each size from the config key HF reads it from, else as the tiny model showed it."""
    settings, extra = [], []
    for field, (name, added) in _DELTANET_FIELDS.items():
        if added is not None:
            extra.append(ExtraField(name, *added))
        reason = why(f"gated DeltaNet {field}", spec, "text.mixers.gated_deltanet")
        settings.append(Setting(name, _read_from_config(mixer, field), reason))
    return settings, extra


def _mamba_settings(spec: ArchitectureSpec, mixer: Any) -> tuple[list[Setting], list[ExtraField]]:
    """The width as a factor of hidden_size (the hybrid task's mamba_expand), then each size
    and flag from the config key HF reads it from, else as the tiny model showed it."""
    path = "text.mixers.mamba"
    expand = mixer.key("expand")
    factor = f"config.{expand}" if expand else f"config.{mixer.key('inner')} // config.hidden_size"
    extra = [ExtraField("mamba_expand", "int", "2")]
    settings = [Setting("mamba_expand", factor, why("Mamba width / hidden_size", spec, path))]
    fields = dict(_MAMBA_FIELDS)
    if mixer.norms:  # Jamba's dt, B and C norms
        fields["norm_eps"] = ("mamba_norm_eps", "float", "1e-6")
    for field, (name, annotation, default) in fields.items():
        extra.append(ExtraField(name, annotation, default))
        expr = _read_from_config(mixer, field, annotation)
        settings.append(Setting(name, expr, why(f"Mamba {field}", spec, path)))
    return settings, extra


def _read_from_config(mixer: Any, field: str, annotation: str = "") -> str:
    """A mixer field as the generated config reads it: from the config key HF reads (a bool
    as ``bool(...)``), else the value the tiny model showed, which the source fixes."""
    key = mixer.key(field)
    if key is None:
        return repr(getattr(mixer, field))
    return f"bool(config.{key})" if annotation == "bool" else f"config.{key}"


def mamba_width_blockers(spec: ArchitectureSpec) -> list[str]:
    """The hybrid task sizes a mamba layer's states as mamba_expand x hidden_size."""
    mixer = spec.text.mixers.mamba
    if mixer is None or mixer.key("expand") or mixer.inner % spec.text.hidden_size == 0:
        return []
    return [
        f"a Mamba width ({mixer.inner}) that is no multiple of hidden_size "
        f"({spec.text.hidden_size}) (text.mixers.mamba): mobius' hybrid task sizes the states "
        "as mamba_expand x hidden_size"
    ]


def _mamba2_settings(spec: ArchitectureSpec, mixer: Any) -> tuple[list[Setting], list[ExtraField]]:
    """Each size from the config key HF reads it from (the hybrid task sizes the states from
    the mamba_* fields); what the source fixes, as the tiny model showed it."""
    settings, extra = [], []
    for field, (name, annotation, default) in _MAMBA2_FIELDS.items():
        extra.append(ExtraField(name, annotation, default))
        key = mixer.key(field)
        value = getattr(mixer, field)
        if field == "norm_groups":  # the norm's groups are the mixer's groups, or one
            expr = f"config.{mixer.key('groups')}" if value == mixer.groups != 1 else "1"
        elif field == "time_step_limit" and mixer.key("time_step_min"):  # (min, inf) in HF
            expr = f"(config.{mixer.key('time_step_min')}, None)"
        elif field == "time_step_limit" and key is not None:
            expr = f"tuple(config.{key})"
        else:
            expr = _read_from_config(mixer, field, annotation)
        settings.append(Setting(name, expr, why(f"Mamba-2 {field}", spec, "text.mixers.mamba2")))
    return settings, extra
