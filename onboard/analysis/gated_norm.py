"""Norms gated by a low-rank MLP of their own (AXK2's GatedRMSNorm), read by running them.

Such a norm holds a plain norm and two bias-free linears through a low rank, and returns
``y * sigmoid(up(act(down(z))))`` with ``y`` the plain norm's output; whether the gate reads
``y`` or the norm's input, and its activation, are tried against the module. Which roles are
gated, and in which layers (AXK2 gates the MLP norm before experts only), comes from the tiny
model's layers, each named by the kind of its channel mixer.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

from onboard.analysis.layers import moe_block_name
from onboard.analysis.reader import Read, Reader
from onboard.block_specs import NormGateSpec, NormSpec

TOLERANCE = 1e-5
ACTIVATIONS = ("silu", "gelu", "gelu_pytorch_tanh", "relu", "sigmoid", "tanh")
READS: tuple[Literal["normed", "input"], ...] = ("normed", "input")
SPEC_PATH = "text.norm.gate"
Mixer = Literal["dense", "moe"]


def parts(module: Any) -> tuple[str, str, str] | None:
    """The attribute paths of a gated norm's plain norm and its down and up linears, or None
    when ``module`` is not one: a module named a norm, holding one plain norm and two bias-free
    linears (hidden -> rank -> hidden) and nothing else that learns."""
    import torch

    from onboard.analysis.probe import is_norm

    if "norm" not in type(module).__name__.lower() or getattr(module, "weight", None) is not None:
        return None
    norms = [n for n, m in module.named_children() if is_norm(m)]
    linears = [(n, m) for n, m in module.named_modules() if isinstance(m, torch.nn.Linear)]
    if len(norms) != 1 or len(linears) != 2 or any(m.bias is not None for _, m in linears):
        return None
    (down, first), (up, second) = linears
    if first.out_features != second.in_features or first.in_features != second.out_features:
        return None
    owned = {f"{norms[0]}.{p}" for p, _ in getattr(module, norms[0]).named_parameters()}
    owned |= {f"{down}.weight", f"{up}.weight"}
    if {n for n, _ in module.named_parameters()} != owned:
        return None
    return norms[0], down, up


def is_gated_norm(module: Any) -> bool:
    return parts(module) is not None


def inner_norm(module: Any) -> Any:
    """The plain norm inside a gated norm."""
    found = parts(module)
    assert found is not None
    return module.get_submodule(found[0])


def gate(y: Any, x: Any, down: Any, up: Any, gate_spec: NormGateSpec) -> Any:
    """``y`` (the plain norm of ``x``) scaled as ``gate_spec`` says, with the linears' weights."""
    import torch
    from transformers.activations import ACT2FN

    z = y if gate_spec.reads == "normed" else x
    hidden = ACT2FN[gate_spec.activation](z.float() @ down.float().T)
    return y * torch.sigmoid(hidden @ up.float().T)


def channel_mixer(layer: Any) -> Mixer:
    """The kind of a layer's channel mixer: experts, or a dense MLP."""
    return "moe" if moe_block_name(layer) else "dense"


def parameters(model: Any) -> set[str]:
    """Layer-relative names of the parameters of every gated norm in the layers, which the
    norm's gate spec gives a role."""
    found = set()
    for layer in model.model.layers:
        for name, module in layer.named_children():
            if is_gated_norm(module):
                found |= {f"{name}.{p}" for p, _ in module.named_parameters()}
    return found


class GatedNormReader(Reader):
    """The gate of the layers' gated norms, with the roles and layers that have one."""

    def __init__(self, context: Any, norm: NormSpec) -> None:
        super().__init__(context)
        self.norm = norm

    def read(self) -> Read[NormSpec]:
        return self.done(self.gated())

    def gated(self) -> NormSpec:
        import dataclasses

        if self.model is None:
            return self.norm
        layers = list(self.model.model.layers)
        found: dict[str, set[Mixer]] = {}
        sample = None
        for (role, attr), (index, layer) in itertools.product(self.norm.names, enumerate(layers)):
            module = getattr(layer, attr, None)
            if module is not None and is_gated_norm(module):
                found.setdefault(role, set()).add(channel_mixer(layer))
                sample = sample or (f"model.layers.{index}.{attr}", module)
        if sample is None:
            return self.norm
        spec = self._read_gate(*sample)
        if spec is None:
            return self.norm
        roles = tuple((role, tuple(sorted(kinds))) for role, kinds in found.items())
        for role, kinds in roles:
            self._probe(
                SPEC_PATH,
                f"model.layers.*.{dict(self.norm.names)[role]}",
                f"{role} gated in layers whose channel mixer is {' or '.join(kinds)}",
            )
        return dataclasses.replace(self.norm, gate=dataclasses.replace(spec, roles=roles))

    def _read_gate(self, where: str, module: Any) -> NormGateSpec | None:
        import torch

        norm_attr, down_attr, up_attr = parts(module) or ("", "", "")
        down, up = module.get_submodule(down_attr), module.get_submodule(up_attr)
        plain = module.get_submodule(norm_attr)
        x = torch.randn(2, 5, down.in_features, generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            theirs, y = module(x), plain(x)
        rank = int(down.out_features)
        rank_key = self._rank_key(rank)
        real_rank = int(getattr(self.cfg, rank_key)) if rank_key else rank
        for reads, activation in itertools.product(READS, ACTIVATIONS):
            candidate = NormGateSpec(
                real_rank, rank_key, activation, reads, norm_attr, down_attr, up_attr
            )
            with torch.no_grad():
                ours = gate(y, x, down.weight, up.weight, candidate)
            if (ours - theirs).abs().max().item() <= TOLERANCE:
                self._evidence(where, module, candidate)
                return candidate
        self._delta(
            "gated norm whose gate onboard cannot read",
            where,
            f"{type(module).__name__}: not y * sigmoid({up_attr}(act({down_attr}(y or x))))",
        )
        return None

    def _rank_key(self, rank: int) -> str | None:
        keys = [
            k
            for k, v in vars(self.tiny).items()
            if "rank" in k and isinstance(v, int) and not isinstance(v, bool) and v == rank
        ]
        return next((k for k in keys if "norm" in k), keys[0] if keys else None)

    def _evidence(self, where: str, module: Any, spec: NormGateSpec) -> None:
        z = "y" if spec.reads == "normed" else "x"
        self._probe(
            SPEC_PATH,
            f"{where} ({type(module).__name__})",
            f"y * sigmoid({spec.up}({spec.activation}({spec.down}({z})))), y = {spec.norm}(x)",
        )
        self._source(SPEC_PATH, r"torch\.sigmoid\(self\.\w+\(\w+\)")
        if spec.rank_key:
            self._config(SPEC_PATH, spec.rank_key, spec.rank)


def describe(spec: NormGateSpec) -> str:
    """The gate in one line."""
    z = "y" if spec.reads == "normed" else "x"
    rank = f"config.{spec.rank_key}" if spec.rank_key else str(spec.rank)
    roles = ", ".join(f"{r} ({'/'.join(k)} layers)" for r, k in spec.roles)
    return f"y * sigmoid({spec.up}({spec.activation}({spec.down}({z})))), rank {rank}; {roles}"
