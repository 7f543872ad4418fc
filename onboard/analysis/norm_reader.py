"""Read the decoder layers' norms: kind, epsilon, (1 + w) offset, bias, weight and placement.

The placement comes from the probe's data flow (which norm reads which tensor), not from the
norms' names, so GLM-4's post_self_attn_layernorm and OpenAI GPT's norms of the residual sum are
placed by what they compute.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from onboard.analysis.layers import CROSS_ATTENTION
from onboard.analysis.probe import NormProbe
from onboard.analysis.reader import LAYER0, Read, Reader
from onboard.block_specs import NormSpec

# Where configs keep the norms' epsilon.
EPS_KEYS = ("rms_norm_eps", "layer_norm_eps", "norm_eps", "layer_norm_epsilon")


class NormReader(Reader):
    def read(self) -> Read[NormSpec]:
        return self.done(self.norm())

    def norm(self) -> NormSpec:
        layer_norms = [n for n in self.probe.layer_norms if "." not in n.name]
        flow = self.probe.flow
        roles = {
            "attn_in": flow.attn_in,
            "attn_out": flow.attn_out,
            "mlp_in": flow.mlp_in,
            "mlp_out": flow.mlp_out,
        }
        if flow.attn_add and flow.mlp_add:  # norms after each residual add (OpenAI GPT)
            roles = {"attn_add": flow.attn_add, "mlp_add": flow.mlp_add}
        names = tuple((role, found[0]) for role, found in roles.items() if len(found) == 1)
        placed = {name for _, name in names}
        for norm in layer_norms:
            cross = CROSS_ATTENTION.match(f"model.layers.*.{norm.name}.")
            if norm.name not in placed and not cross:  # the parameter check reports those
                self._delta("norm with no place in the layer", f"{LAYER0}{norm.name}")
        mlp = any(name == f"{LAYER0}mlp" for name, _ in self.probe.modules)
        placement = placement_of(dict(names), mlp=mlp)
        if flow.parallel:
            placement = "parallel" if placement == "pre" else None
        if placement is None:
            self._delta("unrecognised norm placement", f"{LAYER0}", repr(roles))
            placement = "pre"
        self._probe(
            "text.norm.placement",
            f"{LAYER0}*",
            ", ".join(f"{name} on {role}" for role, name in names)
            + ("; attention and MLP read one tensor" if flow.parallel else ""),
        )
        reference = self.probe.final_norm or (layer_norms[0] if layer_norms else None)
        if reference is None:
            self._delta("no norms found", "model.norm")
            return NormSpec("rms", 1e-6, 0.0, placement, names)
        for norm in layer_norms:
            if (norm.kind, norm.weight_offset) != (reference.kind, reference.weight_offset):
                self._delta("norms of different kinds", f"{LAYER0}{norm.name}", norm.class_name)
        self._norm_evidence(reference)
        eps_key = next(
            (k for k in EPS_KEYS if isinstance(getattr(self.cfg, k, None), int | float)), None
        )
        measured = {n.eps for n in (*layer_norms, reference)}
        if eps_key and len(measured) == 1 and None not in measured:
            tiny_eps = getattr(self.tiny, eps_key, None)
            if not math.isclose(reference.eps, tiny_eps):  # BioGPT: nn.LayerNorm's default
                self._probe(
                    "text.norm.eps",
                    f"model.{reference.name}",
                    f"every norm has eps {reference.eps}; HF does not read config.{eps_key}",
                )
                eps_key = None
        eps = float(getattr(self.cfg, eps_key) if eps_key else reference.eps or 1e-6)
        if eps_key:
            self._config("text.norm.eps", eps_key, eps)
        else:
            self._probe("text.norm.eps", f"model.{reference.name}", f"eps {eps}")
        if reference.eps is not None and not math.isclose(reference.eps, eps):
            self._delta(
                "norm epsilon differs from the config",
                f"model.{reference.name}",
                f"{reference.eps} != {eps}",
            )
        bias = reference.kind == "layer" and reference.has_bias
        if any(n.kind == "layer" and n.has_bias != bias for n in layer_norms):
            self._delta("LayerNorms with and without bias", f"{LAYER0}", "mixed")
        if any(n.has_weight != reference.has_weight for n in layer_norms):
            self._delta("norms with and without a learnable weight", f"{LAYER0}", "mixed")
        if not reference.has_weight:
            self._probe(
                "text.norm.weight",
                f"model.{reference.name} ({reference.class_name})",
                "no learnable weight: scale 1",
            )
        return NormSpec(
            reference.kind,
            eps,
            reference.weight_offset,
            placement,
            names,
            eps_key,
            bias,
            reference.has_weight,
        )

    def _norm_evidence(self, norm: NormProbe) -> None:
        offset = "scales by (1 + w)" if norm.weight_offset else "scales by w"
        self._probe("text.norm.weight_offset", f"model.{norm.name} ({norm.class_name})", offset)
        if norm.weight_offset:
            self._source("text.norm.weight_offset", r"1(\.0)? \+ self\.weight")
        kind = "centres (LayerNorm)" if norm.kind == "layer" else "does not centre (RMSNorm)"
        self._probe("text.norm.kind", f"model.{norm.name} ({norm.class_name})", kind)


def placement_of(roles: Iterable[str], *, mlp: bool = True) -> str | None:
    """The placement the norm roles of a layer make, None when they make none we know. Without
    an ``mlp`` half (a pure state-space model's layers) one norm before the mixer is pre-norm."""
    roles = frozenset(roles)
    if roles == {"attn_in", "mlp_in"} or (not mlp and roles == {"attn_in"}):
        return "pre"
    if roles == {"attn_in", "attn_out", "mlp_in", "mlp_out"}:
        return "sandwich"
    if roles == {"attn_out", "mlp_out"}:
        return "post"
    if roles == {"attn_add", "mlp_add"}:
        return "post_residual"
    return None
