"""The spec interpreter's feed-forward blocks: the dense MLP and the MoE block (routed experts,
their router and shared experts), run as the spec says with the HF model's weights.

``FeedForwardInterpreter`` is a part of ``spec_check.SpecInterpreter``, which supplies the
model, the spec, the parameters and the shared steps (``linear``, ``norm``, ``weight``); one
module for what mixes tokens, this one for what mixes channels.
"""

from __future__ import annotations

import functools
from typing import Any

from onboard.analysis.layers import ffn_block_name


class FeedForwardInterpreter:
    """The dense MLP and the MoE block of ``SpecInterpreter``."""

    model: Any
    text: Any
    config: Any
    params: dict[str, Any]

    def ffn_name(self, layer: int) -> str:
        """The layer's feed-forward attribute: mlp, or Granite MoE's block_sparse_moe."""
        return ffn_block_name(self.model.model.layers[layer])

    def mlp(self, layer: int, x: Any) -> Any:
        prefix = f"model.layers.{layer}.{self.ffn_name(layer)}."
        if f"{prefix}experts.down_proj" in self.params:
            return self.moe(layer, x)
        return self.dense_mlp(prefix, x)

    def moe(self, layer: int, x: Any) -> Any:
        """Routed experts (the spec's router on the router's weights) plus shared experts."""
        import torch
        from transformers.activations import ACT2FN

        from onboard.analysis.clamped_glu import glu_function
        from onboard.analysis.moe import routed_output
        from onboard.analysis.router import correction_bias, route_with_shared

        spec = self.text.moe
        prefix = f"model.layers.{layer}.{self.ffn_name(layer)}."
        block = self.model.get_submodule(prefix.rstrip("."))
        router = block.get_submodule(spec.router_name)
        hidden = x.reshape(-1, x.shape[-1])
        top_k = getattr(self.config, spec.top_k_key, None) or spec.top_k
        caller = block.get_submodule(spec.router_name.partition(".")[0])  # HF calls it
        correction = correction_bias(router, block)
        if correction is None:
            correction = correction_bias(caller, block)
        weights, indices, shares = route_with_shared(hidden, router, spec.router, top_k, correction)
        act = ACT2FN[spec.activation]
        glu = glu_function(spec.glu, self.config) if spec.glu else None
        out = routed_output(block.experts, hidden, indices, weights, act, spec.plain, glu)
        if spec.shared is not None:
            shared_prefix = f"{prefix}{spec.shared.name}."
            if spec.shared.stacked:  # each shared expert scaled by its router weight
                shared = self.stacked_experts(shared_prefix, hidden, shares, act)
            elif spec.shared.glu:  # a clamped GLU of one fused gate_up projection
                fused = self.linear(hidden, f"{shared_prefix}{spec.shared.leaf('gate_up')}.")
                gated = glu_function(spec.shared.glu, self.config)(fused)
                shared = self.linear(gated, f"{shared_prefix}{spec.shared.leaf('down')}.")
            elif spec.shared.plain:  # up, activation, down, as the routed experts
                up = self.linear(hidden, f"{shared_prefix}{spec.shared.leaf('up')}.")
                down = f"{shared_prefix}{spec.shared.leaf('down')}."
                shared = self.linear(ACT2FN[spec.activation](up), down)
            else:
                gate, up, down = (spec.shared.leaf(r) for r in ("gate", "up", "down"))
                shared = self.dense_mlp(shared_prefix, hidden, gated=(gate, up, down))
            if spec.shared.gated:
                shared = torch.sigmoid(self.linear(hidden, prefix + "shared_expert_gate.")) * shared
            out = out + shared
        if spec.post_norm:  # A.X-K1: a norm of the block's output
            out = self.norm(out, f"{prefix}{spec.post_norm}.")
        return out.view_as(x)

    def stacked_experts(self, prefix: str, x: Any, shares: Any, act: Any) -> Any:
        """Shared experts in 3-D gate / up / down parameters, each times its column of
        ``shares`` (the router's weights of the shared experts)."""
        gates, ups, downs = (self.params[f"{prefix}{p}_proj"] for p in ("gate", "up", "down"))
        out = 0
        for expert in range(gates.shape[0]):
            value = act(x @ gates[expert].T) * (x @ ups[expert].T)
            out = out + (value @ downs[expert].T) * shares[:, expert, None].to(x.dtype)
        return out

    def dense_mlp(self, prefix: str, x: Any, *, gated: tuple[str, str, str] | None = None) -> Any:
        """The dense MLP as the spec says, or (``gated``: its gate, up and down names) a shared
        expert's gated MLP."""
        from transformers.activations import ACT2FN

        spec = self.text.mlp
        act = ACT2FN[spec.activation]
        if spec.learned_activation and not gated:
            act = functools.partial(self.xielu, f"{prefix}{spec.learned_activation}.")
        # A norm before the down projection (BitNet's), in the dense MLP, not a shared expert
        sub_norm = spec.sub_norm and not gated
        if spec.kind == "fused_gate_up" and spec.glu and not gated:  # MiniMax-M3's clamped GLU
            from onboard.analysis.clamped_glu import glu_function

            fused, down = spec.projections
            hidden = glu_function(spec.glu, self.config)(self.linear(x, f"{prefix}{fused}."))
        elif spec.kind == "fused_gate_up":
            fused, down = spec.projections
            gate, up = self.linear(x, f"{prefix}{fused}.").chunk(2, dim=-1)
            hidden = act(gate) * up
        elif gated or spec.kind == "gated":
            gate, up, down = gated or spec.projections
            hidden = act(self.linear(x, f"{prefix}{gate}.")) * self.linear(x, f"{prefix}{up}.")
        else:
            up, down = spec.projections
            hidden = act(self.linear(x, f"{prefix}{up}."))
        if sub_norm:
            hidden = self.norm(hidden, f"{prefix}{spec.sub_norm}.")
        return self.linear(hidden, f"{prefix}{down}.")

    def xielu(self, prefix: str, x: Any) -> Any:
        """xIELU (arXiv 2411.13010): alpha_p and alpha_n are stored before a softplus."""
        import torch
        from torch.nn.functional import softplus

        alpha_p, alpha_n, beta, eps = (
            self.weight(prefix + n) for n in ("alpha_p", "alpha_n", "beta", "eps")
        )
        positive = softplus(alpha_p) * x * x + beta * x
        negative = (torch.expm1(torch.minimum(x, eps)) - x) * (beta + softplus(alpha_n)) + beta * x
        return torch.where(x > 0, positive, negative)
