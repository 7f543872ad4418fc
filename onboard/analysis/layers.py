"""What each real layer is made of, without allocating it: a meta-device build of the full model.

Config fields that decide per-layer structure vary by model (``first_k_dense_replace``,
``mlp_only_layers`` with ``decoder_sparse_step``, ``moe_layer_freq`` ...). Building the real
model on torch's meta device runs transformers' own code for them in a fraction of a second and
allocates nothing; the tiny config is then checked against it.
"""

from __future__ import annotations

import re
from typing import Any

# Where decoder layers keep their feed-forward block (GraniteMoe: block_sparse_moe; Jamba, LFM2:
# feed_forward, which the analysis sees as mlp through the Llama-layout view).
FFN_BLOCK_NAMES = ("mlp", "block_sparse_moe", "feed_forward")
# A layer's cross-attention to encoder states (TrOCR's encoder_attn), by its HF names.
CROSS_ATTENTION = re.compile(
    r"^model\.layers\.\*\.(encoder_attn|crossattention|cross_attn)(_layer_?norm)?\."
)


def layer_signatures(hf_config: Any) -> list[str]:
    """``"moe|<mlp class>|<attention class>"`` or ``"dense|..."`` for every decoder layer."""
    import torch

    from onboard.analysis.vision.backbone import causal_lm_from_config

    try:
        with torch.device("meta"):
            model = causal_lm_from_config(hf_config)
    except Exception:  # the tiny build reports config errors; without a build, keep no pattern
        return []
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        return []
    return [_signature(layer) for layer in layers]


def ffn_block_name(layer: Any) -> str:
    """The attribute of ``layer`` that holds its feed-forward block (``mlp`` when none does)."""
    return next((n for n in FFN_BLOCK_NAMES if hasattr(layer, n)), "mlp")


def moe_block_name(layer: Any) -> str | None:
    """The attribute of ``layer`` that holds an MoE block (a module with ``experts``), if any."""
    return next((n for n in FFN_BLOCK_NAMES if hasattr(getattr(layer, n, None), "experts")), None)


def _signature(layer: Any) -> str:
    kind = "moe" if moe_block_name(layer) else "dense"
    children = "|".join(type(child).__name__ for _, child in layer.named_children())
    return f"{kind}|{children}"
