"""mobius 0.1.0's defects in its own Pixtral path (``LLaVAModel`` with a ``pixtral`` tower: the
``mistral3`` and ``pixtral`` registrations), named when a config triggers them, and in its own
Qwen3.5 VLMs (``qwen3_5_defects``) and Qwen-VL embedding graph (``qwen_vl_defects``), named when
the checks they break fail; and in its registration of idefics2 to ``LLaVAModel``
(``perceiver_defects``: no perceiver resampler).

Each is read in mobius' source and measured on the tiny mistral3 of transformers' default config
(tower features against HF's ``get_image_features``; the generated module reads each value
where HF does and passes). The generated code does not reuse the parts they live in.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from onboard.parity.report import TargetBug
from onboard.targets.mobius.vision import VLM_TASK

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


# mobius' own Qwen3.5 VLMs (3-model split over its hybrid decoder); each defect is found in the
# source it lives in, so a mobius that fixes it is no longer blamed, and named only where the
# check it breaks failed
_QWEN3_5_CLASSES = ("Qwen35VL3ModelCausalLMModel", "Qwen35MoEVL3ModelCausalLMModel")
_ROW_CUMSUM = re.compile(r"op\.CumSum\(\s*mask_int,\s*op\.Constant\(value_int=1\)\s*\)")
_NO_L2_EPS = re.compile(r"op\.Sqrt\(\s*op\.ReduceSumSquare\(")


def qwen3_5_defects(module_class: type, failed: Collection[str]) -> tuple[TargetBug, ...]:
    """The defects of mobius' own Qwen3.5 VLM that explain the checks in ``failed`` (its
    embedding graph's, shared with the other Qwen-VL classes, ``qwen_vl_defects`` names)."""
    if module_class.__name__ == "Qwen35MoECausalLMModel" and "build" in failed:
        return (
            TargetBug(
                "qwen3.5 Q3",
                "mobius registers the VLM's model type qwen3_5_moe to its text-only "
                "Qwen35MoECausalLMModel: no vision encoder or embedding graph is built, and its "
                "VLM class sits under qwen3_5_moe_vl, a model type no HF config carries",
                "mobius/_registry.py:539 'qwen3_5_moe': ModelRegistration(Qwen35MoECausalLMModel) "
                "vs :606 'qwen3_5_moe_vl': ModelRegistration(Qwen35MoEVL3ModelCausalLMModel, "
                "task='hybrid-qwen-vl'); HF's qwen3_5_moe is Qwen3_5MoeForConditionalGeneration "
                "(its text model is qwen3_5_moe_text)",
            ),
        )
    if module_class.__name__ not in _QWEN3_5_CLASSES:
        return ()
    from mobius.components._gated_deltanet import GatedDeltaNet

    mixer = inspect.getsource(GatedDeltaNet.forward)
    if not ({"text-only", "prefill", "decode"} & set(failed) and _NO_L2_EPS.search(mixer)):
        return ()
    return (
        TargetBug(
            "qwen3.5 Q2",
            "mobius' GatedDeltaNet L2-normalises q and k with no epsilon, HF's "
            "Qwen3_5GatedDeltaNet with 1e-6 (hybrid notes M7)",
            "mobius/components/_gated_deltanet.py:213-222 x / sqrt(sum(x^2)) vs "
            "transformers/models/qwen3_5/modeling_qwen3_5.py:295 rsqrt(sum(x^2) + eps), "
            "eps=1e-6 at :343-344; tiny default qwen3_5, text only: logits 1.7e-4 off (the "
            "generated DeltaNet, with HF's epsilon, 2e-6)",
        ),
    )


# mobius' own Qwen-VL classes whose embedding graph is Qwen25VLEmbeddingModel's (Qwen3-VL's
# subclass keeps its forward): the row-count defect's id for each, and where it was measured
_ROW_COUNT_MEASURED = {
    "Qwen25VLCausalLMModel": (
        "qwen-vl E1",
        "Qwen/Qwen2.5-VL-3B-Instruct (bundled config), rows of one image, two images, none: "
        "merged embeddings 1.0 off, prefill logits 2.2",
    ),
    "Qwen2VLCausalLMModel": ("qwen-vl E1", "measured on Qwen2.5-VL, which shares the graph"),
    "Qwen3VL3ModelCausalLMModel": ("qwen-vl E1", "measured on Qwen2.5-VL, which shares the graph"),
    **dict.fromkeys(
        _QWEN3_5_CLASSES,
        (
            "qwen3.5 Q1",
            "tiny default qwen3_5 (published merger width and M-RoPE), rows of one image, two "
            "images, none: merged embeddings 1.1 off, prefill logits 2.5",
        ),
    ),
}


