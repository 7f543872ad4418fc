"""Analyse a vision-language model: its text backbone as any decoder, then the vision side.

The text backbone is analysed on its own config (``text_config``, with the backbone's own HF
source), exactly as a causal LM of that type; the spec check proves it. The vision side is read
from a tiny VLM whose text side is that tiny backbone: the tower, the selection, the projector
and the merge, each by its reader, then proved together by ``check_vision``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from onboard.analysis.vision.check import check_vision
from onboard.analysis.vision.head import text_lm_evidence, with_text_lm_head
from onboard.analysis.vision.linear_patch import (
    linear_patch_at_real_sizes,
    read_linear_patch_vision,
)
from onboard.analysis.vision.mrope_read import require_sections_cover
from onboard.analysis.vision.other_paths import read_other_paths
from onboard.analysis.vision.outer_shuffle import unfold_outer_shuffle
from onboard.analysis.vision.parts import disk_prefixes, find_parts, published_aliases
from onboard.analysis.vision.projector import read_projector
from onboard.analysis.vision.qwen_read import read_qwen_vision
from onboard.analysis.vision.qwen_sizes import qwen_vl_at_real_sizes
from onboard.analysis.vision.select import read_select
from onboard.analysis.vision.sizes import at_real_sizes
from onboard.analysis.vision.tiles import (
    TilesReading,
    newline_on_disk,
    provisional_tiles,
    read_tiles,
    takes_tiles,
)
from onboard.analysis.vision.token_blocks import read_token_blocks
from onboard.analysis.vision.tower import read_tower
from onboard.analysis.vision.trace import scaled_before_merge, trace_vlm
from onboard.checkpoint import tensors
from onboard.classify import Classification, Kind
from onboard.hf_config import make_hf_config
from onboard.source import ModelSource, transformers_source_files
from onboard.spec import Delta, Evidence
from onboard.tiny import TinyConfig
from onboard.tiny_model import build_tiny_model, perturb, takes_image_rows
from onboard.tiny_vision import (
    LINEAR_PATCH_KEYS,
    image_token_key,
    is_linear_patch_config,
    is_qwen_vl_tower,
    shrink_vlm_config,
    square_side,
)
from onboard.vision import MergeSpec, PixtralTowerSpec, VisionSpec, VisionTowers

if TYPE_CHECKING:
    from onboard.analysis import Analysis

__all__ = ["analyse_vlm", "text_source"]

_IMAGE_TEXT = "AutoModelForImageTextToText"
_TEXT_KINDS = (Kind.DENSE, Kind.MOE, Kind.HYBRID, Kind.HYBRID_MOE)


def analyse_vlm(
    source: ModelSource,
    classification: Classification,
    analyse_text: Callable[[ModelSource, Classification], Analysis],
) -> Analysis:
    hf_config = make_hf_config(source.config)
    _require_sub_configs(source, hf_config)
    backbone = classification.text_backbone
    if backbone not in _TEXT_KINDS:
        from onboard.errors import UnsupportedFeatureError

        raise UnsupportedFeatureError(
            f"{source.model_type} is a vlm model whose text backbone is {backbone}: onboard "
            "reads vision-language models over dense and MoE decoders so far"
        )
    _require_causal_backbone(source, hf_config)
    _require_mrope_sections(source, hf_config)
    if is_qwen_vl_tower(_vision_config(hf_config)):
        require_sections_cover(source.model_type, hf_config.text_config)
    text_classification = Classification(backbone, classification.reasons[1:])
    text = analyse_text(text_source(source, hf_config), text_classification)
    tiny = shrink_vlm_config(source.config, text.tiny.config, hf_config)
    tiny_config = make_hf_config(tiny)
    model = perturb(build_tiny_model(tiny_config, auto_class=_IMAGE_TEXT))
    if is_linear_patch_config(tiny_config):
        vision, evidence, deltas = read_linear_patch_vision(model, tiny_config)
        if vision is not None:
            vision = linear_patch_at_real_sizes(vision, hf_config)
    elif is_qwen_vl_tower(tiny_config.vision_config):
        vision, evidence, deltas = read_qwen_vision(model, tiny_config)
        if vision is not None:
            vision = qwen_vl_at_real_sizes(vision, hf_config)
    else:
        vision, evidence, deltas = _read_vision(model, tiny_config)
        if vision is not None:
            vision = at_real_sizes(vision, tiny_config, hf_config)
    text_spec, head = _vlm_head(model, tiny_config, text.spec.text)
    text_evidence = tuple(e for e in text.spec.evidence if e[0] not in dict(head))
    text_evidence += text_lm_evidence(text.spec.evidence, tuple(dict(head)))
    vision = with_text_lm_head(vision, text.spec.text, text_spec)
    from onboard.analysis import Analysis

    spec = dataclasses.replace(
        text.spec,
        text=text_spec,
        source=dataclasses.replace(
            text.spec.source,
            model_type=source.model_type,
            architecture=source.architecture or type(model).__name__,
            hf_files=tuple((f.name, f.sha256) for f in source.hf_files) + text.spec.source.hf_files,
        ),
        kind=str(Kind.VLM),
        vision=vision,
        evidence=tuple(sorted(text_evidence + head + evidence)),
        unresolved=text.spec.unresolved + deltas,
    )
    return Analysis(spec, classification, TinyConfig(tiny, text.tiny.layer_indices), text.probe)


def _vlm_head(model: Any, config: Any, text: Any) -> tuple[Any, tuple]:
    """The text spec as the VLM's own head computes the logits (see ``head``); a backbone
    that scales and caps no logits has nothing to decide (and Qwen-VL no separate projector to
    find)."""
    import torch

    if text.scale_at("logits") is None and text.final_logit_softcap is None:
        return text, ()

    from onboard.analysis.vision.head import vlm_head

    prompt = torch.arange(1, 8)[None] % config.text_config.vocab_size
    return vlm_head(model, find_parts(model, config), prompt, text)


def _require_sub_configs(source: ModelSource, hf_config: Any) -> None:
    from transformers import PretrainedConfig

    plain = [
        key
        for key in ("text_config", "vision_config")
        if getattr(hf_config, key, None) is not None
        and not isinstance(getattr(hf_config, key), PretrainedConfig)
    ]
    if plain:  # a key the config class does not know stays what config.json holds
        from onboard.errors import InvalidConfigError

        raise InvalidConfigError(
            f"config.json has {' and '.join(plain)}, which {type(hf_config).__name__} does not "
            f"know: {source.model_type} is not a vision-language model type in transformers"
        )
    missing = [
        key for key in ("text_config", "vision_config") if getattr(hf_config, key, None) is None
    ]
    if missing == ["vision_config"] and is_linear_patch_config(hf_config):
        return  # patches enter through no encoder (Fuyu): read by linear_patch.py
    if missing:
        from onboard.errors import UnsupportedFeatureError

        raise UnsupportedFeatureError(
            f"{source.model_type} is a vlm model without {' or '.join(missing)} "
            f"({type(hf_config).__name__}): onboard reads VLMs with a text and a vision "
            "sub-config, or a text sub-config and the patch keys of one linear patch embedding "
            f"({', '.join(LINEAR_PATCH_KEYS)}), so far"
        )


def _vision_config(hf_config: Any) -> Any:
    """The tower's config; None for a VLM without one (Fuyu's linear patch embedding)."""
    return getattr(hf_config, "vision_config", None)


def _require_causal_backbone(source: ModelSource, hf_config: Any) -> None:
    """The backbone is analysed as a causal LM: one that exists only inside its VLM (Qwen2.5-VL's
    text model, with its multimodal RoPE) is viewed as its base model with a head
    (``backbone.py``); one without even a base model is refused by name."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from onboard.analysis.vision.backbone import register_causal_view

    text_type = hf_config.text_config.model_type
    if text_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not register_causal_view(
        hf_config.text_config
    ):
        from onboard.errors import UnsupportedFeatureError

        raise UnsupportedFeatureError(
            f"{source.model_type}'s text backbone {text_type} has no causal-LM class in "
            "transformers (it runs only inside its VLM): onboard reads VLMs whose text backbone "
            "is a causal LM so far"
        )


