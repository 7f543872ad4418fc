"""The architecture's optional features, each behind a boolean config flag.

A checkpoint's config switches some of its architecture's features off (Qwen3's
``use_sliding_window``, Cohere's ``use_qk_norm``, StableLM's ``qk_layernorm``). Code generated
from the analysed values alone bakes the checkpoint's choice in, and the next checkpoint of the
same architecture silently loses the feature. So each boolean key the HF source reads is tried
the other way: the model is analysed again with the flag flipped, and the catalogue features
that change are what the flag switches. The analysis with every switching flag flipped is kept
beside the spec: a target generates from it code that reads the flags and runs parity on both
tiny configs, so code that ignores a flag fails.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from collections.abc import Callable
from typing import Any

from onboard.errors import OnboardError
from onboard.source import ModelSource
from onboard.spec import ConfigFlag, Evidence, FlagSpecs

__all__ = ["admitted_besides_bool", "flag_candidates", "read_flags", "with_flags"]

# Keys that are run-time or serialisation switches, or read elsewhere in the spec with their own
# evidence (tie_word_embeddings), never the architecture's optional features.
NOT_ARCHITECTURE = frozenset(
    {
        "add_cross_attention",
        "is_decoder",
        "is_encoder_decoder",
        "output_attentions",
        "output_hidden_states",
        "output_router_logits",
        "return_dict",
        "tie_encoder_decoder",
        "tie_word_embeddings",
        "torchscript",
        "use_bidirectional_attention",  # an encoder's mask, not a causal LM's option
        "use_cache",
        "use_return_dict",
    }
)


def _layers_half(config: dict[str, Any]) -> dict[str, Any]:
    """Qwen2/Qwen3 slide only from layer ``max_window_layers`` on: put it mid-stack so both
    kinds exist, give a window where the checkpoint leaves it null, and let the config class
    derive ``layer_types`` again (a saved config lists them as the flag left them)."""
    layers = int(config.get("num_hidden_layers") or 2)
    return {
        "max_window_layers": max(1, layers // 2),
        "sliding_window": config.get("sliding_window") or 4096,
        "layer_types": None,
    }


# Keys the tiny config sets whatever the checkpoint's says (tiny.py), so parity proves generated
# code with that value only, and why it refuses the other one.
PINNED = {
    "is_decoder": "without it HF's model attends both ways (an encoder), and this code is causal",
}


# What a flag needs beside itself to switch anything on (documented, like the tiny overrides).
COMPANIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "use_sliding_window": _layers_half,
}

Analyse = Callable[[ModelSource], Any]  # ModelSource -> Analysis


def flag_candidates(config: Any, source: ModelSource) -> dict[str, bool]:
    """The boolean keys of the HF config (defaults included) that the HF source (or the
    checkpoint's own code) reads."""
    values = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    texts = "\n".join(f.text for f in source.hf_files or source.remote_files)
    return {
        key: value
        for key, value in values.items()
        if isinstance(value, bool)
        and key not in NOT_ARCHITECTURE
        and not key.startswith("_")
        and re.search(rf"\b{re.escape(key)}\b", texts)
    }


def flipped(source: ModelSource, flags: dict[str, bool]) -> ModelSource:
    """The source with each flag set to the given value, companions included."""
    config = dict(source.config)
    for key, value in flags.items():
        config[key] = value
        if value and key in COMPANIONS:
            config.update(COMPANIONS[key](config))
    return dataclasses.replace(source, config=config)


def with_flags(source: ModelSource, analysis: Any) -> Any:
    """The analysis with its flags read, for a decoder that was built and probed (transformers'
    own, or trusted remote code, flipped the same way); a VLM, remote code read as text only or
    a spec with unresolved parts keeps what it has."""
    spec = analysis.spec
    if analysis.probe is None or spec.vision is not None or spec.unresolved:
        return analysis
    from onboard.analysis import analyse
    from onboard.hf_config import make_hf_config

    run = functools.partial(analyse, run_remote_code=source.is_remote_code)
    return read_flags(source, analysis, make_hf_config(source.config), run)


def read_flags(source: ModelSource, base: Any, hf_config: Any, analyse: Analyse) -> Any:
    """``base`` (an Analysis) with ``spec.flags`` read and ``variants``: the analysis with every
    flag that switches something flipped, then with each alone."""
    flags, flipped_alone = [], []
    for key, value in sorted(flag_candidates(hf_config, source).items()):
        flag, other = _try_flag(key, value, source, base.spec, analyse)
        if flag is not None:
            flags.append(dataclasses.replace(flag, admits=admitted_besides_bool(hf_config, key)))
        if other is not None:
            flipped_alone.append((key, other))
    pinned = _pinned(source, base.tiny.config)
    spec = dataclasses.replace(base.spec, flags=(*flags, *pinned))
    notes = tuple(
        _pinned_note(f, hf_config) for f in pinned if getattr(hf_config, f.key) is not True
    )
    variants = [_variant(other, spec, ((key, other.spec),)) for key, other in flipped_alone]
    if len(variants) > 1:
        every = _analysed(
            analyse, flipped(source, {f.key: not f.value for f in flags if f.understood})
        )
        if every is not None and not every.spec.unresolved:  # flags read alone may not combine
            pairs = tuple((key, other.spec) for key, other in flipped_alone)
            variants.insert(0, _variant(every, spec, pairs))
    return dataclasses.replace(
        base, spec=spec, variants=tuple(variants), build_notes=(*base.build_notes, *notes)
    )


def _pinned(source: ModelSource, tiny: dict[str, Any]) -> tuple[ConfigFlag, ...]:
    """The keys the tiny config pinned to True: generated code is proved with True only."""
    return tuple(
        ConfigFlag(key, True, evidence=_readers(key, source), pinned=why)
        for key, why in PINNED.items()
        if tiny.get(key) is True
    )


def _pinned_note(flag: ConfigFlag, config: Any) -> str:
    value = getattr(config, flag.key)
    return (
        f"the config sets {flag.key}={value}: generated code, proved with {flag.key}=True, "
        f"refuses it ({flag.pinned}); set {flag.key} to true to use this checkpoint as a "
        "causal LM"
    )


def _try_flag(
    key: str, value: bool, source: ModelSource, spec: Any, analyse: Analyse
) -> tuple[ConfigFlag | None, Any | None]:
    """The flag (None when flipping it changes nothing) and the analysis with it flipped
    (None when that could not be read)."""
    try:
        other = analyse(flipped(source, {key: not value}))
    except Exception as error:  # an OnboardError, or a flipped tiny model that does not run
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        if not isinstance(error, OnboardError):
            reason = f"{type(error).__name__}: {reason}"
        return _flag(key, value, source, (), reason=reason), None
    if other.spec.unresolved:
        first = other.spec.unresolved[0]
        return _flag(key, value, source, (), reason=f"{first.what} ({first.where})"), None
    switches = _switches(spec, other.spec)
    if not switches:
        return None, None
    return _flag(key, value, source, switches), other


def _switches(before: Any, after: Any) -> tuple[tuple[str, str, str], ...]:
    """(feature, value before, value after) for each catalogue feature that differs."""
    from onboard.analysis.features import feature_values

    old, new = feature_values(before), feature_values(after)
    return tuple(
        (name, _plain(old.get(name)), _plain(new.get(name)))
        for name in sorted({*old, *new})
        if old.get(name) != new.get(name)
    )


def _variant(flipped_analysis: Any, spec: Any, pairs: tuple[tuple[str, Any], ...]) -> Any:
    """A flipped analysis that carries the flags and what it was flipped from."""
    return dataclasses.replace(
        flipped_analysis,
        spec=dataclasses.replace(flipped_analysis.spec, flags=spec.flags),
        flagged_from=FlagSpecs(spec, pairs),
    )


def _analysed(analyse: Analyse, source: ModelSource) -> Any | None:
    try:
        return analyse(source)
    except Exception:  # flags that each build a model alone need not build one together
        return None


def _plain(value: Any) -> str:
    return "absent" if value is None else str(value)


def _flag(
    key: str,
    value: bool,
    source: ModelSource,
    switches: tuple[tuple[str, str, str], ...],
    reason: str | None = None,
) -> ConfigFlag:
    return ConfigFlag(
        key=key,
        value=value,
        switches=switches,
        evidence=_readers(key, source),
        not_understood=reason,
    )


def admitted_besides_bool(config: Any, key: str) -> tuple[str, ...]:
    """The types besides bool the config class's annotation of ``key`` admits (Laguna's
    ``gating: bool | str``: str; None is one too); () for a key it does not annotate."""
    for cls in type(config).__mro__:
        annotation = vars(cls).get("__annotations__", {}).get(key)
        if annotation is not None:
            break
    else:
        return ()
    if isinstance(annotation, str):
        names = [part.strip() for part in annotation.split("|")]
    else:
        members = typing.get_args(annotation) or (annotation,)
        names = ["None" if m is type(None) else getattr(m, "__name__", str(m)) for m in members]
    return tuple(name for name in names if name != "bool")


def _readers(key: str, source: ModelSource) -> tuple[Evidence, ...]:
    """The first line of each HF file that reads the key."""
    pattern = re.compile(rf"\b{re.escape(key)}\b")
    use = re.compile(rf"(config|self)\.{re.escape(key)}\b|[\"']{re.escape(key)}[\"']")
    found = []
    # the modeling code first: what the flag switches, before the config class's default
    for file in sorted(source.hf_files, key=lambda f: not f.name.startswith("modeling_")):
        if file.name.startswith("modular_"):
            continue
        lines = list(enumerate(file.text.splitlines(), 1))
        hits = [(n, line) for n, line in lines if pattern.search(line)]
        code = [(n, line) for n, line in hits if use.search(line)]
        for number, line in (code or hits)[:1]:
            found.append(Evidence("source", f"{file.name}:{number}", line.strip()))
    return tuple(found)
