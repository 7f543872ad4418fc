"""From a ``ModelSource`` to an ``ArchitectureSpec``: classify, shrink, probe, read evidence."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onboard.analysis.decoder import DecoderSpecBuilder
from onboard.analysis.layer_stacks import read_recurrence, tiny_recurrence
from onboard.analysis.layers import layer_signatures
from onboard.analysis.layout import LayoutView, checkpoint_renames, llama_view, prefix_renames
from onboard.analysis.load_renames import read_load_renames, renamed
from onboard.analysis.load_splits import read_load_splits, split_shapes
from onboard.analysis.probe import Probe, TinyModelRunError, probe_model
from onboard.analysis.spec_check import check_spec
from onboard.checkpoint import parameter_shapes
from onboard.classify import Classification, Kind, classify, require_in_scope
from onboard.config_pins import validator_pins
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import check_sizes, make_hf_config
from onboard.remote_idioms import notes_of
from onboard.source import ModelSource
from onboard.spec import (
    ArchitectureSpec,
    Delta,
    FlagSpecs,
    SourceRef,
    StackRecurrenceSpec,
    WeightSpec,
)
from onboard.tiny import (
    PER_LAYER_CONFIG,
    TINY_HEADS,
    TINY_HEADS_FALLBACK,
    TinyConfig,
    multiplier_defaults,
    shrink_config,
)
from onboard.tiny_model import build_tiny_model, perturb
from onboard.tiny_patterns import RESTATED_LAYER_PATTERNS

if TYPE_CHECKING:
    from onboard.analysis.similarity import Similarity

__all__ = ["Analysis", "analyse"]

# Decoders: the readers read attention, the MLP and the norms on an attention layer, each
# recurrent mixer on a layer of its kind (a pure state-space model has only those).
ANALYSED_KINDS = (Kind.DENSE, Kind.MOE, Kind.HYBRID, Kind.HYBRID_MOE, Kind.SSM)


@dataclass(frozen=True)
class Analysis:
    """Everything later stages need: the spec plus the tiny config the parity run reuses.

    ``probe`` is the measured tiny model; None for remote code, which is read, not run.
    ``review`` (remote code only) compares the source with transformers' closest classes.
    """

    spec: ArchitectureSpec
    classification: Classification
    tiny: TinyConfig
    probe: Probe | None
    review: Similarity | None = None
    # The same architecture with its flags flipped: all of them, then each alone
    variants: tuple[Analysis, ...] = ()
    # On a variant: the analysed spec and each flag's spec alone, for code that reads the flags
    flagged_from: FlagSpecs | None = None
    # What the tiny build repaired in a checkpoint's own code (remote_idioms), one line each
    build_notes: tuple[str, ...] = ()


def analyse(source: ModelSource, *, run_remote_code: bool = False) -> Analysis:
    """``run_remote_code``: the checkpoint's own classes are registered (trusted, hashes
    checked), so remote code is built and probed like a transformers model; without it,
    remote code is read as text."""
    modeling = source.hf_file("modeling_") or source.remote_file("modeling_")
    classification = classify(source.config, modeling.text if modeling else None)
    require_in_scope(classification)
    if source.is_remote_code:
        from onboard.analysis.remote import analyse_remote, analyse_remote_classes

        if run_remote_code:
            return analyse_remote_classes(source, classification, _analyse_decoder)
        return analyse_remote(source, classification)
    if classification.kind == Kind.VLM:
        from onboard.analysis.vision import analyse_vlm

        return analyse_vlm(source, classification, _analyse_decoder)
    return _analyse_decoder(source, classification)


def _analyse_decoder(source: ModelSource, classification: Classification) -> Analysis:
    """A decoder-only model (dense, MoE, hybrid), or a VLM's text backbone."""
    if classification.kind not in ANALYSED_KINDS:
        raise UnsupportedFeatureError(
            f"{source.model_type} is a {classification.kind} model "
            f"({'; '.join(classification.reasons)}); onboard reads dense, MoE and hybrid "
            "decoders (attention beside recurrent mixers) and vision-language models so far"
        )
    check_sizes(source.config, required=False)
    _refuse_per_layer_overrides(source.config)
    hf_config = make_hf_config(source.config)
    attention = classification.kind != Kind.SSM
    check_sizes(hf_config, attention=attention)
    _refuse_derived_pattern(hf_config, source, classification)
    real_layers = layer_signatures(hf_config)
    layer_types = _list_or_none(getattr(hf_config, "layer_types", None))
    config = {**multiplier_defaults(hf_config), **source.config}
    aliases = dict(getattr(type(hf_config), "attribute_map", {}))
    pinned = validator_pins(type(hf_config))
    probed = functools.partial(
        _probed,
        config,
        layer_types,
        real_layers,
        attention=attention,
        aliases=aliases,
        pinned=pinned,
    )
    try:
        tiny, tiny_config, hf_model, layout, probe = probed()
    except TinyModelRunError:  # CodeGen splits its heads into 4 groups: 6 do not divide
        tiny, tiny_config, hf_model, layout, probe = probed(tiny_heads=TINY_HEADS_FALLBACK)
    recurrence = read_recurrence(hf_model, source.hf_files or source.remote_files)
    if recurrence is not None:  # HRM: one layer a stack, cycles that show a miscount
        tiny, tiny_config, hf_model, layout, probe = probed(recurrence=recurrence.spec)
    model = layout.model if layout else hf_model
    builder = DecoderSpecBuilder(
        hf_config,
        tiny_config,
        probe,
        source.hf_files or source.remote_files,
        model=model,
        real_layers=real_layers,
        blocks=layout.blocks if layout else None,
        recurrence=recurrence,
    )
    text = builder.build()
    unresolved = tuple(builder.deltas) + _tiny_keeps_layers(tiny_config, tiny, real_layers)
    if not unresolved:  # an incomplete spec cannot be run; otherwise prove it computes HF's model
        unresolved = check_spec(text, perturb(model), tiny_config)
    spec = ArchitectureSpec(
        source=_source_ref(source, probe),
        kind=str(classification.kind),
        text=text,
        weights=WeightSpec(
            tensors=probe.disk_tensors,
            tied_keys=("lm_head.weight",) if text.tie_word_embeddings else (),
            renames=_weight_renames(layout, probe, hf_model),
            base_prefix=layout.base_prefix if layout else "",
            top_level=_top_level(layout, probe.disk_tensors),
            splits=probe.load_splits,
        ),
        evidence=builder.log.freeze(),
        unresolved=unresolved,
    )
    return Analysis(spec, classification, tiny, probe, build_notes=notes_of(hf_model))


