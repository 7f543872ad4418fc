"""Build the ``TextDecoderSpec`` of a decoder (dense or MoE) from its config and a tiny-model probe.

Each section reads the real config (normalised by transformers) for sizes and the probe for
structure, and logs its evidence. Whatever the probe shows that no section explains (an unknown
parameter, a parallel block, mixed norms) becomes an unresolved ``Delta`` instead of a guess.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

from onboard.analysis.attention_kinds import declared_kinds, kinds_key, window_key, window_of
from onboard.analysis.embedding_reader import EmbeddingReader
from onboard.analysis.layers import CROSS_ATTENTION, FFN_BLOCK_NAMES
from onboard.analysis.mlp_reader import MLPReader, activation_of
from onboard.analysis.norm_reader import EPS_KEYS, NormReader
from onboard.analysis.probe import Probe, is_norm
from onboard.analysis.reader import LAYER0, Context, Reader
from onboard.analysis.rope_reader import RopeReader, rope_parameters_of
from onboard.analysis.source_lines import find_line, init_assignment
from onboard.analysis.trials import TRIALS, changed_by
from onboard.analysis.variants import Reading, differential, dynamic_mask, residual_gates
from onboard.analysis.whole_model import WholeModelReader
from onboard.source import SourceFile
from onboard.spec import (
    AttentionSpec,
    Delta,
    Evidence,
    HeadTransformSpec,
    MLASpec,
    NormSpec,
    TextDecoderSpec,
)
from onboard.tiny import POSITION_SCALE_KEY, is_number

_FFN = "|".join(FFN_BLOCK_NAMES)
# Parameter names a dense decoder layer may have, relative to the layer; anything else is a delta.
_KNOWN_LAYER_PARAMS = re.compile(
    r"^(self_attn\.(q|k|v|o)_proj\.(weight|bias)"
    r"|self_attn\.(q|k)_norm\.weight"
    r"|self_attn\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj)\.(weight|bias)"
    r"|self_attn\.(q_a_layernorm|kv_a_layernorm)\.weight"
    r"|mlp\.(gate|up|down)_proj\.(weight|bias)"
    r"|mlp\.gate_up_proj\.weight"
    rf"|({_FFN})\.experts\.(gate_up_proj|down_proj)(_bias)?"
    # the router, or the one linear inside it (HunYuan: gate.wg), which the router probe checks
    rf"|({_FFN})\.(gate|router)(\.\w+)?\.(weight|bias|e_score_correction_bias)"
    r"|mlp\.(shared_experts?|shared_mlp)\.(gate|up|down)_proj\.weight"
    r"|mlp\.shared_expert_gate\.weight"
    r"|(input|post_attention|pre_feedforward|post_feedforward)_layernorm\.(weight|bias))$"
)
# Names of separate q, k, v projections other than q_proj ... (CTRL: Wq; BERT-style: query)
_QKV_NAMES = re.compile(r"^(?:w_?)?([qkv])(?:_proj)?$|^(query|key|value)$", re.IGNORECASE)
# What attentions call their q and k norms.
_QK_NORM_NAMES = (
    ("q_norm", "k_norm"),
    ("q_layernorm", "k_layernorm"),
    ("query_layernorm", "key_layernorm"),  # HunYuan
)
# Config values that clamp activations (``clamp(min=-c, max=c)``), which the spec cannot hold.
_CLIP_KEYS = ("clip_qkv",)
_SUPPORTED_LAYER_KINDS = ("full_attention", "sliding_attention")


class DecoderSpecBuilder(Reader):
    """Reads one config + probe; ``build()`` returns the spec, evidence and deltas."""

    def __init__(
        self,
        hf_config: Any,
        tiny_config: Any,
        probe: Probe,
        files: Sequence[SourceFile],
        *,
        model: Any = None,
        real_layers: Sequence[str] = (),
    ) -> None:
        super().__init__(Context(hf_config, tiny_config, probe, files, model))
        self.real_layers = tuple(real_layers)
        # The dense MLP's projections once mlp() has understood them (StarCoder2: c_fc, c_proj).
        self.mlp_projections: tuple[str, ...] = ()
        self.learned_activation: str | None = None  # its attribute in the MLP, set by mlp()
        self.fused_qkv: str | None = None  # set by build() before the parameter check
        self.qkv_names = {p: f"{p}_proj" for p in "qkv"}  # separate projections, set by build()
        self.last_layer_o_bias: str | None = None  # set by build()
        # Readings of analysis.variants by spec path, set by build(); their parameters have roles
        self.variants: dict[str, Reading] = {}
        self.multi_query = False  # set with fused_qkv: its width has one k/v head (multi_query)
        self.o_name = "o_proj"  # the attention's output projection (Phi: dense), set by build()
        # q/k norms by their HF names (Persimmon: q_layernorm, k_layernorm)
        self.q_norm_name, self.k_norm_name = next(
            (
                pair
                for pair in _QK_NORM_NAMES
                if probe.param_shape(f"{LAYER0}self_attn.{pair[0]}.weight") is not None
            ),
            _QK_NORM_NAMES[0],
        )
        layers = dict(probe.modules)
        count = tiny_config.num_hidden_layers
        # The first dense layer describes the dense MLP (MoE models may have none).
        self.dense_layer = next(
            (
                i
                for i in range(count)
                if f"model.layers.{i}.mlp.experts" not in layers
                and f"model.layers.{i}.mlp" in layers
            ),
            None,
        )

    # -- helpers ----------------------------------------------------------------------------

    @property
    def _final_norm_name(self) -> str:
        return self.probe.final_norm.name if self.probe.final_norm else "norm"

    def _attention_linears(self) -> dict[str, tuple[int, ...]]:
        """Layer 0's attention weights that belong to its direct children (q_proj, dense ...)."""
        prefix = f"{LAYER0}self_attn."
        found = {}
        for name, shape in self.probe.parameters:
            attr = name.removeprefix(prefix).removesuffix(".weight")
            if name.startswith(prefix) and name.endswith(".weight") and "." not in attr:
                found[attr] = shape
        return found

    # -- sections ---------------------------------------------------------------------------

    def build(self) -> TextDecoderSpec:
        cfg = self.cfg
        layer_types = self.layer_types()
        reading = self.take(MLPReader(self.ctx, self.dense_layer).read())
        mlp = reading.spec
        self.mlp_projections = reading.known_projections
        self.learned_activation = mlp.learned_activation
        self.qkv_names = self._qkv_names()
        self.fused_qkv = self._fused_qkv()
        self.last_layer_o_bias = self._last_layer_o_bias()
        self.o_name = self._output_projection()
        self.variants = self._variants()
        self._check_parameters()
        self._check_clipping()
        tie = bool(getattr(cfg, "tie_word_embeddings", False))
        self._config("text.tie_word_embeddings", "tie_word_embeddings", tie)
        if tie and any(name == "lm_head.weight" for name, _ in self.probe.disk_tensors):
            self._delta("tied embeddings saved twice", "lm_head.weight", "on-disk layout")
        final_softcap = getattr(cfg, "final_logit_softcapping", None)
        if final_softcap:
            self._config("text.final_logit_softcap", "final_logit_softcapping", final_softcap)
            self._source("text.final_logit_softcap", r"final_logit_softcapping")
        sliding_window = self.sliding_window(layer_types)
        attention = self.attention()
        norm = self.take(NormReader(self.ctx).read())
        rope = self.take(RopeReader(self.ctx, layer_types).read())
        embeddings = self.take(EmbeddingReader(self.ctx).read())
        text = TextDecoderSpec(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.hidden_size,
            num_layers=cfg.num_hidden_layers,
            # ALiBi models (BLOOM, MPT) have no position limit in their config
            max_position_embeddings=getattr(cfg, "max_position_embeddings", None) or 0,
            layer_types=layer_types,
            sliding_window=sliding_window,
            attention=attention,
            mlp=mlp,
            norm=norm,
            rope=rope.rope,
            tie_word_embeddings=tie,
            embedding_scale=embeddings.scale,
            final_logit_softcap=float(final_softcap) if final_softcap else None,
            **self.moe(),
        )
        final = self._final_norm_name
        names = tuple(
            (role, name)
            for role, name in (
                ("final_norm", final),
                ("o_proj", self.o_name),
                *((f"{p}_proj", name) for p, name in self.qkv_names.items()),
                ("q_norm", self.q_norm_name),
                ("k_norm", self.k_norm_name),
            )
            if name != {"final_norm": "norm"}.get(role, role)
        )
        if self.probe.final_norm is None:
            self._probe("text.final_norm", "model", "no final norm: the last layer feeds the head")
        lm_head_bias = self.probe.param_shape("lm_head.bias") is not None
        if lm_head_bias:
            self._probe("text.lm_head_bias", "lm_head.bias", "present")
        text = dataclasses.replace(
            text,
            rope_layers_key=rope.rope_layers_key,
            names=names,
            lm_head_bias=lm_head_bias,
            final_norm=self.probe.final_norm is not None,
            positions=embeddings.positions,
            embedding_norm=embeddings.norm,
            blocks_add_residual=self.probe.flow.residual_inside,
            transposed_linears=self.transposed_linears(),
            first_layer_without=self._first_layer_without(text.norm),
            head_transform=self.head_transform(),
            residual_gates=self._variant_value("text.residual_gates") or (),
        )
        text, mismatches = self._tried(text)
        if self.deltas:  # the full spec check will not run: the attention check stands alone
            self.deltas.extend(mismatches)
        whole = WholeModelReader(self.ctx, blocked=bool(self.deltas))
        return self.take(whole.read(text))

    def head_transform(self) -> HeadTransformSpec | None:
        """ModernBERT's prediction head (the layout view's ``model.head_transform``): a dense
        layer, an activation told by its values and a norm; the spec check proves the order."""
        import torch

        module = getattr(getattr(self.model, "model", None), "head_transform", None)
        if module is None:
            return None
        children = dict(module.named_children())
        dense = next(n for n, c in children.items() if isinstance(c, torch.nn.Linear))
        norm = next(n for n, c in children.items() if is_norm(c))
        act, activation = next(
            (
                (name, found)
                for name, child in children.items()
                if name not in (dense, norm) and (found := activation_of(child))
            ),
            ("", None),
        )
        cls = type(module).__name__
        where = f"model.head_transform ({cls})"
        if activation is None:
            self._delta("head transform's activation not recognised", where)
            return None
        path = "text.head_transform"
        self._probe(path, where, f"{dense}, {activation}, {norm}")
        return HeadTransformSpec(
            dense,
            norm,
            activation,
            self._config_read(path, cls, act, r"config\.(\w+)\]"),  # ACT2FN[config.<key>]
            children[dense].bias is not None,
            self._config_read(path, cls, dense, r"config\.(\w*bias\w*)"),
        )

    def _config_read(self, path: str, class_name: str, attr: str, pattern: str) -> str | None:
        """The config key ``self.<attr> = ...`` reads in ``class_name.__init__`` (by ``pattern``
        on its source, positional arguments included), cited for ``path``."""
        found = init_assignment(self.files, class_name, attr)
        match = re.search(pattern, found.evidence.detail) if found else None
        if match is None:
            return None
        self.log.add(path, found.evidence)
        return match.group(1)

    def _first_layer_without(self, norm: NormSpec) -> tuple[str, ...]:
        """Norm roles layer 0 fills with an identity (ModernBERT's attn_norm): the probe read
        the layers on layer 1."""
        roles = {name: role for role, name in norm.names}
        for name in self.probe.first_layer_identity:
            self._probe("text.first_layer_without", f"{LAYER0}{name}", "an identity, not a norm")
            if name not in roles:
                self._delta(
                    "an identity in layer 0 where other layers hold a norm", f"{LAYER0}{name}"
                )
        return tuple(roles[n] for n in self.probe.first_layer_identity if n in roles)

    def transposed_linears(self) -> tuple[str, ...]:
        """Layer-relative linears that keep their weight (in, out), as GPT-2's Conv1D does."""
        found = set()
        for name in self.probe.transposed:
            match = re.match(r"^model\.layers\.\d+\.(.+)$", name)
            if match is None:
                self._delta("a linear stored (in, out) outside the decoder layers", name)
                continue
            found.add(match.group(1))
        if found:
            self._probe(
                "text.transposed_linears",
                f"{LAYER0}*",
                f"{', '.join(sorted(found))} store their weight (in, out)",
            )
            self._source("text.transposed_linears", r"= Conv1D\(")
        return tuple(sorted(found))

    def _tried(self, text: TextDecoderSpec) -> tuple[TextDecoderSpec, tuple[Delta, ...]]:
        """The spec, or the first reading of ``trials.TRIALS`` with which every attention
        matches HF (cited); the mismatches that remain when none does."""
        mismatches = self._attention_mismatches(text)
        for trial in TRIALS:
            if not mismatches:
                break
            reading = next(
                (r for r in trial.readings(text) if not self._attention_mismatches(r)), None
            )
            if reading is not None:
                for cited in changed_by(text, reading):  # the grouped rows came with pairs
                    self._probe(cited.path, f"{LAYER0}self_attn", cited.observation)
                    if cited.source:
                        self._source(cited.path, cited.source)
                text, mismatches = reading, ()
        return text, mismatches

    def _attention_mismatches(self, text: TextDecoderSpec) -> tuple[Delta, ...]:
        """What the attention computes beyond the spec (Cohere's interleaved RoPE), even when
        other deltas keep the full spec check (``spec_check.check_spec``) from running."""
        if self.model is None:
            return ()
        from onboard.analysis.spec_check import check_attention
        from onboard.tiny_model import perturb

        try:
            model = perturb(copy.deepcopy(self.model))  # the probe's model stays as HF built it
        except Exception:  # a model that cannot be copied is not checked; it is incomplete anyway
            return ()
        return check_attention(text, model, self.tiny)

    def moe(self) -> dict[str, Any]:
        """The MoE block and the per-layer MLP kinds of the real model (nothing for dense ones)."""
        kinds = tuple(sig.split("|", 1)[0] for sig in self.real_layers)
        if "moe" not in kinds or self.model is None:
            return {}
        from onboard.analysis.moe import find_moe
        from onboard.checkpoint import tensors

        found = find_moe(self.model, self.tiny, self.cfg, tensors(self.model))
        for path, evidence in found.evidence:
            self.log.add(path, evidence)
        self.deltas.extend(found.deltas)
        dense = [i for i, kind in enumerate(kinds) if kind == "dense"]
        summary = f"{len(dense)} dense layer(s) {dense[:8]}" if dense else "every layer is MoE"
        self.log.add(
            "text.mlp_kinds", Evidence("probe", "meta-device build of the real model", summary)
        )
        rule = dense_rule(self.cfg, kinds)
        if rule is None:
            self._delta(
                "which layers are dense is not explained by the config", "config.json", summary
            )
        elif rule != "none":
            self._config("text.mlp_kinds", rule, getattr(self.cfg, rule))
        spec = found.spec and dataclasses.replace(found.spec, dense_rule=rule or "none")
        return {"moe": spec, "mlp_kinds": kinds}

    def layer_types(self) -> tuple[str, ...]:
        cfg = self.cfg
        declared = declared_kinds(cfg)
        if declared:
            kinds = declared
            self._config("text.layer_types", kinds_key(cfg), _summarise(kinds))
        elif getattr(cfg, "sliding_window", None):
            kinds = ("sliding_attention",) * cfg.num_hidden_layers
            self._config("text.layer_types", "sliding_window", cfg.sliding_window)
            self._source("text.layer_types", r"sliding_window=getattr\(self\.config")
        else:
            kinds = ("full_attention",) * cfg.num_hidden_layers
            self.log.add("text.layer_types", Evidence("config", "config.json", "no sliding window"))
        for kind in sorted(set(kinds) - set(_SUPPORTED_LAYER_KINDS)):
            self._delta(f"layer kind {kind!r}", "config.json:layer_types", _summarise(kinds))
        return kinds

    def sliding_window(self, layer_types: tuple[str, ...]) -> int | None:
        if "sliding_attention" not in layer_types:
            return None
        window = window_of(self.cfg)
        self._config("text.sliding_window", window_key(self.cfg), window)
        return int(window) if window else None

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
        qk_norm = self._qk_norm(heads)
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
            dynamic_mask=self._variant_value("text.attention.dynamic_mask"),
            differential=self._variant_value("text.attention.differential"),
        )

    def _variants(self) -> dict[str, Reading]:
        """The readings of ``analysis.variants`` that the tiny model shows, by spec path, each
        with its evidence logged."""
        if self.model is None:
            return {}
        from onboard.analysis.layout import hf_module

        tiny = self.tiny
        views = list(self.model.model.layers)
        layers = [hf_module(layer) for layer in views]
        attentions = [hf_module(getattr(layer, "self_attn", None)) for layer in views]
        if any(a is None for a in attentions):
            return {}
        kv_heads = getattr(tiny, "num_key_value_heads", None) or tiny.num_attention_heads
        head_dim = self.ctx.tiny_head_dim
        found = {
            "text.attention.dynamic_mask": dynamic_mask(
                attentions[0], kv_heads, head_dim, self.cfg, self.files
            ),
            "text.attention.differential": differential(
                attentions, head_dim, tiny, self.files, EPS_KEYS
            ),
            "text.residual_gates": residual_gates(layers[0], tiny.hidden_size, self.files),
        }
        for path, reading in found.items():
            if reading is not None:
                self.log.add(path, *reading.evidence)
        return {path: reading for path, reading in found.items() if reading is not None}

    def _variant_value(self, path: str) -> Any:
        reading = self.variants.get(path)
        return reading.value if reading else None

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
            if math.isclose(measured, _yarn_scale(self.tiny, tiny_qk**-0.5), rel_tol=1e-6):
                yarn = True
                self._source("text.attention.scale", r"yarn_apply_mscale\(")
            else:
                self._delta(
                    "attention scale not explained", f"{LAYER0}self_attn.scaling", f"{measured:.6g}"
                )
        scale = _yarn_scale(cfg, qk_head_dim**-0.5) if yarn else qk_head_dim**-0.5
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
        )

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

    def _check_parameters(self) -> None:
        """Every parameter must have a role; report each unknown one once, with its source line."""
        modules = dict(self.probe.modules)
        names = "|".join(re.escape(p) for p in self.mlp_projections) or "(?!)"
        mlp_param = re.compile(rf"^mlp\.({names})\.(weight|bias)$")
        learned = re.escape(self.learned_activation) if self.learned_activation else "(?!)"
        activation_param = re.compile(rf"^mlp\.{learned}\.\w+$")
        own = "|".join(
            re.escape(n) for n in (self.fused_qkv, self.o_name, *self.qkv_names.values()) if n
        )
        own += f"|{self.q_norm_name}|{self.k_norm_name}"
        attention_param = re.compile(rf"^self_attn\.({own})\.(weight|bias)$")
        explained = {
            ("self_attn." if ".attention." in path else "") + name
            for path, reading in self.variants.items()
            for name in reading.parameters
        }
        final = self._final_norm_name
        top = {"model.embed_tokens.weight", "model.embed_positions.weight", "lm_head.weight"}
        top |= {"lm_head.bias", "model.embed_norm.weight", "model.embed_norm.bias"}
        top |= {f"model.{final}.weight", f"model.{final}.bias"}
        # Norms the data flow placed, whatever HF calls them (glm4: post_self_attn_layernorm).
        flow = self.probe.flow
        placed_norms = set(flow.attn_in + flow.attn_out + flow.mlp_in + flow.mlp_out)
        placed_norms |= set(flow.attn_add + flow.mlp_add)
        seen: set[str] = set()
        for name, shape in self.probe.parameters:
            if name in top or name.startswith("model.head_transform."):  # head_transform() reads
                continue
            match = re.match(r"^model\.layers\.\d+\.(.+)$", name)
            if match and (
                _KNOWN_LAYER_PARAMS.match(match.group(1))
                or attention_param.match(match.group(1))
                or mlp_param.match(match.group(1))
                or activation_param.match(match.group(1))
                or match.group(1) == f"self_attn.{self.last_layer_o_bias}"
                or match.group(1) in explained
                or match.group(1).rpartition(".")[0] in placed_norms
            ):
                continue
            pattern = re.sub(r"\.layers\.\d+\.", ".layers.*.", name)
            if pattern in seen:
                continue
            seen.add(pattern)
            cross = CROSS_ATTENTION.match(pattern)
            if cross:  # one finding for the module and its norm, not one per parameter
                where = f"model.layers.*.{cross.group(1)}"
                if where not in seen:
                    seen.add(where)
                    module = modules.get(where.replace("*", "0"), "")
                    self._delta(
                        "cross-attention to encoder states (the decoder of an encoder-decoder "
                        "model: a decoder-only graph would leave these weights unused)",
                        f"{where} ({module})",
                    )
                continue
            owner, _, leaf = name.rpartition(".")
            parent, _, attr = owner.rpartition(".")
            # A module's weight/bias is explained where the module is created; a bare parameter
            # (attention sinks, say) where it is assigned.
            lookups = [(modules.get(parent, ""), attr), (modules.get(owner, ""), leaf)]
            if leaf not in ("weight", "bias"):
                lookups.reverse()
            found = next(
                (f for cls, a in lookups if a and (f := init_assignment(self.files, cls, a))), None
            )
            where = found.evidence.where if found else pattern
            detail = f"{pattern} {shape}" + (f": {found.evidence.detail}" if found else "")
            self._delta("parameter with no role in the spec", where, detail)

    def _check_clipping(self) -> None:
        """OLMo clamps q, k and v to +-config.clip_qkv: the tiny model's activations never reach
        a real clip value, so the spec check cannot see it; a set value is reported."""
        for key in _CLIP_KEYS:
            value = getattr(self.cfg, key, None)
            if value is not None:
                found = find_line(self.files, rf"\bconfig\.{key}\b")
                self._delta(
                    f"activations clipped at config.{key}",
                    found.where if found else f"config.json:{key}",
                    f"{key} = {value!r}",
                )


