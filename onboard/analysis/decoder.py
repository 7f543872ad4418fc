"""Build the ``TextDecoderSpec`` of a decoder (dense or MoE) from its config and a tiny-model probe.

Each section has its reader (``attention_reader``, ``mlp_reader``, ``norm_reader``,
``rope_reader``, ``embedding_reader``, ``variants``, ``whole_model``), which reads the real config
(normalised by transformers) for sizes and the probe for structure, and hands back its value with
the evidence. The builder composes the readings, reads what spans the model (layer kinds, the head,
the MoE block) and checks that every parameter has a role: whatever the probe shows that no reader
explains (an unknown parameter, a parallel block, mixed norms) becomes an unresolved ``Delta``
instead of a guess.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from onboard.analysis.attention_kinds import declared_kinds, kinds_key, window_key, window_of
from onboard.analysis.attention_reader import AttentionReader, AttentionReading
from onboard.analysis.embedding_reader import EmbeddingReader
from onboard.analysis.gated_norm import GatedNormReader
from onboard.analysis.gated_norm import parameters as gated_norm_parameters
from onboard.analysis.indexer import indexer
from onboard.analysis.inner_parts import inner_parts
from onboard.analysis.kind_parts import kind_parts
from onboard.analysis.layer_stacks import Recurrence
from onboard.analysis.layers import CROSS_ATTENTION, FFN_BLOCK_NAMES
from onboard.analysis.layout import hf_module
from onboard.analysis.mixer_reader import MixerReader, MixersReading
from onboard.analysis.mlp_reader import MLPReader, MLPReading, activation_of
from onboard.analysis.norm_reader import EPS_KEYS, NormReader
from onboard.analysis.probe import Probe, is_norm
from onboard.analysis.reader import LAYER0, Context, Reader
from onboard.analysis.rope_reader import RopeReader
from onboard.analysis.router import passed_bias_parameters
from onboard.analysis.source_lines import find_line, init_assignment
from onboard.analysis.trials import TRIALS, changed_by
from onboard.analysis.unseen_computation import unseen_computation
from onboard.analysis.value_parts import value_parts
from onboard.analysis.variants import (
    Reading,
    differential,
    dynamic_mask,
    residual_gates,
    sinks,
)
from onboard.analysis.whole_model import WholeModelReader
from onboard.block_specs import BlockLayout, NormSpec
from onboard.errors import InvalidConfigError, UnsupportedFeatureError
from onboard.source import SourceFile
from onboard.spec import (
    LEADING_DENSE_KEYS,
    Delta,
    Evidence,
    HeadTransformSpec,
    TextDecoderSpec,
)
from onboard.token_mixers import is_attention

_FFN = "|".join(FFN_BLOCK_NAMES)
# Parameter names a dense decoder layer may have, relative to the layer; anything else is a delta.
_KNOWN_LAYER_PARAMS = re.compile(
    r"^(self_attn\.(q|k|v|o)_proj\.(weight|bias)"
    r"|self_attn\.(q|k)_norm\.weight"
    r"|self_attn\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj)\.(weight|bias)"
    r"|self_attn\.(q_a_layernorm|kv_a_layernorm)\.weight"
    r"|mlp\.(gate|up|down)_proj\.(weight|bias)"
    r"|mlp\.gate_up_proj\.weight"
    rf"|({_FFN})\.experts\.(gate_up_proj|up_proj|down_proj)(_bias)?"
    # the router, or the one linear inside it (HunYuan: gate.wg), which the router probe checks
    rf"|({_FFN})\.(gate|router)(\.\w+)?\.(weight|bias|e_score_correction_bias)"
    # a learned scale on the router, which the router probe must find it multiplies by
    rf"|({_FFN})\.gate\.global_scale"
    r"|mlp\.(shared_experts?|shared_mlp)\.(gate|up|down|gate_up)_proj\.weight"
    r"|mlp\.shared_experts\.(gate|up|down)_proj"  # stacked, 3-D (Inkling)
    r"|mlp\.shared_expert_gate\.weight"
    r"|(input|post_attention|pre_feedforward|post_feedforward)_layernorm\.(weight|bias))$"
)
# indexed_attention: full attention whose keys a lightning indexer selects (DeepSeek V3.2)
_SUPPORTED_LAYER_KINDS = ("full_attention", "sliding_attention", "indexed_attention")


class DecoderSpecBuilder(Reader):
    """Reads one config + probe; ``build()`` returns the spec, with the evidence in ``log`` and
    the deltas in ``deltas``."""

    def __init__(
        self,
        hf_config: Any,
        tiny_config: Any,
        probe: Probe,
        files: Sequence[SourceFile],
        *,
        model: Any = None,
        real_layers: Sequence[str] = (),
        blocks: BlockLayout | None = None,
        recurrence: Recurrence | None = None,
    ) -> None:
        super().__init__(Context(hf_config, tiny_config, probe, files, model))
        self.real_layers = tuple(real_layers)
        self.blocks = blocks
        self.recurrence = recurrence
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

    # -- sections ---------------------------------------------------------------------------

    def build(self) -> TextDecoderSpec:
        cfg = self.cfg
        layer_types, mixers = self.layer_types()
        attention_kinds = tuple(k for k in layer_types if is_attention(k))
        variants = self._inner_parts()
        mlp_reader = MLPReader(self.ctx, self.dense_layer, _value(variants, "text.mlp.sub_norm"))
        mlp = self.take(mlp_reader.read()) if self._mlps() else None
        attention = None
        if attention_kinds:  # a pure state-space model has none
            self._refuse_headless_attention()
            variants |= self._variants()
            gate = "text.attention.output_gate_"
            attention = self.take(
                AttentionReader(
                    self.ctx,
                    dynamic_mask=_value(variants, "text.attention.dynamic_mask"),
                    differential=_value(variants, "text.attention.differential"),
                    sinks=_value(variants, "text.attention.sinks"),
                    indexer=_value(variants, "text.attention.indexer"),
                    sub_norm=_value(variants, "text.attention.sub_norm"),
                    output_gate_proj=_value(variants, f"{gate}proj"),
                    output_gate_activation=_value(variants, f"{gate}activation"),
                    output_gate_per_head=bool(_value(variants, f"{gate}per_head")),
                ).read()
            )
            self._check_indexed_layers(layer_types, variants)
        reported: tuple[str, ...] = ()
        if attention is not None:
            attention, reported = self._kind_parts(attention)
        self._check_parameters(mlp, attention, variants, (*mixers.parameters, *reported))
        self.deltas.extend(unseen_computation(self.cfg, self.files))
        tie = bool(getattr(cfg, "tie_word_embeddings", False))
        self._config("text.tie_word_embeddings", "tie_word_embeddings", tie)
        if tie and any(name == "lm_head.weight" for name, _ in self.probe.disk_tensors):
            self._delta("tied embeddings saved twice", "lm_head.weight", "on-disk layout")
        final_softcap = getattr(cfg, "final_logit_softcapping", None)
        if final_softcap:
            self._config("text.final_logit_softcap", "final_logit_softcapping", final_softcap)
            self._source("text.final_logit_softcap", r"final_logit_softcapping")
        sliding_window = self.sliding_window(layer_types)
        norm = self.take(NormReader(self.ctx).read())
        norm = self.take(GatedNormReader(self.ctx, norm).read())
        rope = self.take(RopeReader(self.ctx, attention_kinds).read())
        embeddings = self.take(EmbeddingReader(self.ctx).read())
        text = TextDecoderSpec(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.hidden_size,
            num_layers=cfg.num_hidden_layers,
            # ALiBi models (BLOOM, MPT) have no position limit in their config
            max_position_embeddings=getattr(cfg, "max_position_embeddings", None) or 0,
            layer_types=layer_types,
            sliding_window=sliding_window,
            attention=attention and attention.spec,
            mlp=mlp and mlp.spec,
            norm=norm,
            rope=rope.rope,
            tie_word_embeddings=tie,
            embedding_scale=embeddings.scale,
            final_logit_softcap=float(final_softcap) if final_softcap else None,
            mixers=mixers.mixers,
            mixer_labels=mixers.labels,
            blocks=self._blocks(),
            **self.moe(layer_types, _value(variants, "text.moe.post_norm")),
        )
        names = self._names(attention)
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
            residual_gates=_value(variants, "text.residual_gates") or (),
            layer_types_key=kinds_key(cfg),
            window_key=window_key(cfg),
        )
        if self.recurrence is not None:  # HRM's stacks in cycles, read by layer_stacks
            self.log.add("text.recurrence", *self.recurrence.evidence)
            text = dataclasses.replace(text, recurrence=self.recurrence.spec)
        text, mismatches = self._tried(text)
        if self.deltas:  # the full spec check will not run: the attention check stands alone
            self.deltas.extend(mismatches)
        whole = WholeModelReader(self.ctx, blocked=bool(self.deltas))
        return self.take(whole.read(text))

    def _mlps(self) -> bool:
        """Whether any layer mixes channels (a pure state-space model's layers do not)."""
        return self.dense_layer is not None or any(
            name.endswith(".experts") for name, _ in self.probe.modules
        )

    def _names(self, attention: AttentionReading | None) -> tuple[tuple[str, str], ...]:
        """The HF names that differ from Llama's, by role."""
        roles = [("final_norm", self._final_norm_name)]
        if attention is not None:
            roles += [
                ("o_proj", attention.o_name),
                *((f"{p}_proj", name) for p, name in attention.qkv_names),
                ("q_norm", attention.qk_norm_names[0]),
                ("k_norm", attention.qk_norm_names[1]),
            ]
        return tuple(
            (role, name) for role, name in roles if name != {"final_norm": "norm"}.get(role, role)
        )

    def _blocks(self) -> BlockLayout | None:
        if self.blocks is not None:
            self._probe(
                "text.blocks",
                f"{LAYER0}*",
                f"one residual block a layer: {self.blocks.block} after {self.blocks.norm}",
            )
        return self.blocks

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
            reading = next((r for r in trial.readings(text) if self._attention_matches(r)), None)
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
        from onboard.analysis.spec_check import check_attention

        model = self._perturbed_copy()
        return () if model is None else check_attention(text, model, self.tiny)

    def _attention_matches(self, text: TextDecoderSpec) -> bool:
        """Every attention computes what ``text`` says: a reading the interpreter cannot even
        run (rows that do not split as it says) is not a match."""
        from onboard.analysis.spec_check import find_mismatches

        model = self._perturbed_copy()
        return (
            model is not None and find_mismatches(text, model, self.tiny, attention_only=True) == []
        )

    def _perturbed_copy(self) -> Any:
        """The probe's model perturbed, on a copy (it stays as HF built it); None without one,
        or when it cannot be copied (such a model is incomplete anyway)."""
        if self.model is None:
            return None
        from onboard.tiny_model import perturb

        try:
            return perturb(copy.deepcopy(self.model))
        except Exception:  # any failure to copy means: not checked
            return None

    def moe(self, layer_types: Sequence[str] = (), post_norm: str | None = None) -> dict[str, Any]:
        """The MoE block and the per-layer MLP kinds of the real model (nothing for dense ones).
        In a block layout the layer kinds say which layers hold experts (``moe``).
        ``post_norm``: a norm of the block's output (``inner_parts``)."""
        kinds = tuple(sig.split("|", 1)[0] for sig in self.real_layers)
        in_blocks = self.blocks is not None and "moe" in layer_types
        if ("moe" not in kinds and not in_blocks) or self.model is None:
            return {}
        found = self._find_moe()
        if found.spec is not None and post_norm is not None:
            found = dataclasses.replace(
                found, spec=dataclasses.replace(found.spec, post_norm=post_norm)
            )
        if in_blocks:
            return {"moe": found.spec}
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

    def _find_moe(self) -> Any:
        """The MoE findings, with the checkpoint's names as transformers reads them and under the
        model's prefix (NemotronH saves model.* as backbone.*), as the on-disk readers expect;
        their evidence and deltas kept."""
        from onboard.analysis.layout import prefix_renames
        from onboard.analysis.load_renames import renamed
        from onboard.analysis.load_splits import split_tensors
        from onboard.analysis.moe import find_moe
        from onboard.checkpoint import parameter_shapes, tensors

        hf = hf_module(self.model)
        saved = split_tensors(tensors(hf), self.probe.load_splits)
        checkpoint = {renamed(n, self.probe.load_renames): t for n, t in saved.items()}
        disk = tuple((name, tuple(t.shape)) for name, t in checkpoint.items())
        for old, new in prefix_renames(disk, parameter_shapes(hf)):
            checkpoint = {
                name.replace(old, new, 1) if name.startswith(old) else name: tensor
                for name, tensor in checkpoint.items()
            }
        found = find_moe(self.model, self.tiny, self.cfg, checkpoint)
        for path, evidence in found.evidence:
            self.log.add(path, evidence)
        self.deltas.extend(found.deltas)
        return found

    def layer_types(self) -> tuple[tuple[str, ...], MixersReading]:
        """Each layer's kind in onboard's words, and the recurrent mixers of a hybrid's
        layers (HF's labels for them vary; what the layer holds decides)."""
        labels = self._layer_labels()
        others = [k for k in dict.fromkeys(labels) if k not in _SUPPORTED_LAYER_KINDS]
        tiny_labels = declared_kinds(self.tiny) or ()
        mixers = self.take(MixerReader(self.ctx, tiny_labels).read(others))
        kinds = dict(mixers.labels)
        return tuple(kinds.get(label, label) for label in labels), mixers

    def _layer_labels(self) -> tuple[str, ...]:
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
        return kinds

    def sliding_window(self, layer_types: tuple[str, ...]) -> int | None:
        if "sliding_attention" not in layer_types:
            return None
        window = window_of(self.cfg)
        if window is not None and (not isinstance(window, int) or window < 0):
            raise InvalidConfigError(  # False is transformers' own "no window"
                f"config.json: {window_key(self.cfg)} must be a number of tokens, got "
                f"{window!r:.40}"
            )
        self._config("text.sliding_window", window_key(self.cfg), window)
        return int(window) if window else None

    def _refuse_headless_attention(self) -> None:
        """Layers that no config key marks recurrent read as attention; without attention heads
        (RWKV's time mixing) they are a token mixer onboard does not know, not attention."""
        if getattr(self.tiny, "num_attention_heads", None) is not None or self.model is None:
            return
        layer = hf_module(self.model.model.layers[0])
        parts = ", ".join(f"{n} ({type(m).__name__})" for n, m in layer.named_children())
        raise UnsupportedFeatureError(
            f"{type(self.cfg).__name__} has no num_attention_heads: its layers' token mixer is "
            f"not attention, and not one onboard reads",
            (f"a token mixer onboard does not read, in {type(layer).__name__}: {parts}",),
        )

    def _inner_parts(self) -> dict[str, Reading]:
        """Norms before the output projections and a gate projection (``inner_parts``)."""
        if self.model is None:
            return {}
        heads = getattr(self.tiny, "num_attention_heads", None)  # RWKV's config has none
        head_dim = self.ctx.tiny_head_dim if heads else None
        found = inner_parts(self.model, self.tiny, head_dim, self.dense_layer, self.files)
        for path, reading in found.items():
            self.log.add(path, *reading.evidence)
        return found

    def _variants(self) -> dict[str, Reading]:
        """The readings of ``analysis.variants`` that the tiny model shows, by spec path, each
        with its evidence logged."""
        if self.model is None:
            return {}
        tiny = self.tiny
        views = list(self.model.model.layers)
        layers = [hf_module(layer) for layer in views]
        attentions = [hf_module(getattr(layer, "self_attn", None)) for layer in views]
        if any(a is None for a in attentions):
            return {}
        kv_heads = self.ctx.tiny_kv_heads
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
        if found["text.attention.dynamic_mask"] is None:
            found["text.attention.sinks"] = sinks(attentions, tiny.num_attention_heads, self.files)
        found["text.attention.indexer"] = indexer(attentions, tiny, self.cfg, self.files)
        for path, reading in found.items():
            if reading is not None:
                self.log.add(path, *reading.evidence)
        return {path: reading for path, reading in found.items() if reading is not None}

    def _kind_parts(self, attention: AttentionReading) -> tuple[AttentionReading, tuple[str, ...]]:
        """The attention with what differs between layer kinds (``kind_parts``) and what its
        values do differently (``value_parts``); deltas for the differences not read, and the
        parameters the kinds account for."""
        if self.model is None:
            return attention, ()
        spec = attention.spec
        explained = (spec.last_layer_o_bias,) if spec.last_layer_o_bias else ()
        head_dim = self.ctx.tiny_head_dim
        found = kind_parts(self.model, self.tiny, head_dim, self.files, explained)
        self.deltas.extend(found.deltas)
        if found.kinds:
            self.log.add("text.attention.kinds", *found.evidence)
        first = hf_module(getattr(self.model.model.layers[0], "self_attn", None))
        kind = (getattr(self.tiny, "layer_types", None) or ("full_attention",))[0]
        kv_heads = self.ctx.tiny_kv_heads * spec.for_kind(kind).kv_heads_factor if first else 0
        values = value_parts(first, self.tiny, head_dim, kv_heads, self.files) if first else None
        if values is None:
            return attention, found.parameters
        if values.v_head_dim is not None:
            self.log.add("text.attention.v_head_dim", *values.width_evidence)
        if values.scale is not None:
            self.log.add("text.attention.value_scale", *values.scale_evidence)
        spec = dataclasses.replace(
            spec,
            kinds=found.kinds,
            v_head_dim=values.v_head_dim,
            v_head_dim_key=values.v_head_dim_key,
            value_scale=values.scale,
            value_scale_key=values.scale_key,
        )
        return dataclasses.replace(attention, spec=spec), found.parameters

    def _check_indexed_layers(
        self, layer_types: tuple[str, ...], variants: dict[str, Reading]
    ) -> None:
        """Layers of kind indexed_attention run a lightning indexer onboard read (and only
        those have one): otherwise the kind is one onboard does not compute."""
        indexed = "indexed_attention" in layer_types
        if indexed == ("text.attention.indexer" in variants):
            return
        index = layer_types.index("indexed_attention") if indexed else 0
        layer = self.model.model.layers[0] if self.model is not None else None
        attention = hf_module(getattr(layer, "self_attn", None)) if layer is not None else None
        cls = type(attention).__name__ if attention is not None else "attention"
        found = find_line(self.files, rf"^class {cls}\b")
        where = found.where if found else f"model.layers.{index}.self_attn"
        if indexed:
            self._delta(
                f"attention layer kind 'indexed_attention' ({cls})",
                where,
                "no lightning indexer onboard reads (wq_b, wk, k_norm, weights_proj)",
            )
        else:
            self._delta(
                f"a lightning indexer in {cls} in layers no config.layer_types marks "
                "indexed_attention",
                where,
            )

    def _check_parameters(
        self,
        mlp: MLPReading | None,
        attention: AttentionReading | None,
        variants: dict[str, Reading],
        mixer_parameters: tuple[str, ...] = (),
    ) -> None:
        """Every parameter must have a role; report each unknown one once, with its source line."""
        modules = dict(self.probe.modules)
        known = mlp.known_projections if mlp else ()
        names = "|".join(re.escape(p) for p in known) or "(?!)"
        mlp_param = re.compile(rf"^mlp\.({names})\.(weight|bias)$")
        activation = mlp and mlp.spec.learned_activation
        learned = re.escape(activation) if activation else "(?!)"
        activation_param = re.compile(rf"^mlp\.{learned}\.\w+$")
        own = "(?!)"
        if attention is not None:
            projections = (
                attention.spec.fused_qkv,
                attention.o_name,
                *(n for _, n in attention.qkv_names),
            )
            own = "|".join(re.escape(n) for n in (*projections, *attention.qk_norm_names) if n)
        listed = attention.spec.qk_norm_head_modules if attention is not None else None
        per_head = rf"\.{re.escape(listed)}\.\d+" if listed else ""  # StableLM's norms.{h}
        attention_param = re.compile(rf"^self_attn\.({own})({per_head})?\.(weight|bias)$")
        explained = {
            ("self_attn." if ".attention." in path else "") + name
            for path, reading in variants.items()
            for name in reading.parameters
        }
        explained |= set(mixer_parameters)
        explained |= _read_expert_parameters(self.model) | passed_bias_parameters(self.model)
        explained |= gated_norm_parameters(self.model) if self.model is not None else set()
        query_gate = attention and attention.spec.mla and attention.spec.mla.query_gate
        if query_gate:
            explained.add(f"self_attn.{query_gate.proj}.weight")
        if attention is not None and attention.spec.last_layer_o_bias:
            explained.add(f"self_attn.{attention.spec.last_layer_o_bias}")
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


def _read_expert_parameters(model: Any) -> set[str]:
    """Layer-relative names of the parameters of per-expert MLPs read by their roles: experts in a
    ModuleList read as stacked, and a shared expert beside them whose linears ``mlp_roles`` reads
    (2024 remote code's w1 / w3 / w2)."""
    from onboard.analysis.expert_lists import StackedExperts, mlp_roles
    from onboard.analysis.moe import SHARED_EXPERT_NAMES

    if model is None:
        return set()
    found = set()
    for name, module in model.named_modules():
        match = re.match(r"^model\.layers\.\d+\.(.+)$", name)
        if match is None or not isinstance(getattr(module, "experts", None), StackedExperts):
            continue
        block = match.group(1)
        found |= {f"{block}.experts.{n}" for n, _ in module.experts.named_parameters()}
        for shared in SHARED_EXPERT_NAMES:
            child = getattr(module, shared, None)
            if child is not None and not isinstance(mlp_roles(child), str):
                found |= {f"{block}.{shared}.{n}" for n, _ in child.named_parameters()}
    return found


def _value(variants: dict[str, Reading], path: str) -> Any:
    reading = variants.get(path)
    return reading.value if reading else None


def dense_rule(config: Any, kinds: Sequence[str]) -> str | None:
    """The config rule that reproduces which layers are dense, or None when none does."""
    count = len(kinds)
    rules = {"none": ["moe"] * count}
    for key in LEADING_DENSE_KEYS:
        first_k = getattr(config, key, None)
        if isinstance(first_k, int) and not isinstance(first_k, bool):
            rules[key] = ["dense" if i < first_k else "moe" for i in range(count)]
    listed = getattr(config, "mlp_layer_types", None)  # transformers' "dense" / "sparse"
    if isinstance(listed, list | tuple) and len(listed) == count:
        rules["mlp_layer_types"] = ["moe" if kind == "sparse" else "dense" for kind in listed]
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
    period = getattr(config, "expert_layer_period", None)
    offset = getattr(config, "expert_layer_offset", None)
    if isinstance(period, int) and period > 0 and isinstance(offset, int):  # Jamba
        rules["expert_layer_period"] = [
            "moe" if i % period == offset else "dense" for i in range(count)
        ]
    # A rule the config declares wins over "none", so other checkpoints of the type still work.
    order = (
        "mlp_layer_types",
        "first_k_dense_replace",
        "num_dense_layers",
        "mlp_only_layers",
        "moe_layer_interval",
        "expert_layer_period",
        "none",
    )
    return next((name for name in order if rules.get(name) == list(kinds)), None)


def _summarise(kinds: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} x {k}" for k, n in counts.items())
