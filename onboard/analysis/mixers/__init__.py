"""The recurrent token mixers of hybrid decoders, one module a kind.

Each kind's module reads its spec from a tiny HF layer (structure first, the config keys behind
the numbers from the source, choices the structure leaves open from the module's values) and
computes it in torch for the spec check. ``MIXERS`` is the one list the analysis walks: a new
kind is a new module here, a dataclass in ``onboard.token_mixers`` and a renderer per target.
"""

from __future__ import annotations

from onboard.analysis.mixers import gated_deltanet, mamba, mamba2, short_conv
from onboard.analysis.mixers.base import MixerKind

MIXERS: tuple[MixerKind, ...] = (short_conv.KIND, mamba2.KIND, mamba.KIND, gated_deltanet.KIND)

__all__ = ["MIXERS", "MixerKind"]
