"""The recurrent token mixers hybrid decoders use beside attention: one frozen dataclass a kind.

A hybrid's layers each mix tokens with attention or with a recurrent kind (a short convolution,
Mamba, gated DeltaNet ...). ``TextDecoderSpec.layer_types`` names each layer's kind in onboard's
words; the attention kinds keep ``AttentionSpec``, and each recurrent kind in use has its spec
here, in ``TokenMixers``. Adding a kind adds a dataclass and a field of ``TokenMixers``, its reader
and check (``analysis/mixers``) and a renderer per target; nothing else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, Literal

# onboard's names of the recurrent kinds (HF's labels vary: transformers 5 calls Mamba layers
# linear_attention in some models, DeltaNet layers in others); attention keeps HF's labels.
MixerKind = Literal["short_conv", "mamba2", "mamba", "gated_deltanet"]
ATTENTION_KINDS = ("full_attention", "sliding_attention", "indexed_attention")
# Layers that mix no tokens, only channels: NemotronH's one-block layers of an MLP (``mlp``) or
# of experts (``moe``), in mobius' words too.
FEED_FORWARD_KINDS = ("mlp", "moe")


@dataclass(frozen=True)
class ShortConvSpec:
    """LFM2's gated short convolution: ``in_proj`` gives three hidden-wide parts (``order``
    names them: ``b`` and ``c`` gate, ``x`` is convolved), ``y = c * conv(b * x)`` with a causal
    depthwise convolution of ``conv_kernel`` taps, then ``out_proj``. Decoding keeps the last
    ``conv_kernel - 1`` inputs of the convolution as the layer's state."""

    conv_kernel: int
    conv_kernel_key: str | None  # the config key HF reads the kernel size from (conv_L_cache)
    bias: bool
    bias_key: str | None  # the config key behind the biases of the three modules (conv_bias)
    order: tuple[str, str, str] = ("b", "c", "x")  # in_proj's thirds, first to last
    attribute: str = "conv"  # the layer's attribute holding the mixer
    in_proj: str = "in_proj"  # HF attributes inside it
    conv: str = "conv"
    out_proj: str = "out_proj"


@dataclass(frozen=True)
class Mamba2Spec:
    """Mamba-2 (SSD). ``in_proj`` gives the gate ``z``, ``xBC`` and ``dt``, in that order;
    ``xBC`` passes a causal depthwise convolution and ``activation``, then splits into ``x``
    (heads x head_dim), ``B`` and ``C`` (groups x state, each group shared by heads / groups
    heads). ``dt = softplus(dt + dt_bias)``, clipped to ``time_step_limit`` over a prompt (HF's
    one-token step does not clip); each head's state decays by ``exp(dt * A)``, ``A =
    -exp(A_log)``, and takes ``dt * x B``; ``y = C . state + D * x``; then an RMS norm of ``y *
    silu(z)`` within ``norm_groups`` groups of channels, and ``out_proj``. Padded positions are
    zeroed before ``in_proj`` and after the convolution, so they never reach the states."""

    num_heads: int
    head_dim: int
    state_size: int
    groups: int
    conv_kernel: int
    conv_bias: bool
    proj_bias: bool
    activation: str
    norm_eps: float
    norm_groups: int  # 1: the norm spans every channel (Bamba); groups: NemotronH
    time_step_limit: tuple[float, float | None] = (0.0, None)  # None: no upper limit
    # spec field -> the config key HF reads it from (num_heads -> mamba_n_heads, ...)
    keys: tuple[tuple[str, str], ...] = ()
    attribute: str = "mamba"  # the layer's attribute holding the mixer

    def key(self, field: str) -> str | None:
        return dict(self.keys).get(field)

    @property
    def inner(self) -> int:
        return self.num_heads * self.head_dim

    def with_sizes(self, **sizes: int) -> Mamba2Spec:
        """A norm over each group keeps doing so at another group count."""
        per_group = self.norm_groups == self.groups != 1
        resized = dataclasses.replace(self, **sizes)
        return dataclasses.replace(resized, norm_groups=resized.groups) if per_group else resized

    @property
    def conv_dim(self) -> int:
        return self.inner + 2 * self.groups * self.state_size


