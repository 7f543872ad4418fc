"""Analysis of a model that exists only as Hub remote code.

Trusted (``--trust-remote-code``), the checkpoint's own classes are built tiny and probed like a
transformers model (``analyse_remote_classes``); the static reading then only lends its source
lines, where it agrees. Untrusted, nothing here imports or runs the checkpoint's files: the
modeling file is read with ``ast`` (``static.StaticReader``), config values come from
config.json and the remote config class's defaults, and the tiny config is shrunk from those.
What the reader cannot account for is listed line by line against the closest transformers
classes, for a reviewer; parity (only with the flag) is what finally proves that reading.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from onboard.analysis import Analysis
from onboard.analysis.similarity import compare_with_transformers
from onboard.analysis.static import ConfigValues, StaticReader
from onboard.classify import Classification, Kind
from onboard.errors import InvalidConfigError, UnsupportedFeatureError
from onboard.source import ModelSource
from onboard.spec import ArchitectureSpec, SourceRef, WeightSpec
from onboard.tiny import TinyConfig, shrink_config


def analyse_remote_classes(
    source: ModelSource,
    classification: Classification,
    analyse_decoder: Callable[[ModelSource, Classification], Analysis],
) -> Analysis:
    """The checkpoint's own classes (registered after the trust check) built tiny and probed,
    as a transformers model is: names, dispatch tables and layouts stop mattering, and MoE and
    hybrid decoders are read by the same readers. Evidence lines point into its files."""
    if classification.kind == Kind.VLM:
        raise UnsupportedFeatureError(
            f"{source.model_type} is a vision-language model that exists only as remote code; "
            "onboard reads remote-code decoders (dense, MoE, hybrid) so far"
        )
    analysis = analyse_decoder(source, classification)
    return dataclasses.replace(analysis, spec=_cited(analysis.spec, source))


def _cited(spec: ArchitectureSpec, source: ModelSource) -> ArchitectureSpec:
    """The probed spec with the static reader's source lines where the probe found none (the
    placement of the norms, the embedding scale ...), taken only when the text reading is
    complete and agrees feature for feature: its lines then show what was measured."""
    from onboard.analysis.features import feature_values

    causal_lm = source.remote_causal_lm
    try:
        read = StaticReader(source.remote_files, source.config, causal_lm or "").read()
    except Exception:  # the text reading is a bonus here: the probe stands without it
        return spec
    if read.text is None or read.deltas:
        return spec
    if feature_values(dataclasses.replace(spec, text=read.text)) != feature_values(spec):
        return spec
    lines = {path: [e for e in found if e.kind == "source"] for path, found in read.evidence}
    evidence = tuple(
        (path, found)
        if any(e.kind == "source" for e in found)
        else (path, (*found, *lines.get(path, ())))
        for path, found in spec.evidence
    )
    return dataclasses.replace(spec, evidence=evidence)


def analyse_remote(source: ModelSource, classification: Classification) -> Analysis:
    """The spec read from the remote modeling file, with the lines it leaves unexplained."""

    modeling = source.remote_file("modeling_")
    causal_lm = source.remote_causal_lm
    if modeling is None or causal_lm is None:
        raise UnsupportedFeatureError(
            f"{source.model_type}: config.json auto_map names no AutoModelForCausalLM in a "
            "modeling_*.py file; onboard reads causal LMs"
        )
    if classification.kind != Kind.DENSE:
        raise UnsupportedFeatureError(
            f"{source.model_type} is a {classification.kind} model that exists only as remote "
            f"code ({modeling.name}); onboard reads dense remote-code decoders so far"
        )
    try:
        result = StaticReader(source.remote_files, source.config, causal_lm).read()
    except (SyntaxError, RecursionError, ValueError) as exc:
        raise InvalidConfigError(
            f"{modeling.name} cannot be read as Python source ({type(exc).__name__}: {exc})"
        ) from None
    if result.text is None:
        raise UnsupportedFeatureError(
            f"{modeling.name} does not have the causal LM -> model -> decoder layer structure "
            "onboard reads",
            items=tuple(f"{d.what} at {d.where}" for d in result.deltas),
        )
    review = compare_with_transformers(modeling, dict(result.roles), result.explained_lines)
    spec = ArchitectureSpec(
        source=_source_ref(source),
        kind=str(classification.kind),
        text=result.text,
        weights=WeightSpec(
            tensors=(),
            tied_keys=("lm_head.weight",) if result.text.tie_word_embeddings else (),
            renames=result.renames,
        ),
        evidence=result.evidence,
        unresolved=result.deltas,
    )
    tiny = _tiny(source, result.text.layer_types)
    return Analysis(spec, classification, tiny, probe=None, review=review)


def _tiny(source: ModelSource, layer_types: tuple[str, ...]) -> TinyConfig:
    """Shrink config.json, with the remote config class's defaults filled in where it is silent."""
    values = ConfigValues(source.config, source.remote_files)
    full = {**values.defaults, **source.config}
    return shrink_config(full, list(layer_types))


def _source_ref(source: ModelSource) -> SourceRef:
    import transformers

    return SourceRef(
        model_id=source.model_id,
        origin=str(source.origin),
        revision=source.revision,
        model_type=source.model_type,
        architecture=source.architecture or source.remote_causal_lm or "",
        transformers_version=transformers.__version__,
        remote_files=tuple((f.name, f.sha256) for f in source.remote_files),
    )
