"""Known mobius 0.1.0 bugs, each with the counterfactual that confirms it.

A parity failure is blamed on the library only when a bug's preconditions hold for the class and
execution provider *and* re-running the same check with the bug's trigger removed from the tiny
config passes. Anything else is reported as the generated code being wrong.

Ids T7-T10 follow ``shared/notes/target-mobius.md``; the M ids were found by onboard's parity runs
(the hybrid notes number their own defects M1-M13: onboard cites those as "hybrid M<n>").
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from onboard.analysis.attention_kinds import declared_kinds, window_key, window_of
from onboard.parity.harness import DECODE_STEPS, PROMPT_LEN
from onboard.tiny import POSITION_SCALE_KEY, rope_parameters

WIDE_WINDOW = 4 * (PROMPT_LEN + DECODE_STEPS)  # a window no test sequence reaches


@dataclass(frozen=True)
class KnownBug:
    id: str
    title: str
    providers: tuple[str, ...]  # execution providers it affects
    applies: Callable[[Mapping[str, Any]], bool]  # on the tiny config.json dict
    remove_trigger: Callable[[dict[str, Any]], None]  # edits a copy of the tiny config
    trigger: str  # what the counterfactual changes, for the report
    # The counterfactual builds for this execution provider instead (a build-time trigger)
    rebuild_provider: str | None = None


# The cpu EP's capabilities without GroupQueryAttention fusion or QKV packing: the graph the cpu
# EP would get if its AttentionToGQA rewrite did not run.
CPU_WITHOUT_GQA = "onboard-cpu-without-gqa"


def register_cpu_without_gqa() -> None:
    """Registered through mobius' documented hook for out-of-tree execution providers."""
    from mobius._execution_providers import ep_registry, get_ep, register_ep

    if CPU_WITHOUT_GQA not in ep_registry:
        cpu = get_ep("cpu")
        register_ep(
            dataclasses.replace(
                cpu, name=CPU_WITHOUT_GQA, gqa_dtypes=frozenset(), qkv_pack_dtypes=frozenset()
            )
        )


def _mixed_layers(config: Mapping[str, Any]) -> bool:
    return len(set(declared_kinds(config) or ())) > 1 and bool(window_of(config))


def _rope_thetas(config: Mapping[str, Any]) -> set[float]:
    params = config.get("rope_parameters")
    if isinstance(params, Mapping) and all(isinstance(v, Mapping) for v in params.values()):
        return {float(v.get("rope_theta", 0)) for v in params.values()}
    local = config.get("rope_local_base_freq")
    theta = config.get("rope_theta")
    return {float(t) for t in (local, theta) if t is not None}


def _widen_window(config: dict[str, Any]) -> None:
    config[window_key(config)] = WIDE_WINDOW


def _equal_thetas_wide_window(config: dict[str, Any]) -> None:
    params = config.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("full_attention"), dict):
        for kind, entry in params.items():
            if isinstance(entry, dict):  # a kind's own RoPE (None: its layers skip RoPE)
                params[kind] = copy.deepcopy(params["full_attention"])
    if config.get("rope_local_base_freq") is not None and config.get("rope_theta") is not None:
        config["rope_local_base_freq"] = config["rope_theta"]
    _widen_window(config)


def _odd_layers_slide(config: dict[str, Any]) -> None:
    count = len(declared_kinds(config) or ())
    config["layer_types"] = [
        "sliding_attention" if i % 2 else "full_attention" for i in range(count)
    ]


def _scalar_is_head_dim(config: dict[str, Any]) -> None:
    config["query_pre_attn_scalar"] = _head_dim(config)


def _attends(config: Mapping[str, Any]) -> bool:
    """A config without attention heads (a pure state-space model) has no RoPE tables: its
    head_dim, if any, sizes something else (Mamba-2's heads)."""
    return config.get("num_attention_heads") is not None


def _partial_rotary(config: Mapping[str, Any]) -> bool:
    if not _attends(config):
        return False
    factors = _rotary_factors(config)
    rotary_dim = config.get("rotary_dim")  # GPT-J's way of saying it
    partial_dim = isinstance(rotary_dim, int) and rotary_dim < _head_dim(config)
    return partial_dim or any(f is not None and float(f) < 1.0 for f in factors)


def _narrow_rope_tables(config: Mapping[str, Any]) -> bool:
    """RoPE tables (rotary_dim / 2 wide) that are not a multiple of 8 wide."""
    if not _attends(config):
        return False
    factors = [f for f in _rotary_factors(config) if f is not None] or [1.0]
    return any(_head_dim(config) * float(f) / 2 % 8 for f in factors)


