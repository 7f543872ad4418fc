"""Parts inside a block that other blocks lack: norms before the output projections (BitNet's
``attn_sub_norm`` and ``ffn_sub_norm``), a norm of the MoE block's output (A.X-K1's
``post_mlp_layernorm``) and an output gate with a projection of its own (AFMoE's ``gate_proj``,
Laguna's per-head softplus ``g_proj``).

Each reader recognises the module by its shape and kind and returns it with the evidence, the
way ``analysis.variants`` does; where it sits in the computation is a claim the spec check
proves by running it against HF, so a look-alike used elsewhere ends as a mismatch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onboard.analysis.probe import is_norm
from onboard.analysis.source_lines import class_line, init_assignment
from onboard.analysis.variants import Reading
from onboard.source import SourceFile
from onboard.spec import Evidence


def sub_norm(
    block: Any, path: str, width: int, taken: Sequence[str], files: Sequence[SourceFile]
) -> Reading | None:
    """The one norm among ``block``'s children as wide as the input of its output projection
    (``width``) and not already read (``taken``: q/k norms): a norm applied before that
    projection. ``path`` is the block's module path in the tiny model (layer 0's)."""
    found = [
        name
        for name, module in block.named_children()
        if name not in taken
        and is_norm(module)
        and getattr(module, "weight", None) is not None
        and tuple(module.weight.shape) == (width,)
    ]
    if len(found) != 1:
        return None
    name = found[0]
    module = getattr(block, name)
    evidence = [Evidence("probe", f"{path}.{name}", f"{type(module).__name__} of width {width}")]
    if (line := init_assignment(files, type(block).__name__, name)) is not None:
        evidence.append(line.evidence)
    parameters = tuple(f"{name}.{p}" for p, _ in module.named_parameters())
    return Reading(name, tuple(evidence), parameters)


# The squashings an output gate applies, as their call reads in the attention's source
_GATE_ACTIVATIONS = {"sigmoid": r"\bsigmoid\(", "softplus": r"\bsoftplus\("}


def output_gate_projection(
    attention: Any,
    hidden: int,
    heads: int,
    head_dim: int,
    taken: Sequence[str],
    files: Sequence[SourceFile],
) -> dict[str, Reading]:
    """A linear of the attention from the hidden states to the heads' width (a gate per
    channel: AFMoE's gate_proj) or to one value per head (Laguna's g_proj), without a bias,
    beside q, k, v and o (``taken``), whose name says gate; and the one squashing the
    attention's source calls (sigmoid, softplus). The heads' output times the squashed gate
    before o_proj is a claim the spec check proves."""
    import torch

    widths = {heads * head_dim: False, heads: True}  # out features -> one value per head
    found = [
        name
        for name, module in attention.named_children()
        if name not in taken
        and ("gate" in name or name.startswith("g_"))
        and isinstance(module, torch.nn.Linear)
        and module.in_features == hidden
        and module.out_features in widths
        and module.bias is None
    ]
    if len(found) != 1:
        return {}
    name = found[0]
    module = getattr(attention, name)
    cls = type(attention).__name__
    shape = f"({module.out_features}, {hidden})"
    evidence = [Evidence("probe", f"model.layers.0.self_attn.{name}", shape)]
    if (line := init_assignment(files, cls, name)) is not None:
        evidence.append(line.evidence)
    proj = Reading(name, tuple(evidence), (f"{name}.weight",))
    readings = {"text.attention.output_gate_proj": proj}
    if widths[module.out_features]:
        width = f"{shape}: one value per head of {heads}, not per channel ({heads * head_dim})"
        probe = Evidence("probe", f"model.layers.0.self_attn.{name}", width)
        readings["text.attention.output_gate_per_head"] = Reading(True, (probe,), ())
    calls = {a: class_line(files, cls, p) for a, p in _GATE_ACTIVATIONS.items()}
    calls = {a: line for a, line in calls.items() if line is not None}
    if len(calls) == 1:  # none or both: sigmoid, which the spec check proves or refutes
        [(activation, line)] = calls.items()
        readings["text.attention.output_gate_activation"] = Reading(activation, (line,), ())
    return readings


# The q/k norms and latent-attention norms attentions keep, which are no output norm even where
# they are as wide as the heads (OLMo 2's full-width q_norm)
_ATTENTION_NORMS = (
    "q_norm",
    "k_norm",
    "q_layernorm",
    "k_layernorm",
    "query_layernorm",
    "key_layernorm",
    "q_a_layernorm",
    "kv_a_layernorm",
)
_ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")


def inner_parts(
    model: Any,
    tiny: Any,
    head_dim: int | None,
    dense_layer: int | None,
    files: Sequence[SourceFile],
) -> dict[str, Reading]:
    """The readings above the tiny model shows, by spec path (attention parts from layer 0,
    the MLP's from the first dense layer); parameter names relative to the layer. ``head_dim``
    is None when the layers have no attention heads."""
    from onboard.analysis.layout import hf_module

    layers = [hf_module(layer) for layer in model.model.layers]
    found: dict[str, Reading | None] = {}
    attention = hf_module(getattr(layers[0], "self_attn", None))
    if attention is not None and head_dim is not None:
        heads = tiny.num_attention_heads
        width = heads * head_dim
        path = "model.layers.0.self_attn"
        found["text.attention.sub_norm"] = sub_norm(attention, path, width, _ATTENTION_NORMS, files)
        found |= output_gate_projection(
            attention, tiny.hidden_size, heads, head_dim, _ATTENTION_PROJECTIONS, files
        )
    found["text.moe.post_norm"] = moe_output_norm(layers, tiny.hidden_size, files)
    mlp = hf_module(getattr(layers[dense_layer], "mlp", None)) if dense_layer is not None else None
    width = _down_width(mlp, tiny.hidden_size) if mlp is not None else None
    if width is not None:
        reading = sub_norm(mlp, f"model.layers.{dense_layer}.mlp", width, (), files)
        if reading is not None:  # its parameters relative to the layer, as the check wants
            names = tuple(f"mlp.{name}" for name in reading.parameters)
            reading = Reading(reading.value, reading.evidence, names)
        found["text.mlp.sub_norm"] = reading
    return {path: reading for path, reading in found.items() if reading is not None}


def moe_output_norm(
    layers: Sequence[Any], hidden: int, files: Sequence[SourceFile]
) -> Reading | None:
    """The one norm among the first MoE block's children as wide as the hidden size: a norm of
    the block's output (A.X-K1), which the spec check proves; parameters relative to the layer."""
    from onboard.analysis.layers import moe_block_name

    found = next(((i, n) for i, layer in enumerate(layers) if (n := moe_block_name(layer))), None)
    if found is None:
        return None
    index, attr = found
    block = getattr(layers[index], attr)
    reading = sub_norm(block, f"model.layers.{index}.{attr}", hidden, (), files)
    if reading is None:
        return None
    names = tuple(f"{attr}.{name}" for name in reading.parameters)
    return Reading(reading.value, reading.evidence, names)


def _down_width(mlp: Any, hidden: int) -> int | None:
    """The input width of the MLP's one linear back to the hidden size (its down projection)."""
    import torch

    widths = {
        m.in_features
        for m in mlp.children()
        if isinstance(m, torch.nn.Linear) and m.out_features == hidden
    }
    return widths.pop() if len(widths) == 1 else None
