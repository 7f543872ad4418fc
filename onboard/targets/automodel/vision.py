"""The vision side of a generated AutoModel VLM: HF's tower and projector beside generated text.

AutoModel's own LLaVA-shaped VLM (``Mistral3ForConditionalGeneration`` in 0.7.0's ``mistral4``)
is an ``nn.Module`` holding ``model.vision_tower`` (HF's, from ``AutoModel.from_config``),
``model.multi_modal_projector`` and ``model.language_model`` (its own text backbone), with
``lm_head`` beside ``model``. The generated class has that shape: the tower and the projector are
HF's modules, built from the HF config classes, and the text backbone is what the dense generator
writes for the backbone's own model type. The generated code owns the feature selection, the
merge and the state-dict adapter, which routes each checkpoint prefix to its part.

A Qwen-VL model (flattened patches with ``image_grid_thw``, M-RoPE, DeepStack) is the other
shape: the generated class subclasses HF's VLM whole and swaps only its text model
(``vision_qwen.py``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from dataclasses import dataclass

from onboard.analysis.vision.token_blocks import BLOCKS_LINE
from onboard.naming import class_prefix
from onboard.spec import ArchitectureSpec, Evidence
from onboard.targets.automodel.vision_qwen import (
    QwenVLDesign,
    defined_at,
    design_qwen_vl,
    qwen_vl_blockers,
)
from onboard.vision import TEXT_LM_EVIDENCE

# The parts' attributes, as AutoModel's Mistral3ForConditionalGeneration names them.
TOWER, PROJECTOR, LANGUAGE_MODEL = "vision_tower", "multi_modal_projector", "language_model"


@dataclass(frozen=True)
class VisionDesign:
    """How the generated VLM class builds and runs its vision side, and where HF does so."""

    prefix: str  # Llava: LlavaForConditionalGeneration, LlavaModel, LlavaStateDictAdapter
    hf_module: str  # transformers.models.llava.modeling_llava
    config: str  # the composite config class (LlavaConfig)
    projector_class: str  # HF's projector, reused as it is
    feature_layers: str  # Python over ``self.config`` (an int or a list), or a list literal
    drop_class_token: str  # Python over ``self.config``, or True / False when HF always does
    image_token: str  # Python over ``self.config``: the placeholder's token id
    # (checkpoint prefix, native prefix), text first; every checkpoint key matches one
    routes: tuple[tuple[str, str], ...]
    # (published prefix, checkpoint prefix): older checkpoints' names ``from_hf`` also reads
    aliases: tuple[tuple[str, str], ...]
    ties: bool  # HF's VLM ties lm_head to the text embeddings when config.tie_word_embeddings
    where: tuple[tuple[str, str], ...]  # role -> modeling_x.py:N, for the generated comments
    # Images of any size (Pixtral): the tower crops each padded image to its ``image_sizes``
    # entry and returns every image's patches as one sequence ``[1, patches, hidden]``
    tower_sizes: bool = False
    # The projector takes ``image_sizes`` too (Mistral 3's patch merger cuts each image's grid)
    projector_sizes: bool = False
    # AutoModel's own Mistral 3 applies its Pixtral forward backport to HF's tower (the image
    # boundaries FlashAttention needs, on the transformers releases it names)
    pixtral_backport: bool = False
    # A Qwen-VL model: the generated class subclasses HF's VLM (its tower, mergers and forward)
    # and swaps in the generated text model; the LLaVA-only fields above are then unused
    qwen: QwenVLDesign | None = None

    @property
    def model_class(self) -> str:
        return f"{self.prefix}ForConditionalGeneration"

    @property
    def base_class(self) -> str:
        return f"{self.prefix}Model"

    @property
    def adapter_class(self) -> str:
        return f"{self.prefix}StateDictAdapter"

    def at(self, role: str) -> str:
        return dict(self.where).get(role, "")


def text_view(spec: ArchitectureSpec, probe_class: str) -> ArchitectureSpec:
    """The VLM's text backbone as the dense generator reads a causal LM: its own model type,
    architecture and HF source files (the analysis already described it on its own config),
    and the logits scale and soft-cap its own causal LM applies where the VLM's head does not."""
    vision = spec.vision
    assert vision is not None
    from onboard.source import transformers_source_files

    own = {f.name for f in transformers_source_files(vision.text_model_type)}
    source = dataclasses.replace(
        spec.source,
        model_type=vision.text_model_type,
        architecture=probe_class,
        hf_files=tuple((n, h) for n, h in spec.source.hf_files if n in own),
    )
    kind = "moe" if spec.text.moe is not None else "dense"
    text = dataclasses.replace(
        spec.text,
        scales=spec.text.scales + vision.text_lm_scales,
        final_logit_softcap=vision.text_lm_softcap or spec.text.final_logit_softcap,
    )
    return dataclasses.replace(
        spec,
        source=source,
        kind=kind,
        text=text,
        vision=None,
        evidence=_text_lm_evidence(spec.evidence),
    )


