"""HF's base model kept whole: the generated causal LM of a dense type whose tree is not Llama's.

GPT-2-style trees (``transformer.h.*``, ``gpt_neox.layers.*``, ``model.decoder.layers.*``) put
learned or sinusoidal positions, ALiBi, fused Conv1D projections and parallel blocks in HF's
base model class, which the Llama-shaped generated model cannot hold. This shape keeps that
class whole under HF's own attribute, so parameter names equal the checkpoint's and each of
those details is HF's; the generated causal LM owns what AutoModel owns (backend, tie policy,
capabilities, head, logits, loss, state-dict adapter). MoE, VLM and hybrid types keep the
module-tree refusal: their generated code owns layers this shape would not write.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

from onboard.analysis.probe import Probe
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.naming import class_prefix, module_name
from onboard.spec import ArchitectureSpec
from onboard.targets.automodel.design import (
    HFLayout,
    ModelDesign,
    _head_input_scaled,
    _hf_ties,
    _multiplier,
    _reasons,
    _switches,
    checkpoint_prefixes,
    hf_modeling_module,
    hf_sdpa,
    layout_blocker,
    pretrained_base,
    with_dropouts,
)
from onboard.targets.automodel.hf_facts import HFNames, Reason
from onboard.targets.base import Proposal

# The causal LM's inputs that its base model takes under the same names, passed on when it does
BASE_INPUTS = ("attention_mask", "position_ids", "past_key_values", "inputs_embeds", "use_cache")


@dataclass(frozen=True)
class KeptBase:
    """HF's base model as the generated causal LM holds it, and HF's head beside it."""

    attribute: str  # the causal LM's attribute holding it, HF's base_model_prefix (transformer)
    hf_class: str  # GPT2Model
    head: str  # HF's head attribute (lm_head, embed_out, output_projection)
    embeddings: str  # the input embeddings' path inside the base model (wte, decoder.embed_tokens)
    takes: tuple[str, ...]  # BASE_INPUTS its forward has
    takes_kwargs: bool  # its forward takes **kwargs (attention flags, cache_position, ...)
    head_bias: bool
    where: str  # modeling_x.py:N of the base class


def keeps_base(spec: ArchitectureSpec) -> bool:
    """Whether ``spec`` gets this shape: a dense text decoder under a tree not Llama's."""
    return spec.vision is None and spec.kind == "dense" and layout_blocker(spec) is not None


def kept_base(hf: HFNames, tiny_config: dict[str, Any]) -> KeptBase:
    """HF's base model, head and embeddings, read on HF's tiny causal LM."""
    import torch

    module = importlib.import_module(hf.module)
    causal_lm = getattr(module, hf.causal_lm)
    config = make_hf_config(tiny_config)
    torch.manual_seed(0)
    model = causal_lm(config)
    attribute = causal_lm.base_model_prefix
    base = getattr(model, attribute, None)
    head = model.get_output_embeddings()
    children = dict(model.named_children())
    head_name = next((n for n, m in children.items() if m is head), None)
    if base is None or head_name is None or set(children) != {attribute, head_name}:
        raise UnsupportedFeatureError(
            f"{hf.causal_lm} holds more than its base model ({attribute}) and a linear head: "
            "the generated causal LM keeps those two only",
            tuple(f"{hf.causal_lm}.{n}: {type(m).__name__}" for n, m in children.items()),
        )
    if not isinstance(head, torch.nn.Linear) or (head.in_features, head.out_features) != (
        config.hidden_size,
        config.vocab_size,
    ):
        raise UnsupportedFeatureError(
            f"{hf.causal_lm}.{head_name} is not a linear layer from config.hidden_size to "
            "config.vocab_size, which the generated head is"
        )
    embeddings = base.get_input_embeddings()
    path = next(n for n, m in base.named_modules() if m is embeddings)
    signature = inspect.signature(type(base).forward).parameters
    _, line = inspect.getsourcelines(type(base))
    return KeptBase(
        attribute=attribute,
        hf_class=type(base).__name__,
        head=head_name,
        embeddings=path,
        takes=tuple(p for p in BASE_INPUTS if p in signature),
        takes_kwargs=any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.values()),
        head_bias=head.bias is not None,
        where=f"{hf.source_file}:{line}",
    )


def kept_base_names(spec: ArchitectureSpec, causal_lm: str) -> HFNames:
    """The HF classes this shape imports: the causal LM (the tests' reference), its pretrained
    base class and config; the layers stay inside HF's base model, unnamed."""
    from transformers import CONFIG_MAPPING

    source_file, module_path, module = hf_modeling_module(spec)
    base = pretrained_base(getattr(module, causal_lm, None), module_path)
    pretrained = base.__name__ if base else ""
    if not pretrained:
        raise UnsupportedFeatureError(
            f"no {causal_lm} with a PreTrainedModel base in {module_path}: nothing to subclass"
        )
    return HFNames(
        module=module_path,
        source_file=source_file,
        causal_lm=causal_lm,
        pretrained=pretrained,
        decoder_layer="",
        attention="",
        mlp="",
        norm="",
        rotary="",
        embedding="",
        config=CONFIG_MAPPING[spec.model_type].__name__,
    )


def kept_base_reason(spec: ArchitectureSpec, base: KeptBase) -> Reason:
    """Why the base model is HF's: the renames of its tree the Llama-shaped model cannot keep."""
    renames = ", ".join(f"{source}*" for source, _ in spec.weights.renames)
    return Reason(
        f"HF's module tree is not Llama's ({renames}): {base.hf_class} is kept whole as "
        f"self.{base.attribute}",
        base.where,
    )


def kept_base_design(
    spec: ArchitectureSpec, proposal: Proposal, tiny_config: dict[str, Any], probe: Probe
) -> ModelDesign:
    """The design of the causal LM around HF's base model: names, head, tie policy, logits."""
    hf = kept_base_names(spec, probe.model_class)
    base = kept_base(hf, tiny_config)
    reasons = _reasons(spec, hf)
    reasons["kept_base"] = kept_base_reason(spec, base)
    text = spec.text
    design = ModelDesign(
        arch=spec.source.architecture,
        model_type=spec.model_type,
        module=module_name(spec.model_type),
        prefix=class_prefix(spec.source.architecture, spec.model_type),
        hf=hf,
        qk_norm="none",
        layer_rule="full",
        layer_kinds=(),
        per_kind_rope=False,
        embedding_scale=False,
        attention_softcap=False,
        final_softcap=bool(text.final_logit_softcap) or "final_softcap" in reasons,
        norm_eps="",
        closest=proposal.chosen,
        hidden=proposal.hidden,
        reasons=reasons,
        changes=(),
        switches=_switches(hf),
        layout=HFLayout(
            embeddings=base.embeddings,
            base=base.attribute,
            head=base.head,
            prefixes=checkpoint_prefixes(spec.model_type, hf.causal_lm),
        ),
        ties=_hf_ties(hf),
        attention_dropout=None,
        logits_multiplier=_multiplier(text, "logits"),
        head_input_scaled=_head_input_scaled(spec, hf),
        lm_head_bias=base.head_bias,
        kept_base=base,
        hf_sdpa=hf_sdpa(hf),
    )
    return with_dropouts(design, probe, tiny_config)
