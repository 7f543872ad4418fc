"""Read the dense MLP of a decoder: its kind, projections, activation, bias and width.

The probe gives names and shapes, the config the activation and the width key; an activation
module that learns parameters (Apertus' xIELU) is named, one the spec cannot compute is a delta.
For a model whose every layer is MoE the MLP describes the routed experts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from onboard.analysis.layout import hf_module, learns
from onboard.analysis.reader import Context, Read, Reader
from onboard.analysis.source_lines import find_line, init_assignment
from onboard.analysis.width_rule import WidthRule, evaluate_width, read_width_rule
from onboard.block_specs import ClampedGluSpec, MLPSpec
from onboard.spec import Evidence
from onboard.tiny import is_number

# Where configs keep the dense MLP width (OPT: ffn_dim, GPT-2: n_inner, None for 4 x hidden;
# CTRL: dff).
# MiniMax-M3: dense_intermediate_size, its experts intermediate_size
_WIDTH_KEYS = (
    "intermediate_size",
    "ffn_dim",
    "n_inner",
    "ffn_hidden_size",
    "dff",
    "dense_intermediate_size",
)
_FOUR_TIMES_HIDDEN = "4 * config.hidden_size"
# A width the source computes from two config values (GPT-NeoX Japanese)
_WIDTH_PRODUCT = re.compile(r"int\(config\.(\w+) \* config\.(\w+)\)")
# Activations an MLP's module is compared with when no config key names one.
MEASURED_ACTIVATIONS = ("gelu_pytorch_tanh", "gelu", "relu", "silu", "relu2")
# Activations that learn parameters, by their HF name (computed by the spec and both targets).
LEARNED_ACTIVATIONS = ("xielu",)
# Where configs keep the MLP activation (OPT, GPT-2: activation_function; Falcon: activation).
_ACTIVATION_KEYS = ("hidden_activation", "hidden_act", "activation_function", "activation")
# Expert biases kept beside fused experts (GPT-OSS)
_EXPERT_BIAS = re.compile(r"^model\.layers\.\d+\.\w+\.experts\.(gate_up_proj|down_proj)_bias$")


@dataclass(frozen=True)
class MLPReading:
    spec: MLPSpec
    # The projections the reader understood (empty when it did not: their parameters then
    # have no role, and the parameter check names each)
    known_projections: tuple[str, ...]


class MLPReader(Reader):
    """``read()`` returns the MLP; ``dense_layer`` is the first layer with a dense MLP (None
    when every layer is MoE)."""

    def __init__(
        self, context: Context, dense_layer: int | None, sub_norm: str | None = None
    ) -> None:
        super().__init__(context)
        self.dense_layer = dense_layer
        self.sub_norm = sub_norm  # a norm before the down projection (analysis.inner_parts)

    def read(self) -> Read[MLPReading]:
        return self.done(self.mlp())

    def mlp(self) -> MLPReading:
        cfg = self.cfg
        act_key: str | None = next((k for k in _ACTIVATION_KEYS if getattr(cfg, k, None)), None)
        measured = None if act_key else self._measured_activation()
        read_key = self._activation_key_read(measured) if measured else None
        if read_key is not None:  # a key of its own (NemotronH's mlp_hidden_act)
            act_key, measured = read_key, None
        if measured is not None:  # no config key: the code fixes it (BLOOM's own gelu)
            activation, act_key = measured, None
        else:
            act_key = act_key or "hidden_act"
            activation = getattr(cfg, act_key, None) or "silu"
            self._config("text.mlp.activation", act_key, activation)
        if self.dense_layer is None:  # every layer is MoE: the experts are gated MLPs
            return MLPReading(self._expert_mlp(str(activation), act_key), ())
        layer = f"model.layers.{self.dense_layer}."
        prefix = layer + "mlp."
        names = sorted(
            {
                n.removeprefix(prefix).split(".")[0]
                for n, _ in self.probe.parameters
                if n.startswith(prefix)
            }
        )
        learned = self._learned_activation(prefix, names, str(activation))
        names = [n for n in names if n not in (learned, self.sub_norm)]
        gated = None if {"gate_proj", "up_proj"} <= set(names) else self._gated(prefix, names)
        glu = None
        if "gate_up_proj" in names:
            kind, projections = "fused_gate_up", ("gate_up_proj", "down_proj")
            glu = self._clamped_glu(f"{layer}mlp")
        elif {"gate_proj", "up_proj", "down_proj"} <= set(names):
            kind, projections = "gated", ("gate_proj", "up_proj", "down_proj")
        elif gated is not None:  # LFM2's w1, w3, w2
            kind, projections, measured_activation = "gated", gated[:3], gated[3]
            if not any(getattr(cfg, k, None) for k in _ACTIVATION_KEYS):
                activation, act_key = measured_activation, None
                self.log.entries.pop("text.mlp.activation", None)  # the default guessed above
                self._probe("text.mlp.activation", f"{layer}mlp", f"computes {activation}")
        else:
            kind, projections = "plain", self._plain_projections(names, prefix)
            if projections and self._doubled(prefix, projections):  # ModernBERT's Wi, Wo
                kind = "fused_gate_up"
        known = projections or ()
        if projections is None:
            self._delta("MLP projections not understood", f"{layer}mlp", ", ".join(names))
            projections = tuple(names)
        self._probe("text.mlp.kind", f"{layer}mlp", ", ".join(names))
        bias = any(self.probe.param_shape(f"{prefix}{p}.bias") is not None for p in projections)
        self._probe("text.mlp.bias", f"{prefix}{projections[-1]}.bias", str(bias))
        bias_key = self._config_key_of("text.mlp.bias", layer + "mlp", projections[-1], "bias")
        shape = self.probe.param_shape(f"{prefix}{projections[-1]}.weight")
        width_expr = self._width_expr(shape[-1] if shape else None)
        width = _real_width(cfg, self.tiny, shape[-1] if shape else None)
        width_code = None
        rule = self._width_rule(layer + "mlp", projections[-1], shape[-1] if shape else None)
        if rule is not None:
            width_code, width = rule.code, evaluate_width(rule.code, cfg)
        if width is None and width_expr.endswith(_FOUR_TIMES_HIDDEN):
            width = 4 * cfg.hidden_size
        product = _WIDTH_PRODUCT.fullmatch(width_expr)
        if width is None and product:
            width = int(getattr(cfg, product[1]) * getattr(cfg, product[2]))
        if isinstance(width, list):
            self._delta(
                "MLP width differs per layer", "config.json:intermediate_size", str(width[:4])
            )
            width = max(width)
        spec = MLPSpec(
            kind,
            str(activation),
            bias,
            width,
            projections,
            bias_key=bias_key,
            activation_key=act_key,
            width_expr=width_expr,
            learned_activation=learned,
            width_code=width_code,
            sub_norm=self.sub_norm,
            glu=glu,
        )
        return MLPReading(spec, known)

    def _clamped_glu(self, path: str) -> ClampedGluSpec | None:
        """The clamped GLU a fused gate_up MLP computes in place of act(gate) * up
        (MiniMax-M3's dense layers), proved on the module past its limit; None otherwise."""
        from onboard.analysis.clamped_glu import describe, shared_glu
        from onboard.analysis.probe import source_location

        if self.model is None:
            return None
        module = self.model.get_submodule(path)
        glu, _ = shared_glu(module, self.tiny, self.cfg)
        if glu is not None:
            where = source_location(type(module).forward) or path
            detail = f"{type(module).__name__}: {describe(glu)}"
            self.log.add("text.mlp.glu", Evidence("probe", where, detail))
        return glu

    def _gated(self, prefix: str, names: list[str]) -> tuple[str, str, str, str] | None:
        """(gate, up, down, activation) of a gated MLP under other names (LFM2's w1, w3, w2):
        two projections read the hidden states, one writes them; which one gates and with
        which activation is told by the module's values."""
        import torch
        from transformers.activations import ACT2FN

        if self.model is None or len(names) != 3:
            return None
        hidden = self.tiny.hidden_size
        shapes = {n: self.probe.param_shape(f"{prefix}{n}.weight") for n in names}
        into = [n for n, shape in shapes.items() if shape and shape[-1] == hidden]
        out = [n for n in names if n not in into and (shapes[n] or (0,))[0] == hidden]
        if len(into) != 2 or len(out) != 1:
            return None
        module = self.model.get_submodule(prefix.rstrip("."))
        linears = dict(module.named_children())
        x = torch.randn(2, 5, hidden, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            want = module(x)
            for gate, up in (into, into[::-1]):
                for name in MEASURED_ACTIVATIONS:
                    act = ACT2FN[name]
                    got = linears[out[0]](act(linears[gate](x)) * linears[up](x))
                    if torch.allclose(got, want, atol=1e-6):
                        where = prefix.rstrip(".")
                        self._probe("text.mlp.kind", where, f"{out[0]}({name}({gate}) * {up})")
                        return gate, up, out[0], name
        return None

    def _width_rule(self, module: str, output: str, tiny_width: int | None) -> WidthRule | None:
        """The width as HF's MLP computes it in statements (LFM2), when the config's width key
        alone does not give the tiny width; proved on the tiny config."""
        if tiny_width is None or getattr(self.tiny, "intermediate_size", None) == tiny_width:
            return None
        class_name = dict(self.probe.modules).get(module)
        rule = read_width_rule(self.files, class_name, output) if class_name else None
        if rule is None or evaluate_width(rule.code, self.tiny) != tiny_width:
            return None
        self.log.add("text.mlp.intermediate_size", rule.evidence)
        return rule

    def _learned_activation(self, prefix: str, names: list[str], activation: str) -> str | None:
        """The MLP's activation module when it learns parameters (Apertus' xIELU); one the spec
        cannot compute is a delta, so its parameters are never loaded into something else."""
        if self.model is None:
            return None
        children = dict(self.model.get_submodule(prefix.rstrip(".")).named_children())
        for name in names:
            module = children.get(name)  # not a parameter of the MLP itself (JetMoE's bias)
            if type(module).__module__ != "transformers.activations":
                continue
            learned = ", ".join(n for n, _ in module.named_parameters())
            where = f"{prefix}{name} ({type(module).__name__})"
            if activation not in LEARNED_ACTIVATIONS:
                self._delta("activation with learned parameters", where, learned)
                return None
            self._probe("text.mlp.activation", where, f"learns {learned}")
            return name
        return None

    def _measured_activation(self) -> str | None:
        """The MLP's activation module, told by its values, when no config key names it."""
        if self.model is None or self.dense_layer is None:
            return None
        mlp = self.model.get_submodule(f"model.layers.{self.dense_layer}.mlp")
        for name, module in mlp.named_children():
            candidate = activation_of(module)
            if candidate is not None:
                where = f"model.layers.{self.dense_layer}.mlp.{name}"
                self._probe("text.mlp.activation", where, f"computes {candidate}")
                return candidate
        return None

    def _activation_key_read(self, measured: str) -> str | None:
        """The config key the MLP's class reads its activation from (``ACT2FN[config.<key>]``
        in its ``__init__``), when the config holds the activation measured."""
        mlp = self.model.get_submodule(f"model.layers.{self.dense_layer}.mlp")
        for name, module in mlp.named_children():
            if activation_of(module) is None:
                continue
            found = init_assignment(self.files, type(hf_module(mlp)).__name__, name)
            match = re.search(r"ACT2FN\[config\.(\w+)\]", found.evidence.detail) if found else None
            if match and getattr(self.cfg, match.group(1), None) == measured:
                self.log.add("text.mlp.activation", found.evidence)
                return match.group(1)
        return None

    def _width_expr(self, tiny_width: int | None) -> str:
        """Which config value the MLP width is: a width key, else GPT-2's 4 x hidden_size
        (read from the source, where HF writes it)."""
        key = next(
            (
                k
                for k in _WIDTH_KEYS
                if getattr(self.cfg, k, None) is not None  # the real config's, not shrink's
                and getattr(self.tiny, k, None) == tiny_width
            ),
            None,
        )
        if key is not None or tiny_width is None:
            return f"config.{key or 'intermediate_size'}"
        product = self._width_product(tiny_width)
        if product is not None:
            return product
        found = find_line(self.files, r"4 \* (config\.)?(hidden_size|embed_dim|n_embd)\b")
        if tiny_width != 4 * self.tiny.hidden_size or found is None:
            return "config.intermediate_size"
        self.log.add("text.mlp.intermediate_size", found)
        unset = [k for k in _WIDTH_KEYS if getattr(self.cfg, k, 0) is None]  # present, None
        return f"config.{unset[0]} or {_FOUR_TIMES_HIDDEN}" if unset else _FOUR_TIMES_HIDDEN

    def _width_product(self, tiny_width: int) -> str | None:
        """The width as the source computes it from two config values, when the tiny config gives
        the tiny width (GPT-NeoX Japanese: int(config.hidden_size *
        config.intermediate_multiple_size))."""
        found = find_line(self.files, rf"= {_WIDTH_PRODUCT.pattern}")
        if found is None:
            return None
        a, b = _WIDTH_PRODUCT.search(found.detail).groups()
        values = [getattr(self.tiny, k, None) for k in (a, b)]
        if not all(is_number(v) for v in values) or int(values[0] * values[1]) != tiny_width:
            return None
        self.log.add("text.mlp.intermediate_size", found)
        return f"int(config.{a} * config.{b})"

    def _expert_mlp(self, activation: str, act_key: str) -> MLPSpec:
        """Every layer is MoE: describe the routed experts (gated; biased in GPT-OSS)."""
        biases = [name for name, _ in self.probe.parameters if _EXPERT_BIAS.match(name)]
        if biases:
            self._probe("text.mlp.bias", biases[0], "present")
        width = getattr(self.cfg, "intermediate_size", None)
        if width is None and getattr(self.cfg, "moe_intermediate_size", None):  # Solar Open
            width = self.cfg.moe_intermediate_size
            self._config("text.mlp.intermediate_size", "moe_intermediate_size", width)
        if width is None:
            self._delta("expert width not found", "config.json", "no intermediate_size")
        return MLPSpec("gated", activation, bool(biases), width or 0, activation_key=act_key)

    def _doubled(self, prefix: str, projections: tuple[str, ...]) -> bool:
        """The input projection is twice as wide as the output one reads: gate and up fused
        (which half gates, the spec check decides)."""
        into, out = (self.probe.param_shape(f"{prefix}{p}.weight") for p in projections)
        return bool(into and out and into[0] == 2 * out[-1])

    def _plain_projections(self, names: list[str], prefix: str) -> tuple[str, ...] | None:
        """(input projection, output projection) of a non-gated MLP, told apart by shape."""
        hidden = self.tiny.hidden_size
        shapes = {n: self.probe.param_shape(f"{prefix}{n}.weight") for n in names}
        into = [n for n, shape in shapes.items() if shape and shape[-1] == hidden]
        out = [n for n, shape in shapes.items() if shape and shape[0] == hidden and n not in into]
        if len(into) != 1 or len(out) != 1 or len(names) != 2:
            return None
        return (into[0], out[0])


def _real_width(real: Any, tiny: Any, tiny_width: int | None) -> Any:
    """The real MLP width: the real value of whichever config field the tiny width came from."""
    keys = (
        "intermediate_size",
        "moe_intermediate_size",
        "shared_expert_intermediate_size",
        "ffn_hidden_size",  # Falcon
        "ffn_dim",  # OPT
        "dense_intermediate_size",  # MiniMax-M3
    )
    for key in keys:
        value = getattr(real, key, None)
        if value is not None and tiny_width is not None and getattr(tiny, key, None) == tiny_width:
            return value
    return getattr(real, "intermediate_size", None) or getattr(real, "ffn_hidden_size", None)


def activation_of(module: Any) -> str | None:
    """Which known activation a parameter-free module computes, told by its values."""
    import torch
    from transformers.activations import ACT2FN

    if learns(module):
        return None
    x = torch.linspace(-6.0, 6.0, 241)
    try:
        with torch.no_grad():
            y = module(x)
    except Exception:  # not an activation
        return None
    return next(
        (a for a in MEASURED_ACTIVATIONS if torch.allclose(ACT2FN[a](x), y, atol=1e-6)), None
    )