def qwen_vl_defects(module_class: type, failed: Collection[str]) -> tuple[TargetBug, ...]:
    """The row-restarting feature count of the embedding graph mobius' own Qwen2-VL,
    Qwen2.5-VL, Qwen3-VL and Qwen3.5 VLMs share, named where the merged embeddings failed."""
    measured = _ROW_COUNT_MEASURED.get(module_class.__name__)
    if measured is None or "merged-embeddings" not in failed:
        return ()
    from mobius.models.qwen_vl import Qwen25VLEmbeddingModel

    if not _ROW_CUMSUM.search(inspect.getsource(Qwen25VLEmbeddingModel.forward)):
        return ()
    bug_id, where = measured
    return (
        TargetBug(
            bug_id,
            f"{module_class.__name__}'s embedding graph restarts its feature count on every row, "
            "so with images in two rows the second row gets the first row's features (HF's "
            "masked_scatter fills placeholders over the whole batch)",
            "mobius/models/qwen_vl.py:306 CumSum(mask, axis 1) inside "
            f"Qwen25VLEmbeddingModel.forward; {where}",
        ),
    )


# mobius' own LLaVAModel under the tile types (llava_next, llava_next_video, llava_onevision:
# mobius/_registry.py:588-590); each is found in the source it lives in, so a mobius that fixes
# it is no longer blamed, and named when the config tiles (image_grid_pinpoints)
_LLAVA = "mobius/models/llava.py"


def llava_tile_defects(module_class: type, config: Mapping[str, Any]) -> tuple[TargetBug, ...]:
    """The defects of mobius' LLaVAModel that every image prompt of a tiling config hits."""
    if module_class.__name__ != "LLaVAModel" or not config.get("image_grid_pinpoints"):
        return ()
    from mobius.models import llava
    from mobius.tasks import VisionLanguageTask

    module = inspect.getsource(llava)
    found = []
    if "image_sizes" not in inspect.getsource(VisionLanguageTask._build_vision):
        found.append(
            TargetBug(
                "llava-next N1",
                "the vision encoder takes pixel_values [batch, 3, S, S] alone and returns every "
                "tile's patch features: no image_sizes, so no grid is chosen from "
                "image_grid_pinpoints, nothing is cut back to the aspect ratio (unpad)"
                + (
                    ", nothing downsampled past vision_aspect_ratio"
                    if config.get("vision_aspect_ratio")
                    else ""
                )
                + " and the base tile is not put first, as HF's pack_image_features does",
                "mobius/tasks/_vision_language_3model.py:76-95 (pixel_values only) and "
                f"{_LLAVA}:81-94 (tower, projector, nothing after); tiny default llava_next: "
                "HF packs the two test images' 6 tiles into 74 feature rows (16 + 2 x 9 and "
                "16 + 8 x 3)",
            )
        )
    if "image_newline" not in module:
        found.append(
            TargetBug(
                "llava-next N2",
                "no image_newline: the vector HF appends after each row of an image's grid is "
                "in no graph, so the checkpoint's image_newline fills no parameter",
                f"{_LLAVA}:185-232 (LLaVAModel holds no such parameter; preprocess_weights "
                "passes image_newline on unmapped)",
            )
        )
    if _ROW_CUMSUM_LLAVA.search(inspect.getsource(llava._LLaVAEmbeddingModel.forward)):
        found.append(
            TargetBug(
                "llava-next N3",
                "the embedding graph restarts its feature count on every row, so with two rows "
                "holding an image each, row 1 gets row 0's features (HF's masked_scatter fills "
                "placeholders over the whole batch)",
                f"{_LLAVA}:123 CumSum(mask, axis 1) in _LLaVAEmbeddingModel.forward (the line "
                "pixtral P5 names for mobius' Pixtral path)",
            )
        )
    return tuple(found)


_ROW_CUMSUM_LLAVA = re.compile(r"op\.CumSum\(\s*mask_int,\s*1\s*\)")


# Tower config keys of a tower over flattened patches with image_grid_thw (Qwen-VL's, GLM-4V's)
_GRID_TOWER_KEYS = ("depth", "num_heads", "temporal_patch_size", "spatial_merge_size")


def grid_tower_defects(
    model_type: str, module_class: type, config: Mapping[str, Any]
) -> tuple[TargetBug, ...]:
    """mobius registers GLM-4V's types (and others whose tower takes flattened patches with
    ``image_grid_thw``) to its LLaVA family's ``vision-language`` task, whose vision encoder
    takes square ``pixel_values [B, 3, S, S]`` and whose decoder takes 1-D positions: no graph
    it builds takes what HF's model does. Named from the registry entry, so a mobius that gives
    the type a class of its own is no longer blamed."""
    vision = _vision(config)
    if not all(isinstance(vision.get(k), int) for k in _GRID_TOWER_KEYS):
        return ()
    if not _registered_to(model_type, module_class, VLM_TASK):
        return ()
    return (
        TargetBug(
            "glm4v G1",
            f"mobius registers {model_type} to {module_class.__name__} with the "
            "vision-language task: a ViT over square pixel_values [batch, 3, size, size] and a "
            "decoder on 1-D positions, while HF's model takes flattened patches with "
            "image_grid_thw (a Conv3d patch embedding, learned positions resampled to each "
            "grid, a downsample convolution and a gated merger) and M-RoPE positions "
            "[3, batch, sequence]",
            f"mobius/_registry.py:{_registry_line(model_type)} {model_type!r}: "
            "ModelRegistration(LLaVAModel, task='vision-language'); mobius/tasks/"
            "_vision_language_3model.py:34-95 (static vision.image_size); tiny glm4v with "
            "GLM-4.1V's RoPE: 70 checkpoint tensors, 0 placed in 94 parameters (hybrid M1 too)",
        ),
    )