def _rotary_factors(config: Mapping[str, Any]) -> list[Any]:
    factors = [config.get("partial_rotary_factor")]
    params = config.get("rope_parameters")
    if isinstance(params, Mapping):
        nested = [v for v in params.values() if isinstance(v, Mapping)] or [params]
        factors += [p.get("partial_rotary_factor") for p in nested]
    return factors


def _wider_heads(config: dict[str, Any]) -> None:
    """Heads wide enough that every RoPE table is 8 wide (head_dim 32 for half rotary)."""
    smallest = min(float(f) for f in _rotary_factors(config) if f is not None)
    config["head_dim"] = max(_head_dim(config), round(16 / smallest))


def _head_dim(config: Mapping[str, Any]) -> int:
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def _full_rotary(config: dict[str, Any]) -> None:
    config["partial_rotary_factor"] = 1.0
    if isinstance(config.get("rotary_dim"), int):
        config["rotary_dim"] = _head_dim(config)
    params = config.get("rope_parameters")
    if isinstance(params, dict):
        nested = [v for v in params.values() if isinstance(v, dict)] or [params]
        for entry in nested:
            if "partial_rotary_factor" in entry:
                entry["partial_rotary_factor"] = 1.0


def _dynamic_rope(config: Mapping[str, Any]) -> bool:
    rope = rope_parameters(config)
    return rope.get("rope_type", rope.get("type")) == "dynamic"


def _default_rope(config: dict[str, Any]) -> None:
    rope = rope_parameters(config)
    rope["rope_type" if "rope_type" in rope else "type"] = "default"
    rope.pop("factor", None)


def _no_position_scale(config: dict[str, Any]) -> None:
    rope_parameters(config)[POSITION_SCALE_KEY] = 0.0