def _text_lm_evidence(
    evidence: tuple[tuple[str, tuple[Evidence, ...]], ...],
) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    """The evidence with the causal LM's own (``vision.text_lm.*``) back under ``text.*``."""
    own = {
        f"text.{p.removeprefix(TEXT_LM_EVIDENCE)}": e
        for p, e in evidence
        if p.startswith(TEXT_LM_EVIDENCE)
    }
    kept = tuple((p, e) for p, e in evidence if p not in own and not p.startswith(TEXT_LM_EVIDENCE))
    return tuple(sorted(kept + tuple(own.items())))


def vision_blockers(spec: ArchitectureSpec) -> list[str]:
    """What the generated VLM class cannot do for ``spec``, each with where HF does it."""
    vision = spec.vision
    if vision is None:
        return []
    module = _hf_module(spec)
    found = []
    if spec.text.moe is not None:
        found.append(
            f"a {vision.text_model_type} text backbone with experts: the VLM adapter routes "
            "prefixes only, around a dense text backbone"
        )
    if vision.towers.kind == "qwen_vl":
        return found + qwen_vl_blockers(vision, module)
    if vision.towers.kind == "linear_patch":  # nothing below applies to a model without one
        where = defined_at(module, "get_image_features") or "vision.tower"
        found.append(
            f"no vision tower: images enter as flattened image_patches through one linear "
            f"({vision.tower.name_of('patch')}, {where}): the generated VLM holds HF's tower "
            "and projector and passes pixel_values"
        )
        return found
    if vision.towers.kind not in ("vit", "pixtral"):
        found.append(
            f"a {vision.towers.kind} tower (vision.tower): the generated VLM passes "
            "pixel_values of whole images, not flattened patches with image_grid_thw"
        )
    if vision.image_rows:
        where = defined_at(module, "get_image_features")
        found.append(
            "pixel_values as rows of images padded with all-zero images "
            f"({where or 'vision.image_rows'}): the generated VLM passes one image per row of "
            "pixel_values [images, channels, height, width]"
        )
    if any(step.outside for step in vision.projector.steps):
        where = defined_at(module, "get_image_features")
        found.append(
            "a pixel shuffle between the tower and the projector module "
            f"({where or 'vision.projector'}): the generated VLM hands the tower's features to "
            "HF's projector as they are"
        )
    if vision.tiles is not None:
        where = defined_at(module, "pack_image_features")
        found.append(
            "tiles of any resolution packed into each image's grid with image_sizes "
            f"({where or 'vision.tiles'}): the generated VLM passes one image per row of "
            "pixel_values [images, channels, height, width]"
        )
    if vision.merge.token_blocks:
        where = _line_in(module, BLOCKS_LINE)
        what = {
            "images": "image tokens that attend to each other both ways when token_type_ids "
            "mark them",
            "prefix": "a bidirectional prefix: the tokens token_type_ids type 0 (the image and "
            "the prompt) attend to each other both ways",
        }[vision.merge.token_blocks]
        found.append(
            f"{what} ({where or 'vision.merge.token_blocks'}): the generated text model's mask "
            "is causal, so the generated VLM would be wrong on every image prompt"
        )
    if vision.merge.scaled_before_merge:
        pattern = r"class \w*ScaledWordEmbedding"
        where = _line_in(_text_module(spec), pattern) or _line_in(module, pattern)
        found.append(
            "text embeddings scaled inside the embedding before the merge "
            f"({where or 'vision.merge.scaled_before_merge'}): the generated text model scales "
            "what it is given"
        )
    if vision.select.post_norm:
        where = defined_at(module, "get_image_features")
        found.append(
            f"features read after the tower's post norm ({where or 'vision.select.post_norm'}): "
            "the generated selection reads hidden_states[layer]"
        )
    for other in vision.other_paths:
        found.append(
            f"{other.part}, read for {other.path} only (vision.other_paths): the generated VLM "
            "holds the image path and its adapter maps that path's tensors"
        )
    if module is not None and _tower_line(module) is None:
        found.append(
            f"a vision tower not built as self.{TOWER} = AutoModel.from_config("
            f"config.vision_config) in {_file(module)}: the generated VLM reuses HF's tower that "
            "way"
        )
    if module is not None and _projector(module, vision.projector.name) is None:
        found.append(
            f"no projector class for self.{vision.projector.name} in {_file(module)}: the "
            "generated VLM reuses HF's projector"
        )
    return found


