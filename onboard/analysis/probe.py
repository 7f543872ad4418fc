"""Probe a tiny, randomly initialised HF model: what it contains and what it computes.

Reading parameters and running small numeric experiments on real modules is evidence that does
not depend on how the source is written: a norm whose output is non-zero with zero weights scales
by (1 + w); an embedding whose output is a multiple of its weight rows is scaled; the tensors a
norm's output flows into tell pre-norm from post-norm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from onboard.analysis.layers import ffn_block_name
from onboard.analysis.layout import analysed_layer, hf_module, learns
from onboard.checkpoint import parameter_shapes, tensor_shapes
from onboard.errors import ExitCode, UnsupportedFeatureError
from onboard.failures import failure
from onboard.remote_idioms import is_remote
from onboard.spec import WeightSplit

PROBE_TOKENS = 6


class TinyModelRunError(UnsupportedFeatureError):
    """transformers' own forward fails at the tiny sizes (other sizes may run)."""


class RemoteCodeRunError(TinyModelRunError):
    """The checkpoint's own code (trusted remote code) raised while the tiny model ran: its
    failure, not onboard's (exit 6); a TinyModelRunError still, so the fallback heads are tried."""

    exit_code = ExitCode.REMOTE_CODE_FAILED


@dataclass(frozen=True)
class NormProbe:
    """One norm module of decoder layer 0 (or the final norm), measured."""

    name: str  # attribute path, e.g. "input_layernorm", "self_attn.q_norm"
    class_name: str
    kind: str  # rms or layer
    weight_offset: float
    eps: float | None
    width: int
    has_bias: bool
    has_weight: bool = True  # False for parameter-free norms (OLMo's LayerNorm, NanoChat's)


@dataclass(frozen=True)
class LayerFlow:
    """Which layer-0 norms sit before / after attention and the MLP (by following tensors)."""

    attn_in: tuple[str, ...]
    attn_out: tuple[str, ...]
    mlp_in: tuple[str, ...]
    mlp_out: tuple[str, ...]
    parallel: bool  # attention and MLP read the same tensor
    # Blocks that take the residual and return it added (BLOOM: self_attn and mlp; MPT: mlp): a
    # norm reading their output reads the residual stream (pre-norm), not the block's output
    residual_inside: tuple[str, ...] = ()
    # Norms of the residual stream just after attention's / the MLP's add (OpenAI GPT's
    # ln_1(x + attn(x)), ln_2(n + mlp(n))): post-residual layers, when attention reads x itself
    attn_add: tuple[str, ...] = ()
    mlp_add: tuple[str, ...] = ()


@dataclass(frozen=True)
class Probe:
    model_class: str
    modules: tuple[tuple[str, str], ...]  # name, class
    parameters: tuple[tuple[str, tuple[int, ...]], ...]  # in-memory names and shapes
    # safetensors names and shapes, as transformers reads them (``load_renames`` applied)
    disk_tensors: tuple[tuple[str, tuple[int, ...]], ...]
    layer_norms: tuple[NormProbe, ...]
    final_norm: NormProbe | None
    flow: LayerFlow
    embed_scale: float | None
    attention_scaling: float | None
    attention_softcap: float | None
    rotary_dims: tuple[tuple[str, int], ...]  # layer kind (or "default") -> rotary dim
    # Per decoder layer: does its attention rotate q and k? Empty when the probe cannot tell
    # (the attention does not take RoPE as ``position_embeddings``).
    rope_layers: tuple[bool | None, ...] = ()
    # Modules that store their weight (in, out) (GPT-2's Conv1D); ``parameters`` gives those
    # weights in nn.Linear's (out, in) shape, so every shape rule reads them alike.
    transposed: tuple[str, ...] = ()
    # Norms of the other layers that layer 0 replaces by an identity (ModernBERT's attn_norm):
    # flow and norms are then read on layer 1
    first_layer_identity: tuple[str, ...] = ()
    # Saved-name substrings transformers renames on load (``load_renames``), in its order
    load_renames: tuple[tuple[str, str], ...] = ()
    # Saved tensors transformers cuts into several on load (``load_splits``), before renames
    load_splits: tuple[WeightSplit, ...] = ()

    def param_shape(self, name: str) -> tuple[int, ...] | None:
        return dict(self.parameters).get(name)

    def has_module(self, name: str) -> bool:
        return any(n == name for n, _ in self.modules)


