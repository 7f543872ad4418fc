"""Decide the generated AutoModel package: names, the HF modules it builds on, what it adds.

The generated model keeps HF's module tree (so checkpoint names and layouts are HF's own) by
subclassing the architecture's HF attention and decoder layer and reusing its MLP and norms, the
pattern that gave bit-exact parity in AutoModel 0.7.0's ``qwen3``. It writes what AutoModel owns:
the model and causal-LM classes (backend, tie policy, capabilities, logits), the attention
forward (NeMo's RoPE and HF's attention dispatch), the RoPE tables, the scaled embedding, the
state-dict adapter. Every choice the spec drives carries the evidence behind it, which the
templates write next to the code.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, replace
from typing import Any

from onboard.analysis.features import features
from onboard.analysis.probe import Probe
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.naming import class_prefix, module_name
from onboard.spec import ArchitectureSpec, Evidence
from onboard.targets.base import Candidate, Proposal

MODELS_PACKAGE = "nemo_automodel.components.models"
LAYER_ZERO = "model.layers.0"


@dataclass(frozen=True)
class HFNames:
    """Where the architecture's HF implementation lives, and the classes the design reuses."""

    module: str  # transformers.models.qwen3.modeling_qwen3
    source_file: str  # modeling_qwen3.py
    causal_lm: str
    pretrained: str
    decoder_layer: str
    attention: str
    mlp: str
    norm: str  # the final norm's class
    rotary: str
    embedding: str
    config: str  # exported by the top-level transformers package


@dataclass(frozen=True)
class Reason:
    """One sentence a generated comment says, and where the fact behind it was seen."""

    text: str
    where: str = ""

    def __str__(self) -> str:
        return f"{self.text} ({self.where})" if self.where else self.text


@dataclass(frozen=True)
class ModelDesign:
    arch: str
    model_type: str
    module: str  # package name under nemo_automodel.components.models
    prefix: str
    hf: HFNames
    qk_norm: str  # none, per_head, full_width
    layer_rule: str  # config (config.layer_types), sliding_window (all slide when set), full
    layer_kinds: tuple[str, ...]
    per_kind_rope: bool
    embedding_scale: bool
    attention_softcap: bool
    final_softcap: bool
    norm_eps: str  # the expression the final norm's eps is built from
    closest: Candidate | None
    hidden: tuple[str, ...]
    reasons: dict[str, Reason]
    changes: tuple[Reason, ...]  # what the generated code adds to the closest class
    switches: tuple[Reason, ...] = ()  # config flags HF honours that the generated code refuses

    @property
    def package(self) -> str:
        return f"{MODELS_PACKAGE}.{self.module}"

    @property
    def model_class(self) -> str:
        return f"{self.prefix}ForCausalLM"

    @property
    def adapter_class(self) -> str:
        return f"{self.prefix}StateDictAdapter"

    @property
    def has_layers_module(self) -> bool:
        return self.embedding_scale

    @property
    def sliding(self) -> bool:
        return "sliding_attention" in self.layer_kinds

    def why(self, key: str) -> str:
        return str(self.reasons[key]) if key in self.reasons else ""


def design_model(
    spec: ArchitectureSpec, proposal: Proposal, tiny_config: dict[str, Any], probe: Probe
) -> ModelDesign:
    """The design for ``spec``; raises UnsupportedFeatureError for what cannot be expressed."""
    if proposal.blockers:
        raise UnsupportedFeatureError(
            f"the AutoModel generator cannot express {len(proposal.blockers)} feature(s) of "
            f"{spec.model_type}; nothing was written",
            proposal.blockers,
        )
    hf = hf_names(spec, probe.model_class, dict(probe.modules))
    text = spec.text
    reasons = _reasons(spec, hf)
    kinds = text.distinct_layer_types
    return ModelDesign(
        arch=spec.source.architecture,
        model_type=spec.model_type,
        module=module_name(spec.model_type),
        prefix=class_prefix(spec.source.architecture, spec.model_type),
        hf=hf,
        qk_norm=text.attention.qk_norm,
        layer_rule=_layer_rule(tiny_config, kinds),
        layer_kinds=kinds,
        per_kind_rope=len({(r.rope_type, r.theta, r.scaling) for _, r in text.rope}) > 1,
        embedding_scale=text.embedding_scale == "sqrt_hidden",
        attention_softcap=bool(text.attention.softcap),
        final_softcap=bool(text.final_logit_softcap) or "final_softcap" in reasons,
        norm_eps=f"config.{text.norm.eps_key}" if text.norm.eps_key else repr(text.norm.eps),
        closest=proposal.chosen,
        hidden=proposal.hidden,
        reasons=reasons,
        changes=_changes(spec, proposal.chosen),
        switches=_switches(hf),
    )