def _require_mrope_sections(source: ModelSource, hf_config: Any) -> None:
    """A Qwen-VL config without ``mrope_section`` leaves the sections to a fallback inside HF's
    rotary module: read from that line when HF writes one there (Qwen2-VL's and Qwen3-VL's
    default configs set none), refused at the rotary module otherwise."""
    if not is_qwen_vl_tower(_vision_config(hf_config)):
        return
    rope = getattr(hf_config.text_config, "rope_parameters", None) or {}
    if rope.get("mrope_section"):
        return
    from onboard.analysis.vision.mrope_read import hf_mrope_default

    if hf_mrope_default(hf_config.text_config.model_type) is not None:
        return
    from onboard.errors import UnsupportedFeatureError

    raise UnsupportedFeatureError(
        f"{source.model_type}'s text_config.rope_parameters has no mrope_section and HF's "
        f"{hf_config.text_config.model_type} rotary module names no fallback onboard can "
        "read; set the checkpoint's mrope_section in config.json"
    )


def text_source(source: ModelSource, hf_config: Any) -> ModelSource:
    """The text backbone as a causal LM source: its config (the composite's flags that HF's
    text config inherits filled in) and the backbone type's own HF source."""
    # A flat config (Qwen2.5-VL's: the text keys at the top) has the text config HF built from it
    text = dict(source.config.get("text_config") or hf_config.text_config.to_diff_dict())
    text.setdefault("model_type", hf_config.text_config.model_type)
    _fill_mrope_fallback(text, hf_config)
    if "tie_word_embeddings" in source.config:
        text.setdefault("tie_word_embeddings", source.config["tie_word_embeddings"])
    return dataclasses.replace(
        source, config=text, hf_files=transformers_source_files(text["model_type"])
    )