def _probed(
    config: dict[str, Any],
    layer_types: list[str] | None,
    real_layers: list[str],
    *,
    attention: bool = True,
    tiny_heads: int = TINY_HEADS,
    aliases: dict[str, str] | None = None,
    pinned: dict[str, Any] | None = None,
    recurrence: StackRecurrenceSpec | None = None,
) -> tuple[TinyConfig, Any, Any, LayoutView | None, Probe]:
    """The tiny config, its HF config and model, the model's Llama-layout view, the probe.
    Experts kept as a ModuleList of per-expert MLPs are read as stacked experts."""
    from onboard.analysis.expert_lists import stack_expert_lists

    tiny = shrink_config(
        config,
        layer_types,
        real_layers,
        tiny_heads=tiny_heads,
        attention=attention,
        aliases=aliases,
        pinned=pinned,
    )
    if recurrence is not None:
        tiny = dataclasses.replace(tiny, config=tiny_recurrence(tiny.config, recurrence))
    tiny_config = make_hf_config(tiny.config)
    hf_model = stack_expert_lists(build_tiny_model(tiny_config))
    layout = llama_view(hf_model)
    model = layout.model if layout else hf_model
    probe = probe_model(model, disk_model=hf_model)
    splits = read_load_splits(hf_model, probe.disk_tensors)
    if splits:  # the fused tensors as transformers cuts them (HRM's attn.gqkv_proj)
        cut = split_shapes(probe.disk_tensors, splits)
        probe = dataclasses.replace(probe, disk_tensors=cut, load_splits=splits)
    saved = probe.disk_tensors
    load = read_load_renames(hf_model, model, saved, _weight_renames(layout, probe, hf_model))
    if load:  # the saved names as transformers reads them (EXAONE's transformer.h -> model.layers)
        names = tuple(sorted((renamed(n, load), shape) for n, shape in saved))
        probe = dataclasses.replace(probe, disk_tensors=names, load_renames=load)
    return tiny, tiny_config, hf_model, layout, probe


