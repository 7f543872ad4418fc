"""Check that the spec *computes* what the HF model computes, module by module.

The spec is a description; this module is its executable form, a small torch interpreter that
runs the spec with the tiny HF model's own weights. Each decoder sub-module (attention, MLP, every
norm) is run on the exact input the HF module received (captured with hooks), so a mismatch points
at one module, and the embedding and final logits are checked the same way. Any mismatch becomes
an unresolved delta naming the HF class and the line of its ``forward``: the analysis then says
what it does not understand instead of letting a generator emit plausible but wrong code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onboard.analysis.attention_kinds import declared_kinds, window_of
from onboard.analysis.layout import hf_module
from onboard.analysis.mixers import MIXERS
from onboard.analysis.probe import source_location
from onboard.analysis.rope_reader import rope_parameters_of
from onboard.analysis.spec_check_ffn import FeedForwardInterpreter
from onboard.analysis.spec_check_stacks import run_recurrence
from onboard.analysis.variants import evaluate
from onboard.spec import Delta, TextDecoderSpec
from onboard.tiny import POSITION_SCALE_KEY
from onboard.token_mixers import is_attention, is_feed_forward, sized_for

TOLERANCE = 1e-5  # fp32; with the right spec the interpreter matches HF to ~1e-7 or exactly
SEQ_LEN = 9  # longer than the tiny sliding window
# Far positions make every RoPE frequency turn, so a wrong theta or scaling shows in attention.
POSITION_OFFSET = 3000


@dataclass(frozen=True)
class Mismatch:
    module: str  # model.layers.0.self_attn
    class_name: str
    max_abs: float


def check_spec(text: TextDecoderSpec, model: Any, tiny_config: Any) -> tuple[Delta, ...]:
    """Deltas for every HF module whose output the spec does not reproduce (empty when it does)."""
    import torch

    interpreter = SpecInterpreter(text, model, tiny_config)
    try:
        with torch.no_grad():
            mismatches = interpreter.compare()
    except Exception as exc:  # the interpreter cannot even run: the spec does not fit the model
        return (
            Delta(
                "spec does not fit the HF model",
                type(hf_module(model)).__name__,
                f"{type(exc).__name__}: {exc}",
            ),
        )
    return tuple(_delta(m, model) for m in mismatches)


def find_mismatches(
    text: TextDecoderSpec, model: Any, tiny_config: Any, *, attention_only: bool = False
) -> list[Mismatch] | None:
    """The modules whose output the spec does not reproduce; None when the spec cannot run."""
    import torch

    try:
        with torch.no_grad():
            return SpecInterpreter(text, model, tiny_config).compare(attention_only=attention_only)
    except Exception:  # the interpreter cannot even run: the spec does not fit the model
        return None


def check_attention(text: TextDecoderSpec, model: Any, tiny_config: Any) -> tuple[Delta, ...]:
    """Deltas for the attention modules alone, for a spec that other deltas already mark
    incomplete (so a spec the interpreter cannot run adds nothing: the other deltas say why)."""
    mismatches = find_mismatches(text, model, tiny_config, attention_only=True)
    return tuple(_delta(m, model) for m in mismatches or ())


def _delta(mismatch: Mismatch, model: Any) -> Delta:
    module = hf_module(model.get_submodule(mismatch.module))
    where = source_location(type(module).forward) or mismatch.module
    return Delta(
        f"{mismatch.class_name} computes something the spec does not describe",
        where,
        f"{mismatch.module}: max abs {mismatch.max_abs:.2g} against the spec's computation",
    )


class SpecInterpreter(FeedForwardInterpreter):
    """Runs ``TextDecoderSpec`` in torch with the HF model's weights."""

    def __init__(self, text: TextDecoderSpec, model: Any, tiny_config: Any) -> None:
        from onboard.analysis.expert_lists import StackedExperts

        self.text = text
        self.model = model
        self.config = tiny_config
        # Buffers too: a learned activation keeps some of its constants as buffers (xIELU)
        self.params = dict(model.named_buffers()) | dict(model.named_parameters())
        self.params |= _stacked_head_norms(self.params, text)
        for name in list(self.params):  # GPT-2's Conv1D: the spec says which, use (out, in)
            match = re.match(r"^model\.layers\.\d+\.(.+)\.weight$", name)
            if match and match.group(1) in text.transposed_linears:
                self.params[name] = self.params[name].T
        for name, module in model.named_modules():  # per-expert MLPs read as stacked experts
            if isinstance(module, StackedExperts):
                self.params[f"{name}.down_proj"] = module.down_proj
        if text.attention is not None:  # a pure state-space model has no attention sizes
            self.heads = tiny_config.num_attention_heads
            self.kv_heads = getattr(tiny_config, "num_key_value_heads", None) or self.heads
            if text.attention.multi_query and tiny_config.multi_query:
                self.kv_heads = 1
            self.head_dim = (
                getattr(tiny_config, "head_dim", None) or tiny_config.hidden_size // self.heads
            )
        self._selections: dict[int, Any] = {}  # the lightning indexer's, per layer that runs one
        self.layer_types = list(declared_kinds(tiny_config) or [])
        layers = len(model.model.layers)
        # onboard's kind of each layer: an attention kind, or a hybrid's recurrent mixer
        self.kinds = [text.kind_of_label(t) for t in self.layer_types] or [
            "full_attention"
        ] * layers

    def mixes_tokens(self, layer: int) -> bool:
        """False for a one-block layer of an MLP or experts (NemotronH)."""
        return not is_feed_forward(self.kinds[layer])

    def mixes_channels(self, layer: int) -> bool:
        """False for a one-block layer of attention or a recurrent mixer (NemotronH)."""
        return self.text.feed_forward_of(self.kinds[layer], layer) is not None

    def mixer_name(self, layer: int) -> str:
        """The layer's token mixer attribute: self_attn, or the recurrent mixer's."""
        mixer = self.text.mixers.of(self.kinds[layer])
        return mixer.attribute if mixer is not None else "self_attn"

    def token_mixer(self, layer: int, x: Any) -> Any:
        kind = self.kinds[layer]
        mixer = self.text.mixers.of(kind)
        if mixer is None:
            return self.attention(layer, x)
        compute = next(m.compute for m in MIXERS if m.name == kind)
        tiny = sized_for(mixer, self.config)
        return compute(tiny, self.weight, f"model.layers.{layer}.{mixer.attribute}.", x)

    # -- comparison -------------------------------------------------------------------------

    def compare(self, *, attention_only: bool = False) -> list[Mismatch]:
        import torch

        captured, handles = self._capture()
        ids = (torch.arange(SEQ_LEN) * 7 + 3).remainder(self.config.vocab_size - 1).unsqueeze(0) + 1
        self.positions = torch.arange(SEQ_LEN) + self._first_position()
        try:
            out = self.model(input_ids=ids, position_ids=self.positions[None], use_cache=False)
        finally:
            for handle in handles:
                handle.remove()
        mismatches: list[Mismatch] = []

        def check(name: str, ours: Any, theirs: Any) -> None:
            diff = (ours.float() - theirs.float()).abs().max().item()
            if not math.isfinite(diff) or diff > TOLERANCE:
                module = hf_module(self.model.get_submodule(name))
                mismatches.append(Mismatch(name, type(module).__name__, diff))

        if attention_only:
            for i in range(len(self.model.model.layers)):
                if not is_attention(self.kinds[i]):
                    continue
                x, y = captured[f"model.layers.{i}.self_attn"]
                check(
                    f"model.layers.{i}.self_attn",
                    self.attention(i, x[0]) + self._residual("self_attn", x),
                    y,
                )
            return mismatches
        embed_in, embed_out = captured["model.embed_tokens"]
        # A config multiplier, and sqrt(hidden) too (CTRL), may be applied inside the embedding
        # module or after it; the end-to-end check below covers the product.
        readings = (
            self.embed(embed_in[0]),
            self.embed(embed_in[0], multiplier=False),
            self.embed(embed_in[0], multiplier=False, scale=False),
        )
        closer = min(readings, key=lambda e: (e - embed_out).abs().max().item())
        check("model.embed_tokens", closer, embed_out)
        for i in range(len(self.model.model.layers)):
            prefix = f"model.layers.{i}"
            for role, attr in self.text.norm.names:
                name = f"{prefix}.{attr}"
                if i == 0 and role in self.text.first_layer_without:
                    continue  # an identity there
                if name in captured:
                    x, y = captured[name]
                    check(name, self.layer_norm(i, role, x[0]), y)
            if self.mixes_tokens(i):
                mixer = f"{prefix}.{self.mixer_name(i)}"
                x, y = captured[mixer]
                check(mixer, self.token_mixer(i, x[0]) + self._residual("self_attn", x), y)
            if self.mixes_channels(i):
                ffn = f"{prefix}.{self.ffn_name(i)}"
                x, y = captured[ffn]
                check(ffn, self.mlp(i, x[0]) + self._residual("mlp", x), y)
        if not mismatches:  # end to end, so residual wiring and the head are covered too
            logits = self.forward(ids)
            diff = (logits - out.logits).abs().max().item()
            if not math.isfinite(diff) or diff > TOLERANCE:
                decoder = hf_module(self.model.model)
                mismatches.append(Mismatch("model", type(decoder).__name__, diff))
        return mismatches

    def _residual(self, block: str, inputs: list[Any]) -> Any:
        """What a block that adds the residual itself adds: its second tensor input (BLOOM)."""
        return inputs[1] if block in self.text.blocks_add_residual else 0.0

    def position_rows(self, positions: Any) -> Any:
        spec = self.text.positions
        rows = positions + spec.offset
        if spec.kind == "learned":
            return self.weight("model.embed_positions.weight")[rows]
        table = sinusoidal_table(rows, self.config.hidden_size, spec.divisor)
        if spec.zero_row_key is not None:
            table[rows == getattr(self.config, spec.zero_row_key)] = 0.0
        return table

    def _first_position(self) -> int:
        """Far enough for every RoPE frequency to turn; inside a position table (learned, or
        GPT-J's fixed sin/cos buffer), near its end, so a wrong offset reads other rows."""
        limit = self.config.max_position_embeddings
        fixed = any(b.dim() == 2 and b.shape[0] == limit for b in self.model.buffers())
        if self.text.positions is None and not fixed:
            return POSITION_OFFSET
        return min(POSITION_OFFSET, limit - SEQ_LEN)

    def _capture(self) -> tuple[dict[str, tuple[list[Any], Any]], list[Any]]:
        import torch

        captured: dict[str, tuple[list[Any], Any]] = {}
        wanted = {"model.embed_tokens"}
        for i in range(len(self.model.model.layers)):
            if self.mixes_tokens(i):
                wanted |= {f"model.layers.{i}.{self.mixer_name(i)}"}
            if self.mixes_channels(i):
                wanted |= {f"model.layers.{i}.{self.ffn_name(i)}"}
            wanted |= {f"model.layers.{i}.{attr}" for _, attr in self.text.norm.names}
        handles = []

        def hook(name: str) -> Callable[..., None]:
            def record(_module: Any, args: tuple, kwargs: dict, output: Any) -> None:
                inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
                first = output[0] if isinstance(output, (tuple, list)) else output
                captured[name] = (inputs, first.detach().clone())

            return record

        for name, module in self.model.named_modules():
            if name in wanted:
                handles.append(module.register_forward_hook(hook(name), with_kwargs=True))
        return captured, handles

    # -- the spec's computation -------------------------------------------------------------

    def weight(self, name: str) -> Any:
        return self.params[name]

    def bias(self, name: str) -> Any:
        return self.params.get(name)

    def embed(self, ids: Any, *, multiplier: bool = True, scale: bool = True) -> Any:
        hidden = self.weight("model.embed_tokens.weight")[ids]
        if scale and self.text.embedding_scale == "sqrt_hidden":
            hidden = hidden * self.config.hidden_size**0.5
        return hidden * self.factor("embedding") if multiplier else hidden

    def factor(self, site: str) -> float:
        scale = self.text.scale_at(site)
        return scale.factor(self.config) if scale else 1.0

    def norm(self, x: Any, prefix: str, eps: float | None = None) -> Any:
        import torch

        spec = self.text.norm
        x = x.float()
        if spec.kind == "layer":
            x = x - x.mean(-1, keepdim=True)
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + (eps or spec.eps))
        if spec.weight:
            weight = self.weight(prefix + "weight")
            if weight.dim() == 2:  # one row per head (Cohere's q/k norms): x is [.., heads, seq, d]
                weight = weight[:, None, :]
            y = y * (weight + spec.weight_offset)
        bias = self.bias(prefix + "bias")
        return y + bias if bias is not None else y

    def layer_norm(self, layer: int, role: str, x: Any) -> Any:
        """The norm of ``role`` in ``layer``: plain, or gated where the spec's gate says."""
        from onboard.analysis.gated_norm import channel_mixer, gate

        prefix = f"model.layers.{layer}.{dict(self.text.norm.names)[role]}."
        spec = self.text.norm.gate
        if spec is None or not spec.gates(role, channel_mixer(self.model.model.layers[layer])):
            return self.norm(x, prefix)
        y = self.norm(x, f"{prefix}{spec.norm}.")
        down, up = (self.weight(f"{prefix}{name}.weight") for name in (spec.down, spec.up))
        return gate(y, x, down, up, spec)

    def linear(self, x: Any, prefix: str) -> Any:
        y = x @ self.weight(prefix + "weight").T
        bias = self.bias(prefix + "bias")
        return y + bias if bias is not None else y

    def rope(self, kind: str, positions: Any) -> tuple[Any, Any, int] | None:
        import torch
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        spec = self.text.rope_for(kind)
        if spec.rope_type is None:
            return None
        dim = int(self.head_dim * spec.partial_rotary_factor)
        scaling = 1.0
        if spec.rope_type == "default":
            inv_freq = 1.0 / (spec.theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        else:
            layer_type = (
                kind
                if isinstance(getattr(self.config, "rope_parameters", {}).get(kind), dict)
                else None
            )
            kwargs: dict[str, Any] = {"layer_type": layer_type} if layer_type else {}
            if spec.rope_type == "dynamic":
                # HF rescales for the sequence so far: max(position) + 1, once past
                # max_position_embeddings (modeling_rope_utils.dynamic_rope_update)
                kwargs["seq_len"] = int(positions.max()) + 1
            inv_freq, scaling = ROPE_INIT_FUNCTIONS[spec.rope_type](self.config, None, **kwargs)
        if spec.order is not None:  # the standard table reordered (Cohere Compass)
            params = rope_parameters_of(self.config)
            own = params.get(kind) if isinstance(params.get(kind), dict) else params
            sections = own[spec.order.key]
            inv_freq = inv_freq[list(spec.order.indices(sections, len(inv_freq)))]
        freqs = positions.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        sign = -1.0 if spec.reversed else 1.0
        return emb.cos() * scaling, sign * emb.sin() * scaling, dim

    def attention(self, layer: int, x: Any) -> Any:
        if self.text.attention.mla is not None:
            return self.mla_attention(layer, x)
        return self.standard_attention(layer, x)

    def mla_attention(self, layer: int, x: Any) -> Any:
        """DeepSeek's MLA: low-rank q and kv, RoPE on a slice shared by every key head."""
        import torch

        mla = self.text.attention.mla
        config = self.config
        prefix = f"model.layers.{layer}.self_attn."
        batch, seq, _ = x.shape
        nope, rope_dim, v_dim = config.qk_nope_head_dim, config.qk_rope_head_dim, config.v_head_dim
        q_resid = gate = None
        if mla.q_lora_rank:
            raw = self.linear(x, prefix + "q_a_proj.")
            q_resid = self.norm(raw, prefix + "q_a_layernorm.", mla.norm_eps)
            q = self.linear(q_resid, prefix + "q_b_proj.") if not mla.query_gate else None
        else:
            q = self.linear(x, prefix + "q_proj.")
        if mla.query_gate:  # one projection of both latents: each head's query, then its gate
            latents = {"normed": q_resid, "raw": raw}
            inputs = torch.cat([latents[i] for i in mla.query_gate.inputs], dim=-1)
            fused = self.linear(inputs, f"{prefix}{mla.query_gate.proj}.")
            fused = fused.view(batch, seq, self.heads, nope + rope_dim + v_dim)
            q, gate = fused.split([nope + rope_dim, v_dim], dim=-1)
            gate = gate.reshape(batch, seq, self.heads * v_dim)
        q = q.reshape(batch, seq, self.heads, nope + rope_dim).transpose(1, 2)
        q_pass, q_rot = q.split([nope, rope_dim], dim=-1)
        compressed = self.linear(x, prefix + "kv_a_proj_with_mqa.")
        kv_latent, k_rot = compressed.split([config.kv_lora_rank, rope_dim], dim=-1)
        latent = self.norm(kv_latent, prefix + "kv_a_layernorm.", mla.norm_eps)
        kv = self.linear(latent, prefix + "kv_b_proj.")
        kv = kv.view(batch, seq, self.heads, nope + v_dim).transpose(1, 2)
        k_pass, v = kv.split([nope, v_dim], dim=-1)
        k_rot = k_rot.view(batch, 1, seq, rope_dim)
        kind = self.layer_types[layer] if self.layer_types else self.text.layer_types[0]
        cos, sin, _ = self.rope(kind, self.positions[:seq])
        interleaved = self.text.rope_for(kind).interleaved
        q_rot, k_rot = _rotate(q_rot, cos, sin, interleaved), _rotate(k_rot, cos, sin, interleaved)
        query = torch.cat((q_pass, q_rot), dim=-1)
        key = torch.cat((k_pass, k_rot.expand(-1, self.heads, -1, -1)), dim=-1)
        scores = (query @ key.transpose(-1, -2)) * self._scale() + self._mask(kind, seq)
        if self.text.attention.indexer is not None:  # only the keys the indexer keeps
            scores = scores + self._indexer_mask(layer, x, q_resid, kind)
        probs = torch.softmax(scores.float(), dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(batch, seq, self.heads * v_dim)
        if gate is not None:
            out = out * torch.sigmoid(gate)
        return self.linear(out, f"{prefix}{self.text.name_of('o_proj')}.")

    def _indexer_mask(self, layer: int, x: Any, q_resid: Any, kind: str) -> Any:
        """DeepSeek Sparse Attention's selection, [batch, 1, queries, keys]: 0 at the top-k keys
        of each row by the lightning indexer's scores, -inf elsewhere. A layer the config lists
        as not running its own indexer (GLM-MoE-DSA's shared layers) keeps the selection of the
        last one that did."""
        import torch

        spec = self.text.attention.indexer
        config = self.config
        if spec.layers_key and getattr(config, spec.layers_key)[layer] != spec.own:
            return self._selections[max(i for i in self._selections if i < layer)]
        prefix = f"model.layers.{layer}.self_attn.{spec.attribute}."
        heads, dim = getattr(config, spec.heads_key), getattr(config, spec.head_dim_key)
        rope_dim = config.qk_rope_head_dim
        batch, seq, _ = x.shape
        q = self.linear(q_resid, prefix + "wq_b.").view(batch, seq, heads, dim)
        k = torch.nn.functional.layer_norm(
            self.linear(x, prefix + "wk."),
            (dim,),
            self.weight(prefix + "k_norm.weight"),
            self.weight(prefix + "k_norm.bias"),
            spec.norm_eps,
        )
        cos, sin, _ = self.rope(kind, self.positions[:seq])
        turn = spec.rope_interleaved
        q_rot = _rotate(q[..., :rope_dim], cos[:, None], sin[:, None], turn)
        q = torch.cat((q_rot, q[..., rope_dim:]), dim=-1)
        k = torch.cat((_rotate(k[..., :rope_dim], cos, sin, turn), k[..., rope_dim:]), dim=-1)
        scores = torch.relu(torch.einsum("bshd,btd->bsht", q, k) * dim**-0.5)
        weights = self.linear(x, prefix + "weights_proj.") * heads**-0.5
        index = torch.einsum("bsh,bsht->bst", weights, scores) + self._mask(kind, seq)
        top = index.topk(min(getattr(config, spec.topk_key), seq), dim=-1).indices
        kept = torch.zeros_like(index, dtype=torch.bool).scatter(-1, top, True)
        mask = torch.where(kept, 0.0, float("-inf"))[:, None]
        self._selections[layer] = mask
        return mask

    def standard_attention(self, layer: int, x: Any) -> Any:
        import torch

        spec = self.text.attention
        prefix = f"model.layers.{layer}.self_attn."
        batch, seq, _ = x.shape
        if spec.fused_qkv and spec.fused_qkv_layout == "grouped":  # (group, q/v/k, heads)
            fused = self.linear(x, f"{prefix}{spec.fused_qkv}.")
            fused = fused.view(batch, seq, spec.fused_qkv_groups, 3, -1)
            q, v, k = (fused[..., i, :].reshape(batch, seq, -1) for i in range(3))
        elif spec.fused_qkv and spec.fused_qkv_layout == "per_head":  # (head, q/k/v, head_dim)
            fused = self.linear(x, f"{prefix}{spec.fused_qkv}.")
            fused = fused.view(batch, seq, self.heads, 3, self.head_dim)
            q, k, v = (fused[..., i, :].reshape(batch, seq, -1) for i in range(3))
        elif spec.fused_qkv and spec.fused_qkv_layout == "kv_grouped":  # (kv head, q.. k v, d)
            per = self.heads // self.kv_heads
            fused = self.linear(x, f"{prefix}{spec.fused_qkv}.")
            fused = fused.view(batch, seq, self.kv_heads, per + 2, self.head_dim)
            q = fused[..., :per, :].reshape(batch, seq, -1)
            k, v = (fused[..., i, :].reshape(batch, seq, -1) for i in (-2, -1))
        elif spec.fused_qkv:  # q, k and v concatenated along the output
            widths = [self.heads * self.head_dim] + [self.kv_heads * self.head_dim] * 2
            q, k, v = self.linear(x, f"{prefix}{spec.fused_qkv}.").split(widths, dim=-1)
        else:
            q, k, v = (self.linear(x, f"{prefix}{self.text.name_of(p + '_proj')}.") for p in "qkv")
        kind = self.layer_types[layer] if self.layer_types else self.text.layer_types[0]
        own = spec.for_kind(kind)  # what this layer kind changes (its kv heads, its sinks)
        kv_heads = self.kv_heads * own.kv_heads_factor
        if spec.value_scale is not None:  # before the cache, as HF scales them
            v = v * spec.value_scale
        gate = None
        if spec.output_gate:  # each head's query, then its gate
            q, gate = q.view(batch, seq, self.heads, 2 * self.head_dim).chunk(2, dim=-1)
            q, gate = q.reshape(batch, seq, -1), gate.reshape(batch, seq, -1)
        if spec.output_gate_proj:  # a projection of its own (AFMoE)
            gate = self.linear(x, f"{prefix}{spec.output_gate_proj}.")
        q_norm = f"{prefix}{self.text.name_of('q_norm')}."
        k_norm = f"{prefix}{self.text.name_of('k_norm')}."
        if spec.qk_norm == "full_width":
            q, k = self.norm(q, q_norm), self.norm(k, k_norm)
        q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seq, kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, seq, kv_heads, spec.v_head_dim or self.head_dim).transpose(1, 2)
        if spec.qk_norm == "per_head" and not spec.qk_norm_after_rope:
            q, k = self.norm(q, q_norm), self.norm(k, k_norm)
        rotary = self.rope(kind, self.positions[:seq]) if self.rotates(layer) else None
        if rotary is not None:
            cos, sin, dim = rotary
            interleaved = self.text.rope_for(kind).interleaved
            q = torch.cat((_rotate(q[..., :dim], cos, sin, interleaved), q[..., dim:]), dim=-1)
            k = torch.cat((_rotate(k[..., :dim], cos, sin, interleaved), k[..., dim:]), dim=-1)
        if spec.qk_norm == "per_head" and spec.qk_norm_after_rope:
            q, k = self.norm(q, q_norm), self.norm(k, k_norm)
        if spec.position_scale:  # Ministral 3, after RoPE
            q = q * self._position_scale(self.positions[:seq])[None, None, :, None]
        repeat = self.heads // kv_heads
        k = k.repeat_interleave(repeat, dim=1)
        scale = self._scale()
        scores = (q @ k.transpose(-1, -2)) * scale
        if spec.softcap:
            scores = torch.tanh(scores / spec.softcap) * spec.softcap
        if spec.alibi:  # slope x key position; per query row, the same as -slope x distance
            scores = scores + alibi_slopes(self.heads)[:, None, None] * torch.arange(seq).float()
        if spec.dynamic_mask:
            scores = scores + self._dynamic_mask(prefix, v, kind).repeat_interleave(repeat, dim=1)
        else:
            scores = scores + self._mask(kind, seq)
        sinks = spec.sinks or own.sinks
        if sinks:  # one more column per row, dropped after the softmax
            sink = self.weight(f"{prefix}{sinks}").reshape(1, -1, 1, 1)
            scores = torch.cat([scores, sink.expand(*scores.shape[:-1], 1)], dim=-1)
            probs = torch.softmax(scores.float(), dim=-1)[..., :-1]
        else:
            probs = torch.softmax(scores.float(), dim=-1)
        if spec.differential:
            out = self._differential(layer, prefix, probs, v)
        else:
            out = probs @ v.repeat_interleave(repeat, dim=1)
        out = out.transpose(1, 2).reshape(batch, seq, -1)
        if gate is not None:
            out = out * self._squashed_gate(gate)
        if spec.sub_norm:  # BitNet
            out = self.norm(out, f"{prefix}{spec.sub_norm}.")
        return self.linear(out, f"{prefix}{self.text.name_of('o_proj')}.")

    def _squashed_gate(self, gate: Any) -> Any:
        """The output gate after its squashing, one value per channel of the heads' output
        (a per-head gate repeated over the head's channels)."""
        import torch

        spec = self.text.attention
        squashed = (
            torch.nn.functional.softplus(gate.float())
            if spec.output_gate_activation == "softplus"
            else torch.sigmoid(gate)
        )
        if spec.output_gate_per_head:
            squashed = squashed.repeat_interleave(self.head_dim, dim=-1)
        return squashed

    def _dynamic_mask(self, prefix: str, v: Any, kind: str) -> Any:
        """Doge: exp(A * softplus(dt_proj(values))) per key and kv head where the causal mask
        allows, the dtype's minimum elsewhere; beyond keep_window keys only the row's highest
        stay. [batch, kv heads, queries, keys]."""
        import torch
        from torch.nn.functional import softplus

        spec = self.text.attention.dynamic_mask
        batch, _, seq, _ = v.shape
        values = v.transpose(1, 2).reshape(batch, seq, -1)
        dt = self.linear(values, f"{prefix}{spec.proj}.")
        dt = torch.exp(self.weight(f"{prefix}{spec.decay}") * softplus(dt)).transpose(-1, -2)
        lowest = torch.finfo(dt.dtype).min
        mask = torch.where(self._mask(kind, seq) == 0.0, dt[:, :, None, :], lowest)
        keep = getattr(self.config, spec.keep_window_key) if spec.keep_window_key else None
        if keep is not None and seq > keep:
            top = torch.topk(mask, keep, dim=-1).indices
            kept = torch.zeros_like(mask, dtype=torch.bool).scatter(-1, top, True)
            mask = mask.masked_fill(~kept, lowest)
        return mask

    def _differential(self, layer: int, prefix: str, probs: Any, v: Any) -> Any:
        """DiffLlama: both halves of the value heads (each repeated to every kv head) side by
        side, the first half of the heads minus lambda x the second, a pair norm, x (1 -
        lambda_init). [batch, heads / 2, queries, 2 x head_dim]."""
        import torch

        spec = self.text.attention.differential
        repeat = self.heads // self.kv_heads
        halves = [h.repeat(1, 2, 1, 1) for h in torch.chunk(v, 2, dim=1)]
        paired = torch.cat([probs @ h.repeat_interleave(repeat, dim=1) for h in halves], dim=-1)
        first, second = torch.chunk(paired, 2, dim=1)
        q1, k1, q2, k2 = (self.weight(prefix + name) for name in spec.lambdas)
        init = evaluate(spec.lambda_init, layer)
        lam = torch.exp(torch.sum(q1 * k1)) - torch.exp(torch.sum(q2 * k2)) + init
        out = first - lam * second
        eps = getattr(self.config, spec.eps_key)
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + eps)
        return out * (1 - init)

    def _position_scale(self, positions: Any) -> Any:
        import torch

        rope = self.config.rope_parameters
        span = float(rope["original_max_position_embeddings"])
        return 1 + rope[POSITION_SCALE_KEY] * torch.log1p(torch.floor(positions / span))

    def rotates(self, layer: int) -> bool:
        key = self.text.rope_layers_key
        return not key or bool(getattr(self.config, key)[layer])

    def _scale(self) -> float:
        from onboard.analysis.attention_reader import yarn_scale

        spec = self.text.attention
        if spec.unscaled:
            return 1.0
        if spec.scale_key:
            return float(getattr(self.config, spec.scale_key)) ** spec.scale_power
        if spec.mla is not None:
            qk = self.config.qk_nope_head_dim + self.config.qk_rope_head_dim
            return yarn_scale(self.config, qk**-0.5) if spec.yarn_mscale else qk**-0.5
        return self.head_dim**-0.5

    def _mask(self, kind: str, seq: int) -> Any:
        import torch

        i = torch.arange(seq)[:, None]
        j = torch.arange(seq)[None, :]
        allowed = j <= i
        window = window_of(self.config)
        if kind == "sliding_attention" and window:
            allowed &= j > i - window
        return torch.where(allowed, 0.0, float("-inf"))

    def forward(self, ids: Any) -> Any:
        hidden = self.embed(ids)
        if self.text.positions is not None:
            hidden = hidden + self.position_rows(self.positions)
        if self.text.embedding_norm:  # after the positions, as the generated code does
            hidden = self.norm(hidden, "model.embed_norm.")
        if self.text.recurrence is not None:  # HRM: the stacks in cycles
            hidden = run_recurrence(self, hidden, self.layers)
        else:
            hidden = self.layers(hidden)
        return self.head(hidden)

    def layers(self, hidden: Any) -> Any:
        """The layers named ``model.layers.*``, in order."""
        names = dict(self.text.norm.names)
        for i in range(len(self.model.model.layers)):
            prefix = f"model.layers.{i}."

            def norm(role: str, x: Any, layer: int = i) -> Any:
                if role not in names or (layer == 0 and role in self.text.first_layer_without):
                    return x
                return self.layer_norm(layer, role, x)

            residual = self.factor("residual")
            gate = {role: self.weight(f"{prefix}{attr}") for role, attr in self.text.residual_gates}
            if not self.mixes_tokens(i):  # one block: x + mlp(norm(x))
                hidden = hidden + self.mlp(i, norm("mlp_in", hidden)) * residual
                continue
            attn = norm("attn_out", self.token_mixer(i, norm("attn_in", hidden)))
            last_bias = self.text.attention and self.text.attention.last_layer_o_bias
            if last_bias and i == len(self.model.model.layers) - 1:  # beside the module's output
                attn = attn + self.weight(f"{prefix}self_attn.{last_bias}")
            if self.text.norm.placement == "parallel":  # both read the layer's input
                mlp = self.mlp(i, norm("mlp_in", hidden))
                hidden = hidden + attn * residual + mlp * residual
                continue
            hidden = norm("attn_add", hidden * gate.get("attn", 1.0) + attn * residual)
            if not self.mixes_channels(i):  # one block: x + mixer(norm(x))
                continue
            mlp = norm("mlp_out", self.mlp(i, norm("mlp_in", hidden))) * residual
            hidden = norm("mlp_add", hidden * gate.get("mlp", 1.0) + mlp)
        return hidden

    def head(self, hidden: Any) -> Any:
        """The final norm, any head transform, the head and the logits' scale and cap."""
        import torch

        if self.text.final_norm:
            hidden = self.norm(hidden, f"model.{self.text.name_of('final_norm')}.")
        transform = self.text.head_transform
        if transform is not None:
            from transformers.activations import ACT2FN

            dense = self.linear(hidden, f"model.head_transform.{transform.dense}.")
            hidden = self.norm(
                ACT2FN[transform.activation](dense), f"model.head_transform.{transform.norm}."
            )
        head = self.params.get("lm_head.weight", self.weight("model.embed_tokens.weight"))
        logits = hidden @ head.T
        if self.text.lm_head_bias:
            logits = logits + self.weight("lm_head.bias")
        logits = logits * self.factor("logits")
        cap = self.text.final_logit_softcap
        return torch.tanh(logits / cap) * cap if cap else logits