def _fill_mrope_fallback(text: dict[str, Any], hf_config: Any) -> None:
    """Sections HF's rotary module falls back to, written where the config would hold them, so
    the tiny backbone (whose heads are narrower) gets them shrunk like set ones; the vision spec
    still says they are HF's fallback (``MRopeSpec.default_at``)."""
    if not is_qwen_vl_tower(_vision_config(hf_config)):
        return
    from onboard.analysis.vision.mrope_read import hf_mrope_default
    from onboard.tiny import rope_parameters

    rope = rope_parameters(text)
    if rope.get("mrope_section"):
        return
    default = hf_mrope_default(hf_config.text_config.model_type)
    if default is None:
        return
    if not rope:
        text["rope_parameters"] = rope = dict(hf_config.text_config.rope_parameters or {})
    else:
        text[next(k for k in ("rope_parameters", "rope_scaling") if text.get(k) is rope)] = rope = (
            dict(rope)
        )
    rope["mrope_section"] = list(default[0])


def _did_not_run(model: Any, exc: Exception) -> Delta:
    from onboard.analysis.probe import source_location

    base = model.base_model
    where = source_location(type(base).get_image_features) or type(base).__name__
    return Delta(
        f"{type(model).__name__} does not run on one image per row of pixel_values "
        "[images, channels, height, width] with its placeholders in the prompt",
        where,
        f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}; onboard "
        "reads VLMs that take plain image batches or rows of full tiles (Idefics 3) so far "
        "(image sizes behind a Pixtral tower, tiles with grid pinpoints)",
    )


def _rows_evidence(model: Any, rows: bool) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    if not rows:
        return ()
    from onboard.analysis.probe import source_location

    where = source_location(type(model.base_model).get_image_features) or "get_image_features"
    return (
        (
            "vision.image_rows",
            (
                Evidence(
                    "probe",
                    where,
                    "pixel_values [rows, images per row, channels, height, width]; all-zero "
                    "images are padding; without pixel_attention_mask every patch is real",
                ),
            ),
        ),
    )