def _weight_renames(
    layout: LayoutView | None, probe: Probe, hf_model: Any
) -> tuple[tuple[str, str], ...]:
    """Checkpoint names -> the Llama layout's, in the order they apply: transformers' own
    renames on load (EXAONE), a prefix saved under another name (NemotronH's backbone), the
    view's renames, renamed top-level modules."""
    memory = parameter_shapes(hf_model)
    return (
        probe.load_renames
        + prefix_renames(probe.disk_tensors, memory)
        + (layout.renames if layout else ())
        + checkpoint_renames(probe.disk_tensors, memory)
    )


def _top_level(
    layout: LayoutView | None, disk: tuple[tuple[str, tuple[int, ...]], ...]
) -> tuple[str, ...]:
    """The causal LM's own module names, in memory and on disk (GPT-NeoX saves its head as
    embed_out): names that start with one never lack the base prefix."""
    if layout is None:
        return ()
    return tuple(sorted({*layout.top_level, *(name.split(".")[0] for name, _ in disk)}))


def _refuse_per_layer_overrides(config: dict[str, Any]) -> None:
    """Gemma 4 overrides attributes layer by layer; the spec holds one value per attribute."""
    table = config.get(PER_LAYER_CONFIG)
    if not isinstance(table, dict) or not table:
        return
    attributes = sorted({k for v in table.values() if isinstance(v, dict) for k in v})
    raise UnsupportedFeatureError(
        f"per-layer attribute overrides at config.json:{PER_LAYER_CONFIG} "
        f"({', '.join(attributes)} in layers {', '.join(sorted(table))}): onboard's spec holds "
        "one value per attribute"
    )


def _refuse_derived_pattern(
    hf_config: Any, source: ModelSource, classification: Classification
) -> None:
    """A hybrid whose layer kinds the config class derives from other keys (read-only
    ``layer_types`` / ``layers_block_type``) has no list the tiny config can keep: only the
    types whose keys shrink_config restates (Bamba's attn_layer_indices, Jamba's periods and
    offsets ...) get past here."""
    if (
        classification.kind in (Kind.DENSE, Kind.MOE)
        or source.model_type in RESTATED_LAYER_PATTERNS
    ):
        return
    cls = type(hf_config)
    derived = [
        name
        for name in ("layer_types", "layers_block_type")
        if isinstance(found := getattr(cls, name, None), property) and found.fset is None
    ]
    if not derived:
        return
    raise UnsupportedFeatureError(
        f"{source.model_type} is a {classification.kind} model "
        f"({'; '.join(classification.reasons)}) whose layer pattern onboard cannot shrink to a "
        f"tiny model yet: {cls.__name__}.{derived[0]} is derived, read-only"
    )


def _tiny_keeps_layers(
    tiny_config: Any, tiny: TinyConfig, real_layers: list[str]
) -> tuple[Delta, ...]:
    """The tiny model must have the layers it stands for, or parity would test something else."""
    if not real_layers:
        return ()
    expected = [real_layers[i] for i in tiny.layer_indices]
    got = layer_signatures(tiny_config)
    if got == expected:
        return ()
    return (
        Delta(
            "the tiny config does not keep the real per-layer structure",
            "config.json",
            f"expected {expected}, got {got}",
        ),
    )


def _list_or_none(value: Any) -> list[str] | None:
    return [str(v) for v in value] if value else None


def _source_ref(source: ModelSource, probe: Probe) -> SourceRef:
    import transformers

    return SourceRef(
        model_id=source.model_id,
        origin=str(source.origin),
        revision=source.revision,
        model_type=source.model_type,
        architecture=source.architecture or probe.model_class,
        transformers_version=transformers.__version__,
        hf_files=tuple((f.name, f.sha256) for f in source.hf_files),
        remote_files=tuple((f.name, f.sha256) for f in source.remote_files),
        hub_id=source.hub_id,
    )