def probe_model(model: Any, disk_model: Any = None) -> Probe:
    """``model`` as the analysis sees it (a Llama-layout view, see ``layout``); ``disk_model``
    the HF model the checkpoint names come from (default: ``model``)."""
    import torch

    decoder = _decoder(model)
    identity = _identity_norms(decoder.layers)
    layer = decoder.layers[1] if identity else analysed_layer(decoder.layers)
    transposed = tuple(n for n, m in model.named_modules() if type(m).__name__ == "Conv1D")
    with torch.no_grad():
        flow = _trace_layer_flow(model, layer)
        hidden = model.config.hidden_size
        layer_norms = tuple(
            _measure_norm(name, module, hidden)
            for name, module in layer.named_modules()
            if name and is_norm(module) and _takes_one_input(module)
        )
        final_name = final_norm_name(decoder)
        final = getattr(decoder, final_name, None)
        attn = getattr(layer, "self_attn", None)
        return Probe(
            model_class=type(hf_module(model)).__name__,
            modules=tuple((n, type(m).__name__) for n, m in model.named_modules() if n),
            parameters=_linear_shapes(parameter_shapes(model), transposed),
            disk_tensors=tensor_shapes(disk_model if disk_model is not None else model),
            layer_norms=layer_norms,
            final_norm=_measure_norm(final_name, final, hidden) if final is not None else None,
            flow=flow,
            embed_scale=_embed_scale(decoder.embed_tokens),
            attention_scaling=_float_attr(attn, "scaling"),
            attention_softcap=_float_attr(attn, "attn_logit_softcapping")
            or _float_attr(getattr(model, "config", None), "attn_logit_softcapping"),
            rotary_dims=_rotary_dims(getattr(decoder, "rotary_emb", None))
            or _attention_rotary_dims(attn),
            rope_layers=_rope_layers(model, decoder.layers),
            transposed=transposed,
            first_layer_identity=identity,
        )


def _identity_norms(layers: Any) -> tuple[str, ...]:
    """Children of layer 0 that are identities where layer 1 has a norm of the same name."""
    import torch

    if len(layers) < 2:
        return ()
    first, second = layers[0], layers[1]
    return tuple(
        name
        for name, child in first.named_children()
        if isinstance(child, torch.nn.Identity)
        and isinstance(other := getattr(second, name, None), torch.nn.Module)
        and is_norm(other)
    )