def design_vision(spec: ArchitectureSpec, ties: bool) -> VisionDesign:
    vision = spec.vision
    assert vision is not None
    module = _hf_module(spec)
    assert module is not None
    if vision.towers.kind == "qwen_vl":
        return _qwen_design(spec, module, ties)
    projector = _projector(module, vision.projector.name)
    assert projector is not None
    select = vision.select
    layers = f"self.config.{select.layer_key}" if select.layer_key else repr(list(select.layers))
    drop = (
        f'self.config.{select.strategy_key} == "default"'
        if select.strategy_key
        else repr(select.drop_class_token)
    )
    prefixes = dict(vision.prefixes)
    routes = (
        (prefixes["text"], f"model.{LANGUAGE_MODEL}."),
        (prefixes.get("lm_head") or _head_prefix(spec.model_type), "lm_head."),
        (prefixes["tower"], f"model.{TOWER}."),
        (prefixes["projector"], f"model.{PROJECTOR}."),
    )
    base = module.__name__.rsplit(".", 1)[-1]
    where = {
        "tower": f"{base}.py:{_tower_line(module)}",
        "projector": f"{base}.py:{projector[1]}",
        "select": _line_of(module, "hidden_states[vision_feature_layer]")
        or defined_at(module, "get_image_features"),
        "merge": _line_of(module, "masked_scatter") or "",
    }
    return VisionDesign(
        prefix=class_prefix(spec.source.architecture, spec.model_type),
        hf_module=module.__name__,
        config=_config_class(spec.model_type),
        projector_class=projector[0],
        feature_layers=layers,
        drop_class_token=drop,
        image_token=f"self.config.{vision.merge.image_token_attr}",
        routes=routes,
        aliases=vision.published_aliases,
        ties=ties,
        where=tuple((k, v) for k, v in where.items() if v),
        tower_sizes=vision.towers.kind == "pixtral",
        projector_sizes=any(step.op == "patch_merge" for step in vision.projector.steps),
        pixtral_backport=vision.towers.kind == "pixtral",
    )