def with_name(design: ModelDesign, name: str | None) -> ModelDesign:
    """``--name``: the package and class names come from ``name`` instead of the model."""
    if name is None:
        return design
    return replace(design, module=module_name(name), prefix=class_prefix("", name))


def hf_names(spec: ArchitectureSpec, causal_lm: str, modules: dict[str, str]) -> HFNames:
    """The HF classes the probe found, checked importable from the modeling file they came from."""
    source_file = next((n for n, _ in spec.source.hf_files if n.startswith("modeling_")), None)
    if source_file is None:
        raise UnsupportedFeatureError(
            f"no HF modeling file for {spec.model_type}: nothing to build the AutoModel code on"
        )
    package = source_file.removeprefix("modeling_").removesuffix(".py")
    module_path = f"transformers.models.{package}.{source_file.removesuffix('.py')}"
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise UnsupportedFeatureError(f"cannot import {module_path}: {exc}") from None
    layer_classes = {c for n, c in modules.items() if n.count(".") == 2 and ".layers." in n}
    if len(layer_classes) > 1:
        raise UnsupportedFeatureError(
            "decoder layers of different classes",
            tuple(f"{c} at {source_file}" for c in sorted(layer_classes)),
        )
    base_model = getattr(module, modules.get("model", ""), None)
    pretrained = next(
        (
            c.__name__
            for c in getattr(base_model, "__mro__", ())
            if c.__name__.endswith("PreTrainedModel") and c.__module__ == module_path
        ),
        None,
    )
    from transformers import CONFIG_MAPPING

    names = HFNames(
        module=module_path,
        source_file=source_file,
        causal_lm=causal_lm,
        pretrained=pretrained or "",
        decoder_layer=modules.get(LAYER_ZERO, ""),
        attention=modules.get(f"{LAYER_ZERO}.self_attn", ""),
        mlp=modules.get(f"{LAYER_ZERO}.mlp", ""),
        norm=modules.get("model.norm", ""),
        rotary=modules.get("model.rotary_emb", ""),
        embedding=modules.get("model.embed_tokens", ""),
        config=CONFIG_MAPPING[spec.model_type].__name__,
    )
    wanted = {
        "causal LM": names.causal_lm,
        "pretrained base": names.pretrained,
        "decoder layer": names.decoder_layer,
        "attention": names.attention,
        "MLP": names.mlp,
        "final norm": names.norm,
        "rotary embedding": names.rotary,
    }
    missing = tuple(
        f"{role} class {cls or '(not found by the probe)'} in {module_path}"
        for role, cls in wanted.items()
        if not cls or not hasattr(module, cls)
    )
    if missing:
        raise UnsupportedFeatureError("the HF modules to build on are not all importable", missing)
    return names


def _layer_rule(tiny_config: dict[str, Any], kinds: tuple[str, ...]) -> str:
    """How the generated code derives each layer's attention kind, as the HF config does."""
    config = make_hf_config(tiny_config)
    if getattr(config, "layer_types", None):
        return "config"
    if kinds == ("sliding_attention",):
        return "sliding_window"
    return "full"


def cite(spec: ArchitectureSpec, path: str) -> str:
    """The best place a reviewer can check ``path``: an HF source line, else config or probe."""
    return _best(spec.evidence_for(path))


def _best(evidence: tuple[Evidence, ...]) -> str:
    source = next((e for e in evidence if e.kind == "source"), None)
    chosen = source or next(iter(evidence), None)
    if chosen is None:
        return ""
    return chosen.where if chosen.kind in ("source", "config") else f"probe: {chosen.cite()}"


