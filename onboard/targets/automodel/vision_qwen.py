"""A Qwen-VL model (Qwen2.5-VL, Qwen3-VL) as a generated AutoModel VLM class.

AutoModel 0.7.0's own ``Qwen3VLForConditionalGeneration`` (``qwen3_vl/model.py``) subclasses
HF's VLM class with ``HFCheckpointingMixin``; the generated class does the same, keeping HF's
vision tower with its merger (and DeepStack mergers) and HF's forward, which takes flattened
patches with ``image_grid_thw``, merges the features and hands the text model the merged
embeddings, the M-RoPE ``position_ids`` and the DeepStack features. The text model is swapped
for the one the dense generator writes for the backbone's own type (``qwen3_vl_text``,
``qwen2_5_vl_text``), with two additions of its own: ``MRopeRotaryEmbedding`` (the three-axis
angles in the layout and sections the spec read) and the DeepStack step after the first text
layers. What is still not generated stays a blocker, named at its HF line.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from onboard.vision import VisionSpec


@dataclass(frozen=True)
class QwenVLDesign:
    """What the generated Qwen-VL class reuses from HF and adds to the text model."""

    hf_vlm: str  # HF's VLM class the generated class subclasses (Qwen3VLForConditionalGeneration)
    hf_model: str  # HF's base model holding ``visual`` and ``language_model`` (Qwen3VLModel)
    mrope_layout: str  # chunks (Qwen2.5-VL) or interleaved (Qwen3-VL)
    mrope_sections: tuple[int, ...]  # HF's fallback when the config sets none
    mrope_key: str  # where the config sets them (rope_parameters.mrope_section)
    # DeepStack (Qwen3-VL): the tower layers whose mergers feed the first text layers, and the
    # vision_config key listing them; () without DeepStack
    deepstack_layers: tuple[int, ...] = ()
    deepstack_key: str = ""
    deepstack_mergers: str = ""  # the mergers' list in the tower (deepstack_merger_list)
    where: tuple[tuple[str, str], ...] = ()  # role -> modeling_x.py:N

    @property
    def deepstack(self) -> bool:
        return bool(self.deepstack_layers)

    def at(self, role: str) -> str:
        return dict(self.where).get(role, "")


def qwen_vl_blockers(vision: VisionSpec, module: Any) -> list[str]:
    """What the generated Qwen-VL class cannot do yet, one line each (``module`` is HF's
    modeling module of the VLM); the MoE text backbone is refused with every VLM's."""
    found = []
    if module is None or _hf_vlm(module) is None:
        found.append(
            "no HF VLM class with a base model holding visual and language_model: the "
            "generated Qwen-VL class subclasses HF's and swaps its text model"
        )
    if vision.merge.mrope is None:
        found.append(
            "a Qwen-VL tower without M-RoPE positions (vision.merge.mrope): the generated "
            "text model rotates by three-axis positions"
        )
    elif vision.merge.mrope.pairs != "halves":
        found.append(
            f"M-RoPE on {vision.merge.mrope.pairs} channel pairs (vision.merge.mrope.pairs, "
            "GLM-4V's): the generated MRopeRotaryEmbedding repeats the angles over halves"
        )
    return found


def design_qwen_vl(vision: VisionSpec, module: Any, architecture: str) -> QwenVLDesign:
    mrope = vision.merge.mrope
    assert mrope is not None
    vlm = getattr(module, architecture, None) or _hf_vlm(module)
    assert vlm is not None
    base = _base_model(vlm)
    deepstack = vision.deepstack
    where = {
        "rope_index": defined_at(module, "get_rope_index"),
        "rotary": defined_at(module, "recomposition_frequencies"),
        "deepstack": defined_at(module, "_deepstack_process"),
        "image_features": defined_at(module, "get_image_features"),
    }
    return QwenVLDesign(
        hf_vlm=vlm.__name__,
        hf_model=base.__name__,
        mrope_layout=mrope.layout,
        mrope_sections=tuple(mrope.sections),
        mrope_key=mrope.key,
        deepstack_layers=tuple(deepstack.layers) if deepstack else (),
        deepstack_key=deepstack.key if deepstack else "",
        deepstack_mergers=deepstack.name if deepstack else "",
        where=tuple((k, v) for k, v in where.items() if v),
    )


def _hf_vlm(module: Any) -> type | None:
    """HF's ``...ForConditionalGeneration`` whose base model builds ``visual``."""
    for value in vars(module).values():
        if (
            inspect.isclass(value)
            and value.__name__.endswith("ForConditionalGeneration")
            and _base_model(value) is not None
        ):
            return value
    return None


def _base_model(vlm: type) -> type | None:
    """The base model class ``vlm.__init__`` builds as ``self.model``, read from the module."""
    import sys

    module = sys.modules[vlm.__module__]
    try:
        source = inspect.getsource(vlm.__init__)
    except (OSError, TypeError):
        return None
    for value in vars(module).values():
        if (
            inspect.isclass(value)
            and f"self.model = {value.__name__}(" in source
            and "self.visual" in _source(value.__init__)
            and "self.language_model" in _source(value.__init__)
        ):
            return value
    return None


def _source(function: Any) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def defined_at(module: Any, method: str) -> str:
    """``modeling_x.py:N`` of the first class in ``module`` that defines ``method``, the tower's
    classes last (its rotary embedding has a ``recomposition_frequencies`` of its own, before
    the text model's)."""
    from onboard.analysis.probe import source_location

    if module is None:
        return ""
    classes = [v for v in vars(module).values() if inspect.isclass(v) and method in vars(v)]
    if not classes:
        return ""
    classes.sort(key=lambda cls: "Vision" in cls.__name__)
    return source_location(vars(classes[0])[method]) or ""