def _exact_sqrt_hidden(config: dict[str, Any]) -> None:
    # sqrt(144) = 12 is exact in every rounding; 144 is a multiple of the tiny head count (6),
    # and an explicit head_dim keeps heads of 16 (GroupQueryAttention needs multiples of 16).
    config.setdefault("head_dim", config["hidden_size"] // config["num_attention_heads"])
    config["hidden_size"] = 144


BUGS: dict[str, KnownBug] = {
    bug.id: bug
    for bug in (
        KnownBug(
            "T7",
            "Gemma2TextModel slides on odd layers and ignores config.layer_types",
            ("default", "cpu"),
            _mixed_layers,
            _odd_layers_slide,
            "layer_types reordered to mobius' odd-layer rule",
        ),
        KnownBug(
            "T8",
            "the cpu EP's GroupQueryAttention rewrite keeps only the first layer's RoPE tables and "
            "drops per-layer attention masks",
            ("cpu",),
            lambda c: _mixed_layers(c) or len(_rope_thetas(c)) > 1,
            _equal_thetas_wide_window,
            "one RoPE theta for every layer and a window longer than the test sequence",
        ),
        KnownBug(
            "T9",
            "TextModel ignores sliding_window on the default EP (padding-only mask)",
            ("default",),
            lambda c: bool(c.get("sliding_window")),
            _widen_window,
            "a window longer than the test sequence",
        ),
        KnownBug(
            "M3",
            "with partial RoPE the cpu EP emits GroupQueryAttention(rotary_embedding_dim=...), an "
            "attribute onnxruntime 1.32 rejects: the model does not load",
            ("cpu",),
            _partial_rotary,
            _full_rotary,
            "partial_rotary_factor 1.0",
        ),
        KnownBug(
            "M7",
            "the cpu EP rewrites attention to GroupQueryAttention, which onnxruntime 1.32 runs "
            "only with RoPE tables a multiple of 8 wide (rotary_dim / 2): narrower partial RoPE "
            "fails at run time",
            ("cpu",),
            _narrow_rope_tables,
            _wider_heads,
            "heads wide enough for RoPE tables 8 wide",
        ),
        KnownBug(
            "M5",
            "the cpu EP's AttentionToGQA rewrite replaces each Attention with GroupQueryAttention "
            "and drops its attention_bias input: an additive bias such as ALiBi is lost",
            ("cpu",),
            lambda c: True,  # listed only for designs that add a bias (see targets.mobius)
            lambda c: None,
            "the same graph built without the GroupQueryAttention rewrite",
            rebuild_provider=CPU_WITHOUT_GQA,
        ),
        KnownBug(
            "M6",
            "the cpu EP's GroupQueryAttention path drops the position-dependent query scale "
            "(rope_parameters.llama_4_scaling_beta, Ministral 3) that the default EP applies",
            ("cpu",),
            lambda c: bool(rope_parameters(c).get(POSITION_SCALE_KEY)),
            _no_position_scale,
            "llama_4_scaling_beta 0.0",
        ),
        KnownBug(
            "M8",
            "DynamicNTKRope scales the RoPE base by factor ** (d / (d - 2)) at every length "
            "(mobius/components/_rotary_embedding.py:233), where transformers leaves RoPE "
            "unchanged up to max_position_embeddings",
            ("default", "cpu"),
            _dynamic_rope,
            _default_rope,
            "rope_type 'default' in place of 'dynamic'",
        ),
        KnownBug(
            "M1",
            "Gemma3DecoderLayer ignores query_pre_attn_scalar (scales q.k by head_dim ** -0.5)",
            ("default", "cpu"),
            lambda c: c.get("query_pre_attn_scalar") not in (None, c.get("head_dim")),
            _scalar_is_head_dim,
            "query_pre_attn_scalar set equal to head_dim",
        ),
        KnownBug(
            "M2",
            "Gemma embeddings are scaled by a rounded sqrt(hidden_size) (2 decimals for Gemma and "
            "Gemma2, float16 for Gemma3) where transformers uses the exact value in float32",
            ("default", "cpu"),
            lambda c: float(c.get("hidden_size", 64)) ** 0.5 % 1 != 0,
            _exact_sqrt_hidden,
            "hidden_size 144 (an exact square root)",
        ),
    )
}


@dataclass(frozen=True)
class WeightBug:
    """A conversion defect of a library class: its ``preprocess_weights`` leaves the checkpoint
    tensors ``unused`` matches unapplied, or (``check="build"``) raises what ``unused`` matches.
    The failure stands and the report names the bug."""

    id: str
    title: str
    unused: re.Pattern[str]
    check: str = "weights"  # the parity check whose failure detail it explains


WEIGHT_BUGS: dict[str, WeightBug] = {
    bug.id: bug
    for bug in (
        WeightBug(
            "M4",
            "DeepSeekV3CausalLMModel.preprocess_weights only splits the fused in-memory experts: "
            "a checkpoint's per-expert tensors are never applied",
            re.compile(r"\.experts\.\d+\."),
        ),
        WeightBug(
            "M9",
            "InternLM2CausalLMModel names its head lm_head and its preprocess_weights never "
            "renames InternLM2's output.weight (mobius/models/internlm.py): an untied "
            "checkpoint's head is never loaded",
            re.compile(r"^output\.weight \(from output\.weight\) fills no parameter"),
        ),
        WeightBug(
            "M10",
            "InternLM2CausalLMModel.preprocess_weights, for tied embeddings, takes "
            "`state_dict.get(...) or state_dict.get(...)` of two tensors "
            "(mobius/models/internlm.py): a tied checkpoint does not build",
            re.compile(r"Boolean value of Tensor with more than one value is ambiguous"),
            check="build",
        ),
    )
}


def applicable(
    bug_ids: tuple[str, ...], provider: str, tiny: Mapping[str, Any]
) -> tuple[KnownBug, ...]:
    """The counterfactual bugs among ``bug_ids`` that can touch this provider and config."""
    return tuple(
        BUGS[b]
        for b in bug_ids
        if b in BUGS and provider in BUGS[b].providers and BUGS[b].applies(tiny)
    )


def weight_bugs(
    bug_ids: tuple[str, ...], problems: tuple[str, ...], check: str = "weights"
) -> tuple[WeightBug, ...]:
    """The conversion bugs among ``bug_ids`` whose tensors the weight proof (or whose error the
    failed ``check``) names as a problem."""
    return tuple(
        WEIGHT_BUGS[b]
        for b in bug_ids
        if b in WEIGHT_BUGS
        and WEIGHT_BUGS[b].check == check
        and any(WEIGHT_BUGS[b].unused.search(p) for p in problems)
    )


def counterfactual(tiny: Mapping[str, Any], bugs: tuple[KnownBug, ...]) -> dict[str, Any]:
    config = copy.deepcopy(dict(tiny))
    for bug in bugs:
        bug.remove_trigger(config)
    return config
