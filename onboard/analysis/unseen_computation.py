"""What the real config switches on that a tiny model never shows, reported as deltas.

The spec check runs a tiny float model, so a computation that only a real value or a real
checkpoint triggers passes it unseen: OLMo's clamp of q, k and v at ``config.clip_qkv`` (the tiny
activations never reach it), and BitNet's quantized linears, which transformers puts in place of
``nn.Linear`` when the config carries a ``quantization_config`` of method ``bitnet`` (ternary
weights packed four to a byte with a ``weight_scale``, activations quantized to int8 per token),
while a tiny model built from the config keeps float linears.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onboard.analysis.source_lines import find_line
from onboard.source import SourceFile
from onboard.spec import Delta

# Config values that clamp activations (``clamp(min=-c, max=c)``), which the spec cannot hold.
_CLIP_KEYS = ("clip_qkv",)
# Quantization methods whose linears compute something else than a float matmul of the
# checkpoint's tensors (BitNet's BitLinear / AutoBitLinear, transformers/integrations/bitnet.py)
_COMPUTING_QUANTIZERS = ("bitnet",)


def unseen_computation(config: Any, files: Sequence[SourceFile]) -> list[Delta]:
    found = []
    for key in _CLIP_KEYS:
        value = getattr(config, key, None)
        if value is not None:
            line = find_line(files, rf"\bconfig\.{key}\b")
            where = line.where if line else f"config.json:{key}"
            found.append(Delta(f"activations clipped at config.{key}", where, f"{key} = {value!r}"))
    quantization = getattr(config, "quantization_config", None) or {}
    if not isinstance(quantization, dict):
        quantization = getattr(quantization, "to_dict", dict)()
    method = quantization.get("quant_method")
    if method in _COMPUTING_QUANTIZERS:
        found.append(
            Delta(
                f"{method}-quantized linear layers (ternary weights packed with a weight_scale, "
                "int8 activations), which a float tiny model does not compute",
                "config.json:quantization_config",
                f"quant_method = {method!r}; a checkpoint of float weights (no "
                "quantization_config) is what the spec describes",
            )
        )
    return found