def _qwen_design(spec: ArchitectureSpec, module, ties: bool) -> VisionDesign:
    """HF's whole VLM but its text model: the routes keep HF's in-memory names (the tower's
    merger, and DeepStack's, under the tower's prefix)."""
    vision = spec.vision
    assert vision is not None
    qwen = design_qwen_vl(vision, module, spec.source.architecture)
    prefixes = dict(vision.prefixes)
    routes = (
        (prefixes["text"], f"model.{LANGUAGE_MODEL}."),
        (prefixes.get("lm_head") or _head_prefix(spec.model_type), "lm_head."),
        (prefixes["tower"], "model.visual."),
    )
    return VisionDesign(
        prefix=class_prefix(spec.source.architecture, spec.model_type),
        hf_module=module.__name__,
        config=_config_class(spec.model_type),
        projector_class="",
        feature_layers="",
        drop_class_token="False",
        image_token=f"self.config.{vision.merge.image_token_attr}",
        routes=routes,
        aliases=vision.published_aliases,
        ties=ties,
        where=qwen.where,
        qwen=qwen,
    )


def _head_prefix(model_type: str) -> str:
    """Where a checkpoint of ``model_type`` keeps an untied head, when the tiny one was tied (so
    saved none): the prefix transformers' conversion mapping renames to ``lm_head``."""
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping

    for transform in get_checkpoint_conversion_mapping(model_type) or ():
        targets = getattr(transform, "target_patterns", ())
        for source, target in zip(getattr(transform, "source_patterns", ()), targets, strict=False):
            if target == "lm_head" and re.fullmatch(r"\^[\w.]+", source):
                return source.removeprefix("^").replace("\\.", ".") + "."
    return "lm_head."


def hf_ties(spec: ArchitectureSpec) -> bool:
    """Whether HF's VLM class ties its head to the text embeddings (``_tied_weights_keys``)."""
    module = _hf_module(spec)
    cls = getattr(module, spec.source.architecture, None)
    return bool(getattr(cls, "_tied_weights_keys", None))


def _hf_module(spec: ArchitectureSpec):
    name = next((n for n, _ in spec.source.hf_files if n.startswith("modeling_")), None)
    if name is None:
        return None
    package = name.removeprefix("modeling_").removesuffix(".py")
    try:
        return importlib.import_module(f"transformers.models.{package}.{name.removesuffix('.py')}")
    except ImportError:
        return None


def _text_module(spec: ArchitectureSpec):
    """HF's modeling module of the text backbone."""
    vision = spec.vision
    assert vision is not None
    name = f"modeling_{vision.text_model_type}"
    try:
        return importlib.import_module(f"transformers.models.{vision.text_model_type}.{name}")
    except ImportError:
        return None


def _config_class(model_type: str) -> str:
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type].__name__


def _file(module) -> str:
    return f"{module.__name__.rsplit('.', 1)[-1]}.py"


def _source(module) -> list[str]:
    try:
        return inspect.getsource(module).splitlines()
    except (OSError, TypeError):
        return []


def _tower_line(module) -> int | None:
    pattern = re.compile(
        rf"self\.{TOWER}\s*=\s*AutoModel\.from_config\((config=)?config\.vision_config\)"
    )
    return next((n for n, line in enumerate(_source(module), 1) if pattern.search(line)), None)


def _projector(module, attribute: str) -> tuple[str, int] | None:
    """HF's class for ``self.<attribute>`` and the line that builds it from the config."""
    pattern = re.compile(rf"self\.{re.escape(attribute)}\s*=\s*(\w+)\(config\)")
    for number, line in enumerate(_source(module), 1):
        found = pattern.search(line)
        if found and hasattr(module, found.group(1)):
            return found.group(1), number
    return None


def _line_of(module, needle: str) -> str:
    number = next((n for n, line in enumerate(_source(module), 1) if needle in line), None)
    return f"{_file(module)}:{number}" if number else ""


def _line_in(module, pattern: str) -> str:
    if module is None:
        return ""
    regex = re.compile(pattern)
    number = next((n for n, line in enumerate(_source(module), 1) if regex.search(line)), None)
    return f"{_file(module)}:{number}" if number else ""