@dataclass(frozen=True)
class MambaSpec:
    """Mamba (the first; Jamba's and Mamba's layers). ``in_proj`` gives ``x`` and the gate ``z``
    (halves, in that order); ``x`` passes a causal depthwise convolution and ``activation``;
    ``x_proj`` gives the time-step rank, ``B`` and ``C`` (Jamba RMS-normalises each, with
    ``norms``); ``dt = softplus(dt_proj(dt))``; each channel's state (``state_size`` wide) decays
    by ``exp(dt * A)``, ``A = -exp(A_log)``, and takes ``dt * B x``; ``y = C . state + D * x``,
    gated by ``silu(z)``, then ``out_proj``."""

    inner: int
    state_size: int
    conv_kernel: int
    dt_rank: int
    conv_bias: bool
    proj_bias: bool
    activation: str
    norms: bool  # dt, B and C are RMS-normalised (Jamba's dt/b/c_layernorm)
    norm_eps: float | None = None
    norm_weights: bool = True  # False: the norms learn nothing (FalconMamba's weightless ones)
    keys: tuple[tuple[str, str], ...] = ()  # spec field -> the config key HF reads it from
    attribute: str = "mamba"

    def key(self, field: str) -> str | None:
        return dict(self.keys).get(field)


@dataclass(frozen=True)
class GatedDeltaNetSpec:
    """Gated DeltaNet (Qwen3-Next's and Qwen3.5's linear-attention layers). The projections give
    q and k (``key_heads`` x ``key_head_dim``), v and the gate z (``value_heads`` x
    ``value_head_dim``), and per value head b and a; ``grouped`` projections fuse them as
    ``in_proj_qkvz`` / ``in_proj_ba`` with each key head's group of rows together (Qwen3-Next),
    ``separate`` ones are ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b``, ``in_proj_a`` (Qwen3.5).
    q, k and v pass a causal depthwise convolution and ``activation``; q and k are L2-normalised
    per head (``x / sqrt(sum x^2 + l2_eps)``), q scaled by ``key_head_dim ** -0.5``, and repeated
    for the value heads that share them; ``beta = sigmoid(b)``, ``g = -exp(A_log) * softplus(a
    + dt_bias)``; each value head's state ``S`` (``key_head_dim x value_head_dim``) decays by
    ``exp(g)``, then ``S += k (beta (v - k S))``; ``y = q S``; an RMS norm of each head's ``y``
    gated by ``silu(z)``; ``out_proj``. Padded positions are zeroed before the projections."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    conv_bias: bool
    activation: str
    norm_eps: float
    l2_eps: float  # HF's l2norm epsilon, fixed in its source
    projections: Literal["grouped", "separate"]
    keys: tuple[tuple[str, str], ...] = ()  # spec field -> the config key HF reads it from
    attribute: str = "linear_attn"
    # The chunk of HF's chunked prefill (torch_chunk_gated_delta_rule's default, no config key):
    # a prompt must cross it for the chunked rule and the recurrent step to be compared
    chunk_size: int = 64

    def key(self, field: str) -> str | None:
        return dict(self.keys).get(field)

    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim


@dataclass(frozen=True)
class TokenMixers:
    """The spec of each recurrent kind the layers use (None: no layer uses that kind)."""

    short_conv: ShortConvSpec | None = None
    mamba2: Mamba2Spec | None = None
    mamba: MambaSpec | None = None
    gated_deltanet: GatedDeltaNetSpec | None = None

    def of(self, kind: str) -> ShortConvSpec | Mamba2Spec | MambaSpec | GatedDeltaNetSpec | None:
        return getattr(self, kind, None) if kind in self.kinds() else None

    @staticmethod
    def kinds() -> tuple[str, ...]:
        return tuple(f.name for f in fields(TokenMixers))

    def in_use(self) -> tuple[str, ...]:
        return tuple(kind for kind in self.kinds() if getattr(self, kind) is not None)

    def fixed_chunks(self) -> tuple[int, ...]:
        """The chunks HF's prefill scans in whatever the config says (DeltaNet's 64), which a
        parity prompt must cross; Mamba-2's chunk is a config key the tiny config shrinks."""
        deltanet = self.gated_deltanet
        return (deltanet.chunk_size,) if deltanet is not None else ()


def sized_for(mixer: Any, config: Any) -> Any:
    """``mixer`` with each size HF reads from a config key set to ``config``'s value: the
    real model's sizes for the spec, the tiny model's for the spec check."""
    sizes = {}
    for name, key in getattr(mixer, "keys", ()):
        value = getattr(config, key, None)
        current = getattr(mixer, name, None)
        if isinstance(current, int) and not isinstance(current, bool) and isinstance(value, int):
            sizes[name] = value
    if not sizes:
        return mixer
    resize = getattr(mixer, "with_sizes", None)
    return resize(**sizes) if resize else dataclasses.replace(mixer, **sizes)


def is_attention(kind: str) -> bool:
    return kind in ATTENTION_KINDS


def is_feed_forward(kind: str) -> bool:
    return kind in FEED_FORWARD_KINDS