def perceiver_defects(
    model_type: str, module_class: type, config: Mapping[str, Any]
) -> tuple[TargetBug, ...]:
    """mobius registers idefics2, whose connector ends in a perceiver resampler, to its LLaVA
    family's ``LLaVAModel``: its vision encoder ends in a two-linear GELU projector and its
    embedding graph counts features per row. Named from the registry entry and the sources
    the defects live in, so a mobius that gives the type a class of its own, or fixes the
    part, is no longer blamed."""
    if not config.get("perceiver_config") or module_class.__name__ != "LLaVAModel":
        return ()
    if not _registered_to(model_type, module_class):
        return ()
    from mobius.models import llava

    found = []
    encoder = inspect.getsource(llava._LLaVAVisionEncoderModel)
    if "MLPMultiModalProjector" in encoder:
        found.append(
            TargetBug(
                "idefics2 I1",
                f"mobius registers {model_type} to LLaVAModel, whose vision encoder projects "
                "the tower's patches with MLPMultiModalProjector (linear_1, GELU, linear_2): "
                "HF's Idefics2Connector runs a gated modality projection (gate_proj, up_proj, "
                "down_proj with text_config.hidden_act) and then a perceiver resampler "
                "(resampler_n_latents learned latents through resampler_depth cross-attention "
                "layers over the patches and the latents, then an RMS norm), so no connector "
                "tensor fills a parameter and each image gives one row per patch instead of "
                "the resampler_n_latents rows the prompt holds placeholders for",
                f"mobius/_registry.py:{_registry_line(model_type)} {model_type!r}: "
                "ModelRegistration(LLaVAModel, task='vision-language'); mobius/models/"
                "llava.py:81-98 (MLPMultiModalProjector, mobius/components/_multimodal.py:"
                "92-117); no perceiver component in mobius/components; tiny default idefics2: "
                "35 connector tensors fill none of its 222 parameters, HF gives 5 rows an "
                "image (the tiny latents), the tower 16 patches",
            )
        )
    if _ROW_CUMSUM_LLAVA.search(inspect.getsource(llava._LLaVAEmbeddingModel.forward)):
        found.append(
            TargetBug(
                "idefics2 I2",
                "the embedding graph restarts its feature count on every row, so with images "
                "in two rows the second row gets the first row's features (HF's inputs_merger "
                "masked_scatter fills placeholders over the whole batch)",
                f"{_LLAVA}:123 CumSum(mask, axis 1) in _LLaVAEmbeddingModel.forward (the line "
                "pixtral P5 and llava-next N3 name)",
            )
        )
    return tuple(found)


def linear_patch_defects(
    model_type: str, module_class: type, config: Mapping[str, Any]
) -> tuple[TargetBug, ...]:
    """mobius registers Fuyu's type (no ``vision_config``: images enter as flattened patches
    through one linear, ``patch_size`` and ``num_channels`` on the composite config) to its
    LLaVA family's ``vision-language`` task, whose vision encoder is a ViT over square
    ``pixel_values`` and a projector, neither of which the model has. Named from the registry
    entry, so a mobius that gives the type a class of its own is no longer blamed."""
    from onboard.tiny_vision import LINEAR_PATCH_KEYS

    if config.get("vision_config") is not None or not all(
        isinstance(config.get(k), int) for k in LINEAR_PATCH_KEYS
    ):
        return ()
    if not _registered_to(model_type, module_class, VLM_TASK):
        return ()
    return (
        TargetBug(
            "fuyu F1",
            f"mobius registers {model_type} to {module_class.__name__} with the "
            "vision-language task: a ViT tower and a projector over square pixel_values "
            "(batch, 3, size, size), while HF's model has no tower and no projector: one "
            "linear (vision_embed_tokens) over image_patches (patches, patch_size x patch_size "
            "x channels), as its processor flattens them. With no vision_config the ViT has no "
            "sizes, and the module does not build",
            f"mobius/_registry.py:{_registry_line(model_type)} {model_type!r}: "
            "ModelRegistration(LLaVAModel, task='vision-language'); mobius/models/llava.py:86 "
            "builds VisionModel, whose mobius/components/_vision.py:260 asserts "
            "vision.hidden_size is not None; tiny default fuyu: AssertionError at build",
        ),
    )


def _registered_to(model_type: str, module_class: type, task: str | None = None) -> bool:
    """Whether mobius' registry gives ``model_type`` to ``module_class`` (with ``task``): a
    defect of the registered class is named only while the type still runs through it."""
    from mobius._registry import registry

    try:
        registration = registry.get_registration(model_type)
    except KeyError:
        return False
    same_task = task is None or registration.task == task
    return registration.module_class is module_class and same_task


def _registry_line(model_type: str) -> int | str:
    import mobius._registry as source

    lines = inspect.getsource(source).splitlines()
    entry = f'"{model_type}": ModelRegistration('
    return next((n for n, line in enumerate(lines, 1) if entry in line), "?")