def dense_rule(config: Any, kinds: Sequence[str]) -> str | None:
    """The config rule that reproduces which layers are dense, or None when none does."""
    count = len(kinds)
    rules = {"none": ["moe"] * count}
    first_k = getattr(config, "first_k_dense_replace", None)
    if isinstance(first_k, int):
        rules["first_k_dense_replace"] = ["dense" if i < first_k else "moe" for i in range(count)]
    step = getattr(config, "decoder_sparse_step", None)
    if isinstance(step, int) and step > 0:
        only = set(getattr(config, "mlp_only_layers", None) or [])
        rules["mlp_only_layers"] = [
            "moe" if i not in only and (i + 1) % step == 0 else "dense" for i in range(count)
        ]
    interval = getattr(config, "moe_layer_interval", None)
    start, end = (getattr(config, f"moe_layer_{e}_index", None) for e in ("start", "end"))
    if isinstance(interval, int) and interval > 0 and isinstance(start, int):
        end = end if isinstance(end, int) and end >= 0 else count - 1
        rules["moe_layer_interval"] = [
            "moe" if (i + 1) % interval == 0 and start <= i <= end else "dense"
            for i in range(count)
        ]
    # A rule the config declares wins over "none", so other checkpoints of the type still work.
    order = ("first_k_dense_replace", "mlp_only_layers", "moe_layer_interval", "none")
    return next((name for name in order if rules.get(name) == list(kinds)), None)


def _yarn_scale(config: Any, scale: float) -> float:
    """DeepSeek's scale for YaRN RoPE: times mscale(factor, mscale_all_dim) squared."""
    rope = getattr(config, "rope_parameters", None) or {}
    mscale_all_dim = rope.get("mscale_all_dim", 0)
    factor = rope.get("factor", 1.0)
    if rope.get("rope_type", "default") == "default" or not mscale_all_dim or factor <= 1:
        return scale
    mscale = 0.1 * mscale_all_dim * math.log(factor) + 1.0
    return scale * mscale * mscale


def _summarise(kinds: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} x {k}" for k, n in counts.items())
