"""mobius 0.1.0's defects in its own Pixtral path (``LLaVAModel`` with a ``pixtral`` tower: the
``mistral3`` and ``pixtral`` registrations), named when a config triggers them.

Each is read in mobius' source and measured on the tiny mistral3 of transformers' default config
(tower features against HF's ``get_image_features``; the generated module reads each value
where HF does and passes). The generated code does not reuse the parts they live in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from onboard.parity.report import TargetBug

_COMPONENTS = "mobius/components/_pixtral_vision.py"
_DEFAULTS = "mobius/_configs/_vision_defaults.py"


@dataclass(frozen=True)
class _Defect:
    id: str
    applies: Callable[[Mapping[str, Any]], bool]  # on the composite config.json dict
    title: str
    evidence: str


def _vision(config: Mapping[str, Any]) -> Mapping[str, Any]:
    return config.get("vision_config") or {}


def _theta(config: Mapping[str, Any]) -> float:
    return float((_vision(config).get("rope_parameters") or {}).get("rope_theta", 10000.0))


_DEFECTS = (
    _Defect(
        "pixtral P1",
        lambda c: _vision(c).get("hidden_act", "gelu") != "silu",
        "PixtralTransformerLayer builds its MLP with activation='silu' whatever "
        "vision_config.hidden_act says (transformers' default config says gelu)",
        f"{_COMPONENTS}:227-230 GatedMLP(..., activation='silu') vs HF PixtralMLP "
        "ACT2FN[config.hidden_act] (modeling_pixtral.py); tiny default mistral3: image features "
        "2.8e-3 off with gelu, 1.0e-7 with hidden_act silu",
    ),
    _Defect(
        "pixtral P2",
        lambda c: _theta(c) != 10000.0,
        "the tower's RoPE base is read from vision_config.rope_theta, which transformers 5 keeps "
        "in rope_parameters: every Pixtral tower runs at 10000",
        f"{_DEFAULTS}:84 getattr(vc, 'rope_theta', None) is None -> PixtralVisionTower's 10000.0 "
        f"({_COMPONENTS}:479); tiny mistral3 with rope_theta 1e6: image features 1.4e-4 off",
    ),
    _Defect(
        "pixtral P3",
        lambda c: int(c.get("spatial_merge_size", 2)) != 2,
        "the patch merge size is read from the vision config, which has none; HF reads "
        "spatial_merge_size from the composite config",
        f"{_DEFAULTS}:91 getattr(vc, 'spatial_merge_size', 2) vs HF Mistral3PatchMerger "
        "config.spatial_merge_size (modeling_mistral3.py)",
    ),
    _Defect(
        "pixtral P4",
        lambda c: (
            bool(c.get("tie_word_embeddings"))
            and not (c.get("text_config") or {}).get("tie_word_embeddings", False)
        ),
        "the head is tied by text_config.tie_word_embeddings (False), while HF ties it by the "
        "composite's (True): the checkpoint has no lm_head and the decoder's head gets nothing",
        "mobius/_configs/_base.py:851-856 reads the text config's flag first; the weight proof: "
        "decoder.lm_head.weight is filled by no checkpoint tensor",
    ),
    _Defect(
        "pixtral P5",
        lambda c: True,
        "the embedding graph restarts its feature count on every row, so with two rows holding "
        "an image each, row 1 gets row 0's features (hybrid notes section 1.1, by code reading)",
        "mobius/models/llava.py:123 (CumSum over axis 1, per row); tiny default mistral3, two "
        "rows: merged embeddings 0.26 off, prefill logits 1.09",
    ),
)


def pixtral_defects(module_class: type, config: Mapping[str, Any]) -> tuple[TargetBug, ...]:
    """The defects ``config`` triggers in mobius' own LLaVAModel on a Pixtral tower."""
    if module_class.__name__ != "LLaVAModel" or _vision(config).get("model_type") != "pixtral":
        return ()
    return tuple(TargetBug(d.id, d.title, d.evidence) for d in _DEFECTS if d.applies(config))