def _linear_shapes(
    shapes: tuple[tuple[str, tuple[int, ...]], ...], transposed: tuple[str, ...]
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    weights = {f"{name}.weight" for name in transposed}
    return tuple((n, shape[::-1] if n in weights else shape) for n, shape in shapes)


# What decoders call their final norm (Phi, Persimmon: final_layernorm).
FINAL_NORM_NAMES = ("norm", "final_layernorm")


def final_norm_name(decoder: Any) -> str:
    return next((n for n in FINAL_NORM_NAMES if hasattr(decoder, n)), "norm")


def _decoder(model: Any) -> Any:
    """The Llama-family layout: model.embed_tokens, model.layers, a final norm, lm_head."""
    decoder = getattr(model, "model", None)
    missing = [
        f"model.{attr}"
        for attr in ("embed_tokens", "layers")  # no final norm is a finding (OpenAI GPT)
        if decoder is None or not hasattr(decoder, attr)
    ]
    if missing:
        top = ", ".join(name for name, _ in model.named_children())
        raise UnsupportedFeatureError(
            f"{type(model).__name__} has no {', '.join(missing)} (its top-level modules: {top}); "
            "onboard generates the Llama-family layout so far"
        )
    if len(decoder.layers) == 0:
        raise UnsupportedFeatureError(
            f"the tiny {type(model).__name__} has no decoder layers: onboard could not tell which "
            "config key holds the layer count"
        )
    return decoder


def is_norm(module: Any) -> bool:
    import torch

    from onboard.analysis.gated_norm import is_gated_norm

    if isinstance(module, torch.nn.LayerNorm):
        return True
    name = type(module).__name__.lower()
    weighted = getattr(module, "weight", None) is not None
    parameter_free = not learns(module)
    return "norm" in name and (weighted or parameter_free or is_gated_norm(module))


def _takes_one_input(module: Any) -> bool:
    """A norm called on the hidden states alone: a gated norm (Qwen3-Next's ``norm(x, gate)``)
    belongs to its token mixer, whose reader runs it with the gate."""
    import inspect

    parameters = inspect.signature(module.forward).parameters.values()
    required = [
        p
        for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(required) <= 1


def _measure_norm(name: str, module: Any, width: int) -> NormProbe:
    """Run the norm with zero and unit weights to read its offset and whether it centres (a
    gated norm's plain norm: ``gated_norm`` reads its gate)."""
    import torch

    from onboard.analysis.gated_norm import inner_norm, is_gated_norm

    if is_gated_norm(module):
        plain = _measure_norm(name, inner_norm(module), width)
        return dataclasses.replace(plain, class_name=type(module).__name__)
    weight = getattr(module, "weight", None)
    eps = _float_attr(module, "variance_epsilon") or _float_attr(module, "eps")
    if not isinstance(weight, torch.nn.Parameter):
        return _measure_parameter_free_norm(name, module, eps, width)
    saved = weight.detach().clone()
    bias = getattr(module, "bias", None)
    saved_bias = bias.detach().clone() if bias is not None else None
    # a weight per head (Cohere's q/k norms, [heads, head_dim]) takes rows of that shape
    x = torch.randn(3, *weight.shape) * 2 + 0.5
    try:
        weight.zero_()
        if bias is not None:
            bias.zero_()
        zero_out = module(x)
        offset = 0.0 if zero_out.abs().max().item() < 1e-6 else 1.0
        weight.fill_(1.0 - offset)
        unit_out = module(x)
    finally:
        weight.copy_(saved)
        if bias is not None:
            bias.copy_(saved_bias)
    centred = unit_out.mean(dim=-1).abs().max().item() < 1e-4
    return NormProbe(
        name=name,
        class_name=type(module).__name__,
        kind="layer" if centred else "rms",
        weight_offset=offset,
        eps=eps,
        width=width,
        has_bias=bias is not None,
    )


def _measure_parameter_free_norm(
    name: str, module: Any, eps: float | None, width: int
) -> NormProbe:
    """A norm with nothing to learn: whether it centres, and its epsilon, which such norms
    often fix in code (OLMo: ``eps=1e-5``) rather than keep as an attribute."""
    import torch

    shape = getattr(module, "normalized_shape", None)  # torch's norms and OLMo's know theirs
    if isinstance(shape, tuple | list) and len(shape) == 1 and isinstance(shape[0], int):
        width = shape[0]
    x = torch.randn(3, width) * 2 + 0.5
    try:
        out = module(x)
        small = torch.tensor([1e-3, -1e-3]).repeat(width // 2).unsqueeze(0)
        ratio = (small[0, 0] / module(small)[0, 0]).item()
    except Exception:
        raise UnsupportedFeatureError(
            f"norm {name} ({type(module).__name__}) has no learnable weight and cannot be run "
            f"on its own at width {width}"
        ) from None
    centred = out.mean(dim=-1).abs().max().item() < 1e-4
    if eps is None:  # x / sqrt(mean(x^2) + eps) with mean(x^2) = 1e-6
        eps = float(f"{ratio**2 - 1e-6:.2g}")
    return NormProbe(
        name=name,
        class_name=type(module).__name__,
        kind="layer" if centred else "rms",
        weight_offset=0.0,
        eps=eps,
        width=width,
        has_bias=False,
        has_weight=False,
    )


def _trace_layer_flow(model: Any, layer: Any) -> LayerFlow:
    """Run the model once and follow layer 0's tensors between its norms, attention and MLP."""
    import torch

    calls: dict[str, tuple[set[int], set[int]]] = {}
    first: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # first input and output
    alive: list[torch.Tensor] = []  # keeps tensors referenced so their ids are never reused
    hooks = []

    def record(name: str):
        def hook(_module, args, kwargs, output):
            inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            outs = output if isinstance(output, (tuple, list)) else (output,)  # OpenAI GPT: list
            outputs = [o for o in outs if isinstance(o, torch.Tensor)]
            alive.extend(inputs + outputs)
            calls[name] = ({id(t) for t in inputs}, {id(t) for t in outputs})
            if inputs and outputs:
                first[name] = (inputs[0], outputs[0])

        return hook

    ffn = ffn_block_name(layer)
    mixer = _token_mixer_name(layer, ffn)
    watched = {
        {ffn: "mlp", mixer: "self_attn"}.get(n, n): m
        for n, m in layer.named_children()
        if n in ("self_attn", ffn, mixer) or is_norm(m)
    }
    for name, module in watched.items():
        hooks.append(module.register_forward_hook(record(name), with_kwargs=True))
    try:
        ids = torch.arange(1, PROBE_TOKENS + 1).unsqueeze(0) % model.config.vocab_size
        model(input_ids=ids, use_cache=False)
    except Exception as exc:  # the HF code itself fails on the tiny shapes
        if is_remote(model.config):
            raise RemoteCodeRunError(failure(exc, "running the tiny model")) from None
        raise TinyModelRunError(
            f"transformers' {type(hf_module(model)).__name__} does not run at the tiny sizes "
            f"onboard uses ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
        ) from None
    finally:
        for hook in hooks:
            hook.remove()

    norms = [n for n in watched if n not in ("self_attn", "mlp")]
    attn_in, attn_out = calls.get("self_attn", (set(), set()))
    mlp_in, mlp_out = calls.get("mlp", (set(), set()))

    def feeding(targets: set[int]) -> tuple[str, ...]:
        return tuple(n for n in norms if n in calls and calls[n][1] & targets)

    def fed_by(sources: set[int]) -> tuple[str, ...]:
        return tuple(n for n in norms if n in calls and calls[n][0] & sources)

    # GPT-NeoX: two norms, both of the layer's input, feed attention and the MLP.
    two_norms = any(
        calls[a][0] & calls[m][0] for a in feeding(attn_in) for m in feeding(mlp_in) if a != m
    )
    inside = tuple(n for n in ("self_attn", "mlp") if n in watched and takes_residual(watched[n]))

    def reading_sum(block: str) -> tuple[str, ...]:
        """Norms whose input is the block's input plus its output (a residual add)."""
        if block not in first or block in inside:
            return ()
        x, y = first[block]
        return tuple(
            n
            for n in norms
            if n in first
            and first[n][0].shape == x.shape == y.shape
            and torch.allclose(first[n][0], x + y, atol=1e-6)
        )

    return LayerFlow(
        attn_in=feeding(attn_in),
        attn_out=() if "self_attn" in inside else fed_by(attn_out),
        mlp_in=feeding(mlp_in),
        mlp_out=() if "mlp" in inside else fed_by(mlp_out),
        parallel=bool(attn_in & mlp_in) or two_norms,
        residual_inside=inside,
        attn_add=() if feeding(attn_in) else reading_sum("self_attn"),
        mlp_add=reading_sum("mlp"),
    )


def _token_mixer_name(layer: Any, ffn: str | None) -> str:
    """The block that mixes tokens: attention, or in a one-block layer (whose view keeps the
    HF layer as ``hf``) a recurrent mixer under its HF name (Mamba's ``mixer``)."""
    import torch

    if hasattr(layer, "self_attn") or not isinstance(getattr(layer, "hf", None), torch.nn.Module):
        return "self_attn"
    others = [n for n, m in layer.named_children() if n != ffn and not is_norm(m)]
    return others[0] if len(others) == 1 else "self_attn"


def takes_residual(module: Any) -> bool:
    """BLOOM's blocks take ``residual`` and return their output with it added."""
    import inspect

    return "residual" in inspect.signature(module.forward).parameters


def _rope_layers(model: Any, layers: Any) -> tuple[bool | None, ...]:
    """Per layer, whether attention output changes when RoPE is made the identity (cos 1, sin 0).

    Some models skip RoPE in some layers (EXAONE 4 and Cohere 2 in full-attention layers, SmolLM3
    by ``no_rope_layers``); rerunning each attention on its own captured inputs shows it.
    """
    import torch

    calls: dict[int, tuple[tuple, dict, Any]] = {}

    def record(index: int):
        def hook(_module, args, kwargs, output):
            calls[index] = (args, kwargs, output[0] if isinstance(output, tuple) else output)

        return hook

    attentions = [getattr(layer, "self_attn", None) for layer in layers]
    hooks = [
        attn.register_forward_hook(record(i), with_kwargs=True)
        for i, attn in enumerate(attentions)
        if attn is not None
    ]
    try:
        ids = torch.arange(1, PROBE_TOKENS + 1).unsqueeze(0) % model.config.vocab_size
        model(input_ids=ids, use_cache=False)
    finally:
        for hook in hooks:
            hook.remove()
    found = tuple(_rotates(attn, calls.get(i)) for i, attn in enumerate(attentions))
    return found if any(found) else ()


def _rotates(attention: Any, call: tuple[tuple, dict, Any] | None) -> bool | None:
    import torch

    if call is None:
        return None
    args, kwargs, output = call
    rope = kwargs.get("position_embeddings")
    if not (isinstance(rope, tuple) and len(rope) == 2 and isinstance(output, torch.Tensor)):
        return None
    cos, sin = rope
    identity = (torch.ones_like(cos), torch.zeros_like(sin))
    # A freshly initialised post-norm model (no norm before attention) feeds it embeddings of
    # std initializer_range: q.k is then so small that attention is uniform whatever RoPE
    # does. Both runs take the same hidden states rescaled to RMS_RESCALED.
    args, kwargs = _rescaled_hidden(args, kwargs)
    try:
        rotated = attention(*args, **kwargs)
        plain = attention(*args, **{**kwargs, "position_embeddings": identity})
    except Exception:  # an attention that cannot be rerun on its own tells nothing
        return None
    rotated = rotated[0] if isinstance(rotated, tuple) else rotated
    plain = plain[0] if isinstance(plain, tuple) else plain
    return bool((plain - rotated).abs().max().item() > 1e-6)


RMS_RESCALED = 4.0


def _rescaled_hidden(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The attention's call with its hidden states (first argument) at RMS ``RMS_RESCALED``."""
    import torch

    def rescale(x: torch.Tensor) -> torch.Tensor:
        rms = x.float().pow(2).mean().sqrt().clamp_min(1e-12)
        return x * (RMS_RESCALED / rms).to(x.dtype)

    if args and isinstance(args[0], torch.Tensor) and args[0].is_floating_point():
        return (rescale(args[0]), *args[1:]), kwargs
    hidden = kwargs.get("hidden_states")
    if isinstance(hidden, torch.Tensor):
        return args, {**kwargs, "hidden_states": rescale(hidden)}
    return args, kwargs


def source_location(function: Any) -> str | None:
    """``modeling_x.py:123`` of a function or method (decorators unwrapped), if it has a source."""
    import inspect

    function = inspect.unwrap(function)
    try:
        _, start = inspect.getsourcelines(function)
        path = inspect.getsourcefile(function) or ""
    except (OSError, TypeError):
        return None
    return f"{path.rsplit('/', 1)[-1]}:{start}"


def _embed_scale(embedding: Any) -> float | None:
    import torch

    ids = torch.arange(min(8, embedding.weight.shape[0]))
    out = embedding(ids)
    rows = embedding.weight[ids]
    mask = rows.abs() > 1e-6
    if not mask.any():
        return None
    ratio = (out[mask] / rows[mask]).mean().item()
    return None if abs(ratio - 1.0) < 1e-6 else ratio


def _rotary_dims(rotary: Any) -> tuple[tuple[str, int], ...]:
    if rotary is None:
        return ()
    dims = []
    for name, buffer in rotary.named_buffers(recurse=False):
        if name == "inv_freq":
            dims.append(("default", 2 * buffer.numel()))
        elif name.endswith("_inv_freq") and not name.endswith("original_inv_freq"):
            dims.append((name.removesuffix("_inv_freq"), 2 * buffer.numel()))
    return tuple(sorted(dims))


def _attention_rotary_dims(attention: Any) -> tuple[tuple[str, int], ...]:
    """RoPE kept in the attention: GPT-J's sin/cos table over its first ``rotary_dim``, or a
    rotary module of its own (2024 remote code: InternLM2's ``attention.rotary_emb``)."""
    if attention is None:
        return ()
    own = getattr(attention, "rotary_emb", None)
    if own is not None and (dims := _rotary_dims(own)):
        return dims
    dim = getattr(attention, "rotary_dim", None)
    table = getattr(attention, "embed_positions", None)
    if not isinstance(dim, int) or table is None or table.shape[-1] != dim:
        return ()
    return (("default", dim),)


def _float_attr(obj: Any, name: str) -> float | None:
    value = getattr(obj, name, None) if obj is not None else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
