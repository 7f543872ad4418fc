"""What the generated AutoModel code does not write, each with the part of the model it lives in.

A feature of the *attention* part does not block: the generated attention then keeps HF's module
whole (its forward included, kept_attention.py), and the model hands it exactly HF's rotary
tables. A feature of any other part (the model, a layer, the MLP, the norms, the MoE block, the
state-dict adapter) is refused by name until the generator writes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from onboard.block_specs import KindAttention

Part = Literal["attention", "model", "layer", "mlp", "norm", "moe", "adapter"]


@dataclass(frozen=True)
class Unwritten:
    """One computation the generator does not write, and how a blocker or a reason says it."""

    path: str  # the spec path its evidence is cited by
    part: Part
    applies: Callable[[Any], bool]  # of the text spec
    what: Callable[[Any], str]
    why: str  # why the generated code cannot (for a blocker)
    fallback: str = "probe"  # the citation when the spec has none


def _kind_attention(kind: KindAttention) -> str:
    parts = [f"{kind.kv_heads_factor}x the key/value heads"] if kind.kv_heads_factor != 1 else []
    parts += ["attention sinks"] if kind.sinks else []
    return f"{kind.kind} layers: {', '.join(parts)}"


def _output_gate(t: Any) -> str:
    per_head = ", one value per head" if t.attention.output_gate_per_head else ""
    return (
        f"the heads' output scaled by {t.attention.output_gate_activation} of a gate "
        f"projection ({t.attention.output_gate_proj}{per_head}) before o_proj"
    )


def _gated_norms(t: Any) -> str:
    roles = ", ".join(f"{role} in {'/'.join(kinds)} layers" for role, kinds in t.norm.gate.roles)
    return f"gated norms (y * sigmoid(up(act(down(y)))), {roles})"


# Learned scales of the residual (Doge) need no entry: the generated decoder layer keeps HF's
# forward, which applies them.
UNWRITTEN: tuple[Unwritten, ...] = (
    Unwritten(
        "text.rope.reversed",
        "attention",
        lambda t: any(r.reversed for _, r in t.rope),
        lambda t: "RoPE turning the other way",
        ": the generated attention rotates as Llama does",
    ),
    Unwritten(
        "text.attention.qk_norm_after_rope",
        "attention",
        lambda t: t.attention.qk_norm_after_rope and t.attention.qk_norm != "per_head",
        lambda t: f"{t.attention.qk_norm} q/k norms after RoPE",
        ": the generated attention norms each head after RoPE, nothing wider",
    ),
    Unwritten(
        "text.attention.qk_norm_each_head",
        "attention",
        lambda t: t.attention.qk_norm_each_head,
        lambda t: "q/k norms with a weight per head",
        ": the generated attention's q/k norms share one weight across the heads",
    ),
    Unwritten(
        "text.attention.position_scale",
        "attention",
        lambda t: t.attention.position_scale,
        lambda t: "a position-dependent query scale",
        ": the generated attention does not scale q by position",
        "rope_parameters",
    ),
    Unwritten(
        "text.attention.alibi",
        "model",
        lambda t: t.attention.alibi,
        lambda t: "ALiBi attention biases",
        "",
    ),
    Unwritten(
        "text.head_transform",
        "model",
        lambda t: t.head_transform is not None,
        lambda t: "a dense layer, activation and norm before the head",
        ": the generated model has none",
    ),
    Unwritten(
        "text.first_layer_without",
        "model",
        lambda t: bool(t.first_layer_without),
        lambda t: f"layer 0 without the {', '.join(t.first_layer_without)} norm",
        ": the generated layers all have it",
    ),
    Unwritten(
        "text.final_norm",
        "model",
        lambda t: not t.final_norm,
        lambda t: "no final norm",
        ": the generated model normalises the last layer's output",
    ),
    Unwritten(
        "text.attention.last_layer_o_bias",
        "adapter",
        lambda t: t.attention.last_layer_o_bias is not None,
        lambda t: "an attention output bias in the last layer only",
        ": the state-dict adapter does not move it yet",
    ),
    Unwritten(
        "text.attention.dynamic_mask",
        "attention",
        lambda t: t.attention.dynamic_mask is not None,
        lambda t: "a dynamic attention mask computed from the values",
        ": the generated attention masks causally only",
    ),
    Unwritten(
        "text.attention.differential",
        "attention",
        lambda t: t.attention.differential is not None,
        lambda t: "differential attention",
        ": the generated attention has one softmax map per head",
    ),
    Unwritten(
        "text.attention.sinks",
        "attention",
        lambda t: t.attention.sinks is not None,
        lambda t: "attention sinks (a learned logit per head in the softmax)",
        ": the generated attention runs AutoModel's attention backends, which take no sinks",
    ),
    Unwritten(
        "text.attention.kinds",
        "attention",
        lambda t: bool(t.attention.kinds),
        lambda t: (
            "attention that differs by layer kind ("
            + "; ".join(_kind_attention(k) for k in t.attention.kinds)
            + ")"
        ),
        ": the generated attention is one for every layer",
    ),
    Unwritten(
        "text.attention.v_head_dim",
        "attention",
        lambda t: t.attention.v_head_dim is not None,
        lambda t: (
            f"value heads of another width than the query/key heads "
            f"(config.{t.attention.v_head_dim_key})"
        ),
        ": the generated attention's values are as wide as its keys",
    ),
    Unwritten(
        "text.attention.value_scale",
        "attention",
        lambda t: t.attention.value_scale is not None,
        lambda t: f"the values scaled by config.{t.attention.value_scale_key} after v_proj",
        ": the generated attention uses the values as v_proj gives them",
    ),
    # the indexer picks keys from inputs HF's model prepares for it: not the attention's alone
    Unwritten(
        "text.attention.indexer",
        "model",
        lambda t: t.attention.indexer is not None,
        lambda t: "DeepSeek Sparse Attention's lightning indexer (top-k keys per query)",
        ": the generated attention attends to every key AutoModel's backends are given",
    ),
    Unwritten(
        "text.attention.output_gate_proj",
        "attention",
        lambda t: t.attention.output_gate_proj is not None,
        _output_gate,
        ": the generated attention has no gate projection",
    ),
    Unwritten(
        "text.attention.mla.query_gate",
        "attention",
        lambda t: t.attention.mla is not None and t.attention.mla.query_gate is not None,
        lambda t: (
            f"latent attention whose queries and output gate come from one projection of both "
            f"q latents ({t.attention.mla.query_gate.proj})"
        ),
        ": the generated latent attention projects queries with q_b_proj and has no gate",
    ),
    Unwritten(
        "text.norm.gate",
        "norm",
        lambda t: t.norm.gate is not None,
        _gated_norms,
        ": the generated layers' norms are plain",
    ),
    Unwritten(
        "text.moe.post_norm",
        "moe",
        lambda t: getattr(t, "moe", None) is not None and t.moe.post_norm is not None,
        lambda t: f"a norm of the MoE block's output ({t.moe.post_norm})",
        ": AutoModel's MoE returns the routed plus shared experts as they are",
    ),
)


def unwritten(text: Any, part: Part | None = None) -> tuple[Unwritten, ...]:
    """The entries that apply to the text spec ``text`` (of ``part`` only, when given)."""
    return tuple(u for u in UNWRITTEN if (part is None or u.part == part) and u.applies(text))
