"""Read the attention of a decoder layer: heads, projections (separate, fused, named otherwise),
biases, q/k norms, scale, softcap, multi-query, latent attention (MLA), and the variants
``analysis.variants`` recognised.

Names and shapes come from the probe, flags from the config and the HF source; whatever layout
of a fused projection the names cannot tell, the attention check decides later (``trials``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from onboard.analysis.reader import LAYER0, Context, Read, Reader
from onboard.analysis.rope_reader import rope_parameters_of
from onboard.analysis.source_lines import find_line, init_assignment
from onboard.block_specs import (
    AttentionSpec,
    DifferentialSpec,
    DynamicMaskSpec,
    IndexerSpec,
    LatentQueryGateSpec,
    MLASpec,
)
from onboard.tiny import POSITION_SCALE_KEY, is_number

# Names of separate q, k, v projections other than q_proj ... (CTRL: Wq; BERT-style: query)
_QKV_NAMES = re.compile(r"^(?:w_?)?([qkv])(?:_proj)?$|^(query|key|value)$", re.IGNORECASE)
# What attentions call their q and k norms.
_QK_NORM_NAMES = (
    ("q_norm", "k_norm"),
    ("q_layernorm", "k_layernorm"),
    ("query_layernorm", "key_layernorm"),  # HunYuan
)


@dataclass(frozen=True)
class AttentionReading:
    spec: AttentionSpec
    qkv_names: tuple[tuple[str, str], ...]  # q, k, v -> the HF attribute of its projection
    o_name: str  # the output projection (Phi: dense)
    qk_norm_names: tuple[str, str]  # the q and k norms (Persimmon: q_layernorm, k_layernorm)


class AttentionReader(Reader):
    """``dynamic_mask``, ``differential``, ``sinks``, ``indexer``, ``sub_norm`` and
    ``output_gate_proj`` (its activation, per head or not): what ``analysis.variants``,
    ``analysis.indexer`` and ``analysis.inner_parts`` read of the attention."""

    def __init__(
        self,
        context: Context,
        *,
        dynamic_mask: DynamicMaskSpec | None = None,
        differential: DifferentialSpec | None = None,
        sinks: str | None = None,
        indexer: IndexerSpec | None = None,
        sub_norm: str | None = None,
        output_gate_proj: str | None = None,
        output_gate_activation: str | None = None,
        output_gate_per_head: bool = False,
    ) -> None:
        super().__init__(context)
        self.sub_norm = sub_norm
        self.output_gate_proj = output_gate_proj
        self.output_gate_activation = output_gate_activation or "sigmoid"
        self.output_gate_per_head = output_gate_per_head
        self.dynamic_mask = dynamic_mask
        self.differential = differential
        self.sinks = sinks
        self.indexer = indexer
        self.multi_query = False  # set with fused_qkv: its width has one k/v head
        self.q_norm_name, self.k_norm_name = next(
            (
                pair
                for pair in _QK_NORM_NAMES
                if context.probe.param_shape(f"{LAYER0}self_attn.{pair[0]}.weight") is not None
                or context.probe.has_module(f"{LAYER0}self_attn.{pair[0]}")
            ),
            _QK_NORM_NAMES[0],
        )

    def read(self) -> Read[AttentionReading]:
        self.qkv_names = self._qkv_names()
        self.fused_qkv = self._fused_qkv()
        self.last_layer_o_bias = self._last_layer_o_bias()
        self.o_name = self._output_projection()
        reading = AttentionReading(
            self.attention(),
            tuple(self.qkv_names.items()),
            self.o_name,
            (self.q_norm_name, self.k_norm_name),
        )
        return self.done(reading)

    def _attention_linears(self) -> dict[str, tuple[int, ...]]:
        """Layer 0's attention weights that belong to its direct children (q_proj, dense ...)."""
        prefix = f"{LAYER0}self_attn."
        found = {}
        for name, shape in self.probe.parameters:
            attr = name.removeprefix(prefix).removesuffix(".weight")
            if name.startswith(prefix) and name.endswith(".weight") and "." not in attr:
                found[attr] = shape
        return found

    def attention(self) -> AttentionSpec:
        if self.probe.param_shape(f"{LAYER0}self_attn.kv_a_proj_with_mqa.weight") is not None:
            return self.mla_attention()
        cfg, probe = self.cfg, self.probe
        heads = cfg.num_attention_heads
        kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
        kv_heads_expr = self._multi_query_rule() if self.multi_query else None
        if self.multi_query:
            kv_heads = 1 if cfg.multi_query else kv_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        self._config("text.attention.head_dim", "head_dim", head_dim)
        fused = self.fused_qkv
        attrs = {p: fused or self.qkv_names[p] for p in "qkv"} | {"o": self.o_name}
        biases = {p: self._layer_param(f"self_attn.{a}.bias") is not None for p, a in attrs.items()}
        bias_keys = []
        for p, present in biases.items():
            key = f"{LAYER0}self_attn.{attrs[p]}.bias"
            self._probe(f"text.attention.{p}_bias", key, "present" if present else "absent")
            config_key = self._config_key_of(
                f"text.attention.{p}_bias", "model.layers.0.self_attn", attrs[p], "bias"
            )
            if config_key:
                bias_keys.append((p, config_key))
        head_modules = self._qk_norm_head_modules()
        qk_norm = "per_head" if head_modules else self._qk_norm(heads)
        q_norm_shape = self._layer_param(f"self_attn.{self.q_norm_name}.weight")
        each_head = bool(head_modules) or (
            qk_norm == "per_head" and q_norm_shape is not None and len(q_norm_shape) == 2
        )
        scale, scale_key = self._attention_scale(head_dim)
        softcap = getattr(cfg, "attn_logit_softcapping", None) or probe.attention_softcap
        if softcap:
            self._config("text.attention.softcap", "attn_logit_softcapping", softcap)
        return AttentionSpec(
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            q_bias=biases["q"],
            k_bias=biases["k"],
            v_bias=biases["v"],
            o_bias=biases["o"],
            qk_norm=qk_norm,
            qk_norm_each_head=each_head,
            qk_norm_head_modules=head_modules,
            scale=scale,
            softcap=float(softcap) if softcap else None,
            bias_keys=tuple(bias_keys),
            scale_key=scale_key,
            scale_power=1.0 if scale_key == "attention_multiplier" else -0.5,
            fused_qkv=fused,
            multi_query=self.multi_query,
            kv_heads_expr=kv_heads_expr,
            position_scale=self._position_scale(),
            last_layer_o_bias=self.last_layer_o_bias,
            dynamic_mask=self.dynamic_mask,
            differential=self.differential,
            output_gate=self._output_gate(),
            output_gate_proj=self.output_gate_proj,
            output_gate_activation=self.output_gate_activation,
            output_gate_per_head=self.output_gate_per_head,
            sub_norm=self.sub_norm,
            sinks=self.sinks,
            indexer=self.indexer,
        )

    def _output_gate(self) -> bool:
        """q_proj twice as wide as the query heads: each head's query, then a gate that scales
        its output (Qwen3-Next); the spec check proves the order and the sigmoid."""
        if self.fused_qkv:
            return False
        shape = self._layer_param(f"self_attn.{self.qkv_names['q']}.weight")
        width = self.tiny.num_attention_heads * self.ctx.tiny_head_dim
        if shape is None or shape[0] != 2 * width:
            return False
        where = f"{LAYER0}self_attn.{self.qkv_names['q']}.weight"
        self._probe("text.attention.output_gate", where, f"shape {shape}: queries and gates")
        self._source("text.attention.output_gate", r"torch\.sigmoid\(gate\)")
        return True

    def _output_projection(self) -> str:
        """The attention's output projection: o_proj, or the one linear from the heads' width
        back to the hidden size that is not q, k or v (Phi's dense)."""
        if self._layer_param("self_attn.o_proj.weight") is not None:
            return "o_proj"
        tiny = self.tiny
        shape = (tiny.hidden_size, tiny.num_attention_heads * self.ctx.tiny_head_dim)
        taken = {*self.qkv_names.values(), self.fused_qkv}
        found = [
            a for a, got in self._attention_linears().items() if a not in taken and got == shape
        ]
        if len(found) != 1:
            return "o_proj"  # none or ambiguous: the parameter check reports what is left
        where = f"{LAYER0}self_attn.{found[0]}.weight"
        self._probe("text.attention.o_bias", where, "output projection")
        return found[0]

    def _fused_qkv(self) -> str | None:
        """The attention's one projection to q, k and v together (Phi-3's qkv_proj), if any: a
        linear whose width is the q, k and v widths summed. Which layout it has (concatenated or
        interleaved per head) the attention check decides."""
        if self._layer_param("self_attn.kv_a_proj_with_mqa.weight") is not None:
            return None
        q_name = self.qkv_names["q"]
        if self._layer_param(f"self_attn.{q_name}.weight") is not None:
            self._probe(
                "text.attention.fused_qkv", f"{LAYER0}self_attn.{q_name}.weight", "q, k, v apart"
            )
            return None
        tiny = self.tiny
        kv_heads = getattr(tiny, "num_key_value_heads", None) or tiny.num_attention_heads
        widths = {(tiny.num_attention_heads + 2 * kv_heads) * self.ctx.tiny_head_dim: False}
        if getattr(tiny, "multi_query", False) is True:  # one k/v head, whatever kv heads say
            widths.setdefault((tiny.num_attention_heads + 2) * self.ctx.tiny_head_dim, True)
        for attr, shape in self._attention_linears().items():
            if shape[0] not in widths:
                continue
            self.multi_query = widths[shape[0]]
            name = f"{LAYER0}self_attn.{attr}.weight"
            self._probe("text.attention.fused_qkv", name, f"shape {shape}: q, k, v")
            attention = dict(self.probe.modules).get(f"{LAYER0}self_attn", "")
            found = init_assignment(self.files, attention, attr)
            if found is not None:
                self.log.add("text.attention.fused_qkv", found.evidence)
            return attr
        return None

    def _last_layer_o_bias(self) -> str | None:
        """A hidden-sized parameter of the last layer's attention that no other layer has (GPT-NeoX
        Japanese's dense_bias), read as a bias of the attention output there; the full spec
        check then proves it."""
        if self.tiny.num_hidden_layers < 2:
            return None
        last = f"model.layers.{self.tiny.num_hidden_layers - 1}.self_attn."
        names = {n for n, _ in self.probe.parameters}
        found = [
            name.removeprefix(last)
            for name, shape in self.probe.parameters
            if name.startswith(last)
            and "." not in name.removeprefix(last)
            and shape == (self.tiny.hidden_size,)
            and f"{LAYER0}self_attn.{name.removeprefix(last)}" not in names
        ]
        if len(found) != 1:
            return None
        self._probe(
            "text.attention.last_layer_o_bias",
            f"{last}{found[0]}",
            "a bias of the attention output in the last layer only",
        )
        self._source("text.attention.last_layer_o_bias", r"num_hidden_layers - 1")
        return found[0]

    def _qkv_names(self) -> dict[str, str]:
        """The separate q, k and v projections: q_proj ..., or the one linear each whose name
        says q, k or v (CTRL: Wq, Wk, Wv); the attention check confirms which is which."""
        default = {p: f"{p}_proj" for p in "qkv"}
        linears = self._attention_linears()
        if "q_proj" in linears:
            return default
        found: dict[str, list[str]] = {}
        for attr in linears:
            match = _QKV_NAMES.match(attr)
            if match:
                found.setdefault((match.group(1) or match.group(2))[0].lower(), []).append(attr)
        if sorted(found) != ["k", "q", "v"] or any(len(v) > 1 for v in found.values()):
            return default
        names = {p: found[p][0] for p in "qkv"}
        self._probe(
            "text.attention.fused_qkv",
            f"{LAYER0}self_attn",
            "q, k, v apart: " + ", ".join(names.values()),
        )
        return names

    def _multi_query_rule(self) -> str | None:
        """HF's rule for the k/v head count when ``multi_query`` may set it, as Python over the
        config: the attention's own assignment with ``self.`` read as ``config.``."""
        found = find_line(self.files, r"self\.(num_)?kv_heads = .*multi_query")
        if found is None:
            self._delta("multi_query sets one k/v head, by no rule onboard found", "config.json")
            return None
        self.log.add("text.attention.multi_query", found)
        self._config("text.attention.multi_query", "multi_query", self.cfg.multi_query)
        rule = found.detail.split("=", 1)[1].strip()
        rule = re.sub(r"\bself\.num_heads\b", "config.num_attention_heads", rule)
        rule = re.sub(r"\bself\.", "config.", rule)
        unknown = [n for n in re.findall(r"config\.(\w+)", rule) if not hasattr(self.tiny, n)]
        if unknown:
            self._delta("k/v head rule reads what the config lacks", found.where, found.detail)
            return None
        return rule

    def mla_attention(self) -> AttentionSpec:
        """Multi-head latent attention: sizes from the config, the scale from the probe."""
        cfg = self.cfg
        mla = MLASpec(
            q_lora_rank=getattr(cfg, "q_lora_rank", None),
            kv_lora_rank=cfg.kv_lora_rank,
            qk_nope_head_dim=cfg.qk_nope_head_dim,
            qk_rope_head_dim=cfg.qk_rope_head_dim,
            v_head_dim=cfg.v_head_dim,
            norm_eps=self._latent_norm_eps(),
            query_gate=self._latent_query_gate(),
        )
        self._probe(
            "text.attention.mla",
            f"{LAYER0}self_attn.kv_a_proj_with_mqa.weight",
            f"low-rank kv {mla.kv_lora_rank}, q {mla.q_lora_rank}",
        )
        self._source("text.attention.mla", r"self\.kv_a_proj_with_mqa\s*=")
        qk_head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        tiny_qk = self.tiny.qk_nope_head_dim + self.tiny.qk_rope_head_dim
        measured = self.probe.attention_scaling
        yarn = False
        if measured is not None and not math.isclose(measured, tiny_qk**-0.5, rel_tol=1e-6):
            if math.isclose(measured, yarn_scale(self.tiny, tiny_qk**-0.5), rel_tol=1e-6):
                yarn = True
                self._source("text.attention.scale", r"yarn_apply_mscale\(")
            else:
                self._delta(
                    "attention scale not explained", f"{LAYER0}self_attn.scaling", f"{measured:.6g}"
                )
        scale = yarn_scale(cfg, qk_head_dim**-0.5) if yarn else qk_head_dim**-0.5
        bias = self.probe.param_shape(f"{LAYER0}self_attn.kv_a_proj_with_mqa.bias") is not None
        return AttentionSpec(
            num_heads=cfg.num_attention_heads,
            num_kv_heads=cfg.num_attention_heads,
            head_dim=qk_head_dim,
            q_bias=bias,
            k_bias=bias,
            v_bias=bias,
            o_bias=self.probe.param_shape(f"{LAYER0}self_attn.o_proj.bias") is not None,
            qk_norm="none",
            scale=scale,
            mla=mla,
            yarn_mscale=yarn,
            indexer=self.indexer,
        )

    def _latent_query_gate(self) -> LatentQueryGateSpec | None:
        """A projection of both q latents (normed and raw) to queries and gates, where
        q_b_proj would be; its input order is tried by the spec check (``trials``)."""
        tiny = self.tiny
        rank = getattr(tiny, "q_lora_rank", None)
        if not rank or self._layer_param("self_attn.q_b_proj.weight") is not None:
            return None
        wide = tiny.num_attention_heads * (tiny.qk_nope_head_dim + tiny.qk_rope_head_dim)
        wide += tiny.num_attention_heads * tiny.v_head_dim
        prefix = f"{LAYER0}self_attn."
        found = next(
            (
                name[len(prefix) : -len(".weight")]
                for name, shape in self.probe.parameters
                if name.startswith(prefix) and shape == (wide, 2 * rank)
            ),
            None,
        )
        if found is None or "." in found:
            return None
        self._probe(
            "text.attention.mla.query_gate",
            f"{prefix}{found}.weight",
            f"shape ({wide}, {2 * rank}): both q latents in, each head's query and gate out",
        )
        self._source("text.attention.mla.query_gate", rf"self\.{found}\(torch\.cat\(")
        self._source("text.attention.mla.query_gate", r"\* torch\.sigmoid\(gate")
        return LatentQueryGateSpec(found)

    def _latent_norm_eps(self) -> float | None:
        """The latent norms' epsilon when HF does not pass them the config's norm epsilon."""
        norms = {n.name: n for n in self.probe.layer_norms}
        latent = norms.get("self_attn.kv_a_layernorm")
        if latent is None or latent.eps is None:
            return None
        attention = dict(self.probe.modules).get(f"{LAYER0}self_attn", "")
        found = init_assignment(self.files, attention, "kv_a_layernorm")
        passed = found.keyword("eps") if found else None
        if passed and re.fullmatch(r"(self\.)?config\.\w+", passed):
            return None
        if found is not None:
            self.log.add("text.attention.mla.norm_eps", found.evidence)
        self._probe(
            "text.attention.mla.norm_eps", f"{LAYER0}self_attn.kv_a_layernorm", f"eps {latent.eps}"
        )
        return latent.eps

    def _qk_norm_head_modules(self) -> str | None:
        """The list that holds one norm module per head, when the q and k norms keep their
        weights that way (StableLM's ``q_layernorm.norms``): as many as the query heads for q
        and the key/value heads for k, else None."""
        norms = "|".join(re.escape(n) for n in (self.q_norm_name, self.k_norm_name))
        listed = re.compile(rf"^{re.escape(LAYER0)}self_attn\.({norms})\.(\w+)\.\d+\.weight$")
        found = [m.groups() for name, _ in self.probe.parameters if (m := listed.match(name))]
        if not found:
            return None
        attr = found[0][1]
        counts = Counter(norm for norm, _ in found)
        tiny = self.tiny
        heads = tiny.num_attention_heads
        wanted = {self.q_norm_name: heads}
        wanted[self.k_norm_name] = getattr(tiny, "num_key_value_heads", None) or heads
        where = f"{LAYER0}self_attn.{self.q_norm_name}.{attr}"
        if {a for _, a in found} != {attr} or dict(counts) != wanted:
            self._delta("q/k norms kept in a list, not one per head", where, f"{dict(counts)}")
            return None
        self._probe("text.attention.qk_norm", f"{where}.0.weight", f"one norm per head in {attr}")
        self._source("text.attention.qk_norm", rf"self\.{self.q_norm_name}\s*=")
        return attr

    def _qk_norm(self, heads: int) -> str:
        shape = self._layer_param(f"self_attn.{self.q_norm_name}.weight")
        if shape is None and self.probe.has_module(f"{LAYER0}self_attn.{self.q_norm_name}"):
            # Nothing to learn (NanoChat): applied to each head, and a rotation keeps a vector's
            # norm, so before or after RoPE is the same; the attention check confirms it.
            where = f"{LAYER0}self_attn.{self.q_norm_name}"
            self._probe("text.attention.qk_norm", where, "a norm with nothing to learn")
            self._source("text.attention.qk_norm", rf"self\.{self.q_norm_name}\s*=")
            return "per_head"
        if shape is None:
            return "none"
        tiny_heads = self.tiny.num_attention_heads
        kind = "per_head" if shape[-1] == self.ctx.tiny_head_dim else "full_width"
        if kind == "full_width" and shape[-1] != tiny_heads * self.ctx.tiny_head_dim:
            self._delta(
                "q_norm of unexpected width", f"{LAYER0}self_attn.q_norm.weight", str(shape)
            )
        name = self.q_norm_name
        self._probe("text.attention.qk_norm", f"{LAYER0}self_attn.{name}.weight", f"shape {shape}")
        self._source("text.attention.qk_norm", rf"self\.{name}\s*=")
        return kind

    def _attention_scale(self, head_dim: int) -> tuple[float, str | None]:
        """q·k scale: head_dim ** -0.5 unless the probe shows (and the config explains) another."""
        measured = self.probe.attention_scaling
        tiny_head_dim = self.ctx.tiny_head_dim
        if measured is None or math.isclose(measured, tiny_head_dim**-0.5, rel_tol=1e-6):
            return head_dim**-0.5, None
        tiny_scalar = getattr(self.tiny, "query_pre_attn_scalar", None)
        if tiny_scalar and math.isclose(measured, tiny_scalar**-0.5, rel_tol=1e-6):
            scalar = self.cfg.query_pre_attn_scalar
            self._config("text.attention.scale", "query_pre_attn_scalar", scalar)
            self._source("text.attention.scale", r"query_pre_attn_scalar\s*\*\*\s*-0\.5")
            return float(scalar) ** -0.5, "query_pre_attn_scalar"
        multiplier = getattr(self.tiny, "attention_multiplier", None)
        if is_number(multiplier) and math.isclose(measured, multiplier, rel_tol=1e-6):
            value = self.cfg.attention_multiplier
            self._config("text.attention.scale", "attention_multiplier", value)
            self._source("text.attention.scale", r"=\s*(self\.)?config\.attention_multiplier")
            return float(value), "attention_multiplier"
        self._delta(
            "attention scale not explained",
            f"{LAYER0}self_attn.scaling",
            f"tiny model uses {measured:.6g}, head_dim ** -0.5 is {tiny_head_dim**-0.5:.6g}",
        )
        return head_dim**-0.5, None

    def _position_scale(self) -> bool:
        """Ministral 3 scales q by ``1 + beta * log(1 + floor(position / original))`` after RoPE
        (rope_parameters.llama_4_scaling_beta); the spec check runs it at positions where the
        tiny config's original span makes it count."""
        params = rope_parameters_of(self.cfg)
        value = params.get(POSITION_SCALE_KEY)
        if value is None:
            return False
        self._config(
            "text.attention.position_scale", f"rope_parameters.{POSITION_SCALE_KEY}", value
        )
        self._source("text.attention.position_scale", re.escape(POSITION_SCALE_KEY))
        return True


def yarn_scale(config: Any, scale: float) -> float:
    """DeepSeek's scale for YaRN RoPE: times mscale(factor, mscale_all_dim) squared."""
    rope = getattr(config, "rope_parameters", None) or {}
    mscale_all_dim = rope.get("mscale_all_dim", 0)
    factor = rope.get("factor", 1.0)
    if rope.get("rope_type", "default") == "default" or not mscale_all_dim or factor <= 1:
        return scale
    mscale = 0.1 * mscale_all_dim * math.log(factor) + 1.0
    return scale * mscale * mscale