def _read_vision(
    model: Any, config: Any
) -> tuple[VisionSpec | None, tuple[tuple[str, tuple[Evidence, ...]], ...], tuple[Delta, ...]]:
    """The vision spec of the tiny ``model`` (tiny sizes: the check runs it on that model) with
    its evidence, or None and the deltas that say what is not read."""
    parts = find_parts(model, config)
    tower_module = parts.module(model, "tower")
    tower_files = transformers_source_files(config.vision_config.model_type)
    tower = read_tower(tower_module, config.vision_config, tower_files)
    if tower.spec is None:
        return None, (), tower.deltas
    post = tower.spec.name_of("post_norm") if tower.spec.post_norm else None
    dynamic = isinstance(tower.spec, PixtralTowerSpec)
    vision_config = config.vision_config
    tiles = provisional_tiles(model, config) if not dynamic and takes_tiles(model, config) else None
    try:
        rows = (
            not dynamic
            and tiles is None
            and takes_image_rows(
                model,
                vision_config.num_channels,
                square_side(vision_config.image_size, "image_size"),
            )
        )
        trace = trace_vlm(model, parts, config, post, dynamic, rows, tiles)
        received = trace.projector_in
        trace = unfold_outer_shuffle(trace, config, tower.spec.class_token)
    except Exception as exc:  # the model wants inputs a plain image batch does not give
        return None, tower.evidence, (_did_not_run(model, exc),)
    from onboard.analysis.probe import source_location

    selecting = source_location(type(model.base_model).get_image_features)
    select = read_select(
        trace, config, tower.spec.class_token, selecting or "get_image_features", packed=dynamic
    )
    files = transformers_source_files(config.model_type)
    projector = read_projector(
        parts.projector,
        parts.module(model, "projector"),
        (received, *trace.projector_extra),
        config,
        files,
        features=None if trace.projector_in is received else trace.projector_in,
    )
    deltas = select.deltas + projector.deltas
    tiling = read_tiles(model, parts, trace, tiles) if tiles is not None else TilesReading(None)
    deltas += tiling.deltas
    if select.spec is None or projector.spec is None or (tiles and tiling.spec is None):
        return None, tower.evidence, deltas
    key = image_token_key(config)
    language_model = parts.module(model, "language_model")
    blocks = read_token_blocks(model, language_model, config, trace)
    deltas += (blocks.delta,) if blocks.delta else ()
    merge = MergeSpec(
        image_token_id=config.image_token_id,
        image_token_key=key,
        scaled_before_merge=scaled_before_merge(language_model, trace),
        token_blocks=blocks.rule,
    )
    saved = tensors(model)
    others = read_other_paths(model, parts, saved)
    deltas += others.deltas
    prefixes = disk_prefixes(model, parts, saved)
    if tiling.spec is not None and tiling.spec.newline:
        prefixes += (("newline", newline_on_disk(model, tiling.spec, saved)),)
    vision_prefixes = tuple(p for r, p in prefixes if r in ("tower", "projector", "newline"))
    vision = VisionSpec(
        towers=VisionTowers().replace(tower.spec),
        select=select.spec,
        projector=projector.spec,
        merge=merge,
        prefixes=prefixes,
        published_aliases=published_aliases(tower_module, dict(prefixes)["tower"]),
        text_model_type=config.text_config.model_type,
        tensors=tuple(
            sorted((n, tuple(t.shape)) for n, t in saved.items() if n.startswith(vision_prefixes))
        ),
        image_rows=rows,
        tiles=tiling.spec,
        other_paths=others.parts,
    )
    evidence = (
        *tower.evidence,
        *_rows_evidence(model, rows),
        *tiling.evidence,
        *others.evidence,
        *select.evidence,
        ("vision.projector", projector.evidence),
        (
            "vision.merge.image_token_id",
            (Evidence("config", f"config.json:{key}", "image placeholder token"),),
        ),
        (
            "vision.merge.token_blocks",
            blocks.evidence or (Evidence("probe", "token_type_ids", "the mask stays causal"),),
        ),
    )
    checked = check_vision(vision, model, parts, trace)
    return vision, tuple(evidence), deltas + checked