def alibi_slopes(heads: int) -> Any:
    """The ALiBi paper's slopes: a geometric series for the largest power of two of heads, the
    remaining heads interleaved from the series of twice as many."""
    import torch

    closest = 2 ** math.floor(math.log2(heads))
    base = 2.0 ** (-(2.0 ** -(math.log2(closest) - 3)))
    slopes = [base**i for i in range(1, closest + 1)]
    extra = 2.0 ** (-(2.0 ** -(math.log2(2 * closest) - 3)))
    slopes += [extra**i for i in range(1, 1 + 2 * (heads - closest), 2)]
    return torch.tensor(slopes)


def sinusoidal_table(rows: Any, width: int, divisor: str = "half-1") -> Any:
    """The sinusoidal rows (a 1-D torch tensor of row numbers) of a ``width``-wide table."""
    import torch

    half = width // 2
    steps = half - 1 if divisor == "half-1" else half
    freq = torch.exp(torch.arange(half).float() * -(math.log(10000.0) / steps))
    angles = rows.float()[:, None] * freq[None, :]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    return torch.nn.functional.pad(table, (0, width % 2))


def _rotate(x: Any, cos: Any, sin: Any, interleaved: bool = False) -> Any:
    """RoPE as HF applies it; interleaved pairs are first gathered into halves (DeepSeek)."""
    import torch

    if interleaved:
        d = x.shape[-1]
        x = x.reshape(*x.shape[:-1], d // 2, 2).transpose(-1, -2).reshape(*x.shape)
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _stacked_head_norms(params: dict[str, Any], text: Any) -> dict[str, Any]:
    """q/k norm weights saved one module per head (StableLM's ``q_layernorm.norms.{h}``), as
    the [heads, head_dim] weight the spec's per-head norm reads, the way a target loads them."""
    import torch

    listed = text.attention and text.attention.qk_norm_head_modules
    if not listed:
        return {}
    rows: dict[str, dict[int, Any]] = {}
    pattern = re.compile(rf"^(.*)\.{re.escape(listed)}\.(\d+)\.weight$")
    for name, tensor in params.items():
        if found := pattern.match(name):
            rows.setdefault(f"{found[1]}.weight", {})[int(found[2])] = tensor
    return {name: torch.stack([by[h] for h in sorted(by)]) for name, by in rows.items()}