def _reasons(spec: ArchitectureSpec, hf: HFNames) -> dict[str, Reason]:
    text = spec.text
    qk = {
        "none": "no q/k norm",
        "per_head": "q_norm / k_norm over each head, before RoPE",
        "full_width": "q_norm / k_norm over the full projection width, before RoPE",
    }[text.attention.qk_norm]
    scale_key = text.attention.scale_key
    scale = f"config.{scale_key} ** -0.5" if scale_key else "head_dim ** -0.5"
    reasons = {
        "qk_norm": Reason(qk, cite(spec, "text.attention.qk_norm")),
        "layer_types": Reason("attention kind of every layer", cite(spec, "text.layer_types")),
        "scale": Reason(
            f"q.k scaled by {scale} (self.scaling, set by the HF __init__)",
            cite(spec, "text.attention.scale") or cite(spec, "text.attention.head_dim"),
        ),
        "norm": Reason(
            f"{hf.norm}: {text.norm.kind} norm"
            + (" scaling by (1 + w)" if text.norm.weight_offset else ""),
            cite(spec, "text.norm.weight_offset"),
        ),
        "placement": Reason(
            f"{text.norm.placement}-norm layers, as {hf.decoder_layer} places them",
            cite(spec, "text.norm.placement"),
        ),
        "tie": Reason(
            f"tie_word_embeddings={text.tie_word_embeddings} in the checkpoint"
            + ("; lm_head.weight is not saved" if text.tie_word_embeddings else ""),
            cite(spec, "text.tie_word_embeddings"),
        ),
        "mlp": Reason(f"{text.mlp.kind} MLP, {text.mlp.activation}", cite(spec, "text.mlp.kind")),
    }
    if text.sliding_window:
        reasons["sliding_window"] = Reason(
            "sliding layers attend to config.sliding_window tokens",
            cite(spec, "text.sliding_window"),
        )
    if text.embedding_scale == "sqrt_hidden":
        reasons["embedding_scale"] = Reason(
            "token embeddings x sqrt(hidden_size), in the weight dtype as HF rounds it",
            cite(spec, "text.embedding_scale"),
        )
    for kind, rope in text.rope:
        scaling = f", {dict(rope.scaling)}" if rope.scaling else ""
        reasons[f"rope.{kind}"] = Reason(
            f"RoPE of {kind} layers: {rope.rope_type}, theta {rope.theta:g}{scaling}",
            cite(spec, f"text.rope.{kind}"),
        )
    if text.attention.softcap:
        reasons["attention_softcap"] = Reason(
            "attention logits soft-capped", cite(spec, "text.attention.softcap")
        )
    if text.final_logit_softcap:
        reasons["final_softcap"] = Reason(
            "final logits soft-capped: tanh(logits / cap) * cap",
            cite(spec, "text.final_logit_softcap"),
        )
    elif (
        line := _source_line(hf.module, "config.final_logit_softcapping is not None")
    ) is not None:
        # None in this checkpoint, but HF applies it whenever a config sets it: so must we.
        reasons["final_softcap"] = Reason(
            "HF soft-caps the final logits whenever config.final_logit_softcapping is set",
            f"{hf.source_file}:{line}",
        )
    return reasons


# Config flags that change what HF computes, off in the configs onboard analyses, and that the
# generated code does not implement: it refuses a config that sets one instead of ignoring it.
SWITCHES = ("use_bidirectional_attention",)


def _switches(hf: HFNames) -> tuple[Reason, ...]:
    found = ((key, _source_line(hf.module, f"config.{key}")) for key in SWITCHES)
    return tuple(Reason(key, f"{hf.source_file}:{line}") for key, line in found if line)


def _source_line(module_path: str, needle: str) -> int | None:
    """The 1-based line of ``needle`` in the HF module's source, if it has it."""
    try:
        source = inspect.getsource(importlib.import_module(module_path))
    except (ImportError, OSError, TypeError):
        return None
    for number, line in enumerate(source.splitlines(), start=1):
        if needle in line:
            return number
    return None


def _changes(spec: ArchitectureSpec, closest: Candidate | None) -> tuple[Reason, ...]:
    """One line per feature the closest AutoModel class lacks, for the module docstring."""
    if closest is None:
        return ()
    evidence = {f.name: f.evidence for f in features(spec)}
    return tuple(
        Reason(
            f"{d.feature} {d.wanted} (it has {d.candidate_has})",
            _best(evidence.get(d.feature, ())),
        )
        for d in closest.deltas
    )
