"""Read which tower states the projector reads, by value: the projector's input is compared with
each hidden state, with and without the class token, and with the post-normed last state. The
config keys that say the same (``vision_feature_layer``, ``vision_feature_select_strategy``)
are recorded only when they agree with what the model did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.analysis.vision.trace import VisionTrace, same_values
from onboard.spec import Delta, Evidence
from onboard.vision import FeatureSelectSpec

# VipLlava names it in the plural
_LAYER_KEYS = ("vision_feature_layer", "vision_feature_layers")
_STRATEGY_KEY = "vision_feature_select_strategy"


@dataclass(frozen=True)
class SelectReading:
    spec: FeatureSelectSpec | None
    evidence: tuple[tuple[str, tuple[Evidence, ...]], ...]  # spec path -> its evidence
    deltas: tuple[Delta, ...] = ()


def read_select(
    trace: VisionTrace,
    config: Any,
    class_token: bool,
    where: str = "get_image_features",
    packed: bool = False,
) -> SelectReading:
    """``packed``: the tower runs every image's patches as one row (Pixtral), which the
    projector takes as patches."""
    states = tuple(s[0] for s in trace.hidden_states) if packed else trace.hidden_states
    _, claimed = _claimed_layers(config)
    layer_lists = [tuple(claimed)] if isinstance(claimed, list | tuple) else []
    layer_lists += [(i,) for i in range(-len(states), 0)]
    drops = (True, False) if class_token else (False,)
    for layers in layer_lists:
        for drop in drops:
            candidate = _select(states, layers, drop)
            if same_values(candidate, trace.projector_in):
                return _found(FeatureSelectSpec(layers, drop, post_norm=False), config)
    for drop in drops:
        post = trace.post_normed
        if post is not None and same_values(post[:, 1:] if drop else post, trace.projector_in):
            return _found(FeatureSelectSpec((-1,), drop, post_norm=True), config)
    return SelectReading(
        None,
        (),
        (
            Delta(
                "the projector reads tower features onboard cannot find among the tower's states",
                where,
                "no hidden state (with or without the class token) nor the post-normed last "
                "state matches the projector's input",
            ),
        ),
    )


def _claimed_layers(config: Any) -> tuple[str, Any]:
    """The config key that names the feature layer(s), and its value (None: no such key)."""
    for key in _LAYER_KEYS:
        value = getattr(config, key, None)
        if value is not None:
            return key, value
    return _LAYER_KEYS[0], None


def _select(states: tuple[Any, ...], layers: tuple[int, ...], drop: bool) -> Any:
    import torch

    picked = [states[i][:, 1:] if drop else states[i] for i in layers]
    return torch.cat(picked, dim=-1)


def _found(spec: FeatureSelectSpec, config: Any) -> SelectReading:
    """The spec, with the config keys that agree with it; a key that disagrees is a delta."""
    import dataclasses

    seen = "the post-normed last state" if spec.post_norm else f"hidden_states{list(spec.layers)}"
    layers = [Evidence("probe", "projector input", seen)]
    dropped = "without" if spec.drop_class_token else "with"
    strategy_evidence = [Evidence("probe", "projector input", f"{dropped} the class token")]
    deltas = []
    key, claimed = _claimed_layers(config)
    if claimed is not None and not spec.post_norm:
        claimed_layers = tuple(claimed) if isinstance(claimed, list | tuple) else (claimed,)
        if claimed_layers == spec.layers:
            spec = dataclasses.replace(spec, layer_key=key)
            layers.append(Evidence("config", f"config.json:{key}", repr(claimed)))
        else:
            deltas.append(_disagrees(key, claimed, f"hidden_states{list(spec.layers)}"))
    strategy = getattr(config, _STRATEGY_KEY, None)
    if strategy is not None:
        if (strategy == "default") == spec.drop_class_token:
            spec = dataclasses.replace(spec, strategy_key=_STRATEGY_KEY)
            strategy_evidence.append(
                Evidence("config", f"config.json:{_STRATEGY_KEY}", repr(strategy))
            )
        else:
            kept = "drops" if spec.drop_class_token else "keeps"
            deltas.append(_disagrees(_STRATEGY_KEY, strategy, f"the model {kept} the class token"))
    evidence = (
        ("vision.select.layers", tuple(layers)),
        ("vision.select.drop_class_token", tuple(strategy_evidence)),
    )
    return SelectReading(spec, evidence, tuple(deltas))


def _disagrees(key: str, value: Any, seen: str) -> Delta:
    return Delta(
        f"config.{key} = {value!r} does not say what the model selects",
        f"config.json:{key}",
        f"the projector reads {seen}",
    )
