"""Rank AutoModel's classes by how much generated code each would need, and say what the
generator cannot express.

Generated AutoModel code does not inherit from another AutoModel model: it subclasses the HF
modules of the architecture itself (as 0.7.0's ``qwen3`` does). The closest registered class is
still worth naming: its conventions are the ones the generated module follows, and the features
it lacks are what a reviewer should read first.
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.analysis.features import Value, feature_values
from onboard.spec import ArchitectureSpec
from onboard.targets.automodel.design import distinct_ropes, layout_blocker
from onboard.targets.automodel.hf_facts import cite
from onboard.targets.automodel.kept_attention import attention_features
from onboard.targets.automodel.kept_base import keeps_base
from onboard.targets.automodel.moe_design import router_location
from onboard.targets.automodel.recurrence import recurrence_blockers
from onboard.targets.automodel.unwritten import unwritten
from onboard.targets.automodel.vision import text_view, vision_blockers
from onboard.targets.base import Candidate, Delta, Library, Proposal, Variant

# Model kinds the generator writes. A hybrid keeps HF's own recurrent mixer modules (their torch
# paths run where fla, causal_conv1d or mamba_ssm are missing); a pure state-space model has no
# attention or MLP for the generated code to own, so AutoModel's HF fallback already covers it.
# A VLM keeps HF's tower and projector around a generated text backbone (see vision.py).
GENERATED_KINDS = frozenset({"dense", "moe", "hybrid", "hybrid_moe", "vlm"})


@dataclass(frozen=True)
class ClassProfile:
    """What one AutoModel 0.7.0 class computes, in the shared feature catalogue's terms."""

    arch: str
    can: dict[str, frozenset[Value]]


def _can(overrides: dict[str, set[Value]]) -> dict[str, frozenset[Value]]:
    """A profile's capabilities: the catalogue features a candidate is compared on."""
    base: dict[str, set[Value]] = {
        "attention.kind": {"standard"},
        "attention.qk_norm": {"none"},
        "attention.qk_norm_after_rope": {False},
        "attention.qkv_bias": {False},
        "attention.o_bias": {False},
        "attention.scale": {"head_dim"},
        "attention.softcap": {False},
        "attention.sliding_window": {"none"},
        "mlp.kind": {"gated"},
        "mlp.bias": {False},
        "norm.kind": {"rms"},
        "norm.placement": {"pre"},
        "embedding.scale": {"none"},
        "logits.final_softcap": {False},
        "rope.per_layer_theta": {False},
        "moe.router": {"none"},
        "moe.shared_experts": {"none"},
        "layers.mixers": {"none"},
        "rope.partial": {False},
        "attention.output_gate_proj": {"none"},
        "attention.sub_norm": {False},
        "mlp.sub_norm": {False},
    }
    return {k: frozenset(v) for k, v in {**base, **overrides}.items()}


_ANY_BIAS = {False, True}  # read from config.attention_bias / config.mlp_bias
_ANY_WINDOW = {"none", "uniform", "per_layer"}

# components/models/{qwen3,qwen2,llama,mistral3,qwen3_moe}/model.py in nemo-automodel 0.7.0.
PROFILES = {
    p.arch: p
    for p in (
        ClassProfile(
            "Qwen3ForCausalLM",
            _can(
                {
                    "attention.qk_norm": {"per_head"},
                    "attention.qkv_bias": _ANY_BIAS,
                    "attention.o_bias": _ANY_BIAS,
                    "attention.sliding_window": _ANY_WINDOW,
                }
            ),
        ),
        ClassProfile(
            "Qwen2ForCausalLM",
            _can(
                {
                    "attention.qkv_bias": {True},
                    "attention.sliding_window": _ANY_WINDOW,
                    "mlp.bias": _ANY_BIAS,
                }
            ),
        ),
        ClassProfile(
            "LlamaForCausalLM",
            _can(
                {
                    "attention.qkv_bias": _ANY_BIAS,
                    "attention.o_bias": _ANY_BIAS,
                    "mlp.bias": _ANY_BIAS,
                }
            ),
        ),
        ClassProfile(
            "Ministral3ForCausalLM", _can({"attention.sliding_window": {"none", "uniform"}})
        ),
        ClassProfile(
            "Qwen3MoeForCausalLM",
            _can(
                {
                    "attention.qk_norm": {"per_head"},
                    "attention.qkv_bias": _ANY_BIAS,
                    "attention.o_bias": _ANY_BIAS,
                    "moe.router": {"softmax_then_topk"},
                }
            ),
        ),
    )
}


def propose(spec: ArchitectureSpec, library: Library, *, treat_as_new: bool) -> Proposal:
    arch = spec.source.architecture
    own = library.variant(arch)
    hidden: tuple[str, ...] = ()
    if treat_as_new and own is not None:
        hidden = tuple(v.key for v in library.variants if v.class_name == own.class_name)
    visible = [v for v in library.variants if v.key not in hidden and v.key in PROFILES]
    wanted = feature_values(spec)
    candidates = sorted(
        (_candidate(v, wanted) for v in visible),
        key=lambda c: (len(c.deltas), c.variant.key),
    )
    return Proposal(
        model_type=spec.model_type,
        candidates=tuple(candidates),
        hidden=hidden,
        already_supported=None if treat_as_new else own,
        blockers=blockers(spec),
    )


def _candidate(variant: Variant, wanted: dict[str, Value]) -> Candidate:
    can = PROFILES[variant.key].can
    deltas = tuple(
        Delta(feature, str(wanted[feature]), "/".join(sorted(map(str, can[feature]))))
        for feature in can
        if wanted[feature] not in can[feature]
    )
    return Candidate(variant, deltas)


def blockers(spec: ArchitectureSpec) -> tuple[str, ...]:
    """What the AutoModel generator cannot express for ``spec``, each with where it was seen.

    A VLM's text backbone is held to the rules of a causal LM of its own type."""
    if spec.vision is not None:
        text_spec = text_view(spec, spec.source.architecture)
        return (*vision_blockers(spec), *blockers(text_spec))
    if keeps_base(spec):  # HF's base model kept whole: only the causal LM around it is written
        return kept_base_blockers(spec)
    text = spec.text
    found = _shared_blockers(spec, "subclasses the architecture's modules")
    if spec.kind not in GENERATED_KINDS:
        found.append(
            f"{spec.kind} model ({spec.source.architecture}): the AutoModel generator writes "
            "dense, MoE and hybrid decoders and LLaVA-shaped VLMs only"
        )
    if text.attention is None or text.mlp is None:  # a pure state-space model: nothing to add
        return tuple(found)
    found += recurrence_blockers(text)
    if (tree := layout_blocker(spec)) is not None:
        found.append(tree)
    found += _split_blockers(spec)
    if text.blocks is not None and text.moe is not None:
        found.append(
            f"one-block layers ({text.blocks.block} after {text.blocks.norm}) holding experts: "
            "the generated one-block layers keep HF's MLPs, AutoModel's MoE is generated for "
            "Llama-style layers only"
        )
    if getattr(text, "moe", None) is not None:
        found += moe_blockers(spec)
    elif spec.kind == "moe":
        found.append(f"MoE model ({spec.source.architecture}) without an MoE block in its spec")
    attention = text.attention
    fused_ok = attention.fused_qkv_layout == "concatenated" and attention.qk_norm == "none"
    fused_ok |= attention.fused_qkv_layout == "per_head" and attention.qk_norm != "full_width"
    fused_ok |= attention.fused_qkv_layout == "kv_grouped" and attention.qk_norm == "none"
    if attention.fused_qkv and (not fused_ok or attention.output_gate):
        found.append(
            f"one fused {attention.fused_qkv} for q, k and v ({attention.fused_qkv_layout}, "
            f"q/k norm {attention.qk_norm}) (model.layers.*.self_attn.{attention.fused_qkv}): "
            "the generated attention splits concatenated rows without q/k norms, or head-by-head "
            "rows with per-head norms"
        )
    if getattr(text.attention, "multi_query", False):
        found.append(
            "multi-query attention set by config.multi_query (config.json): the generated "
            "attention reads num_key_value_heads"
        )
    # attention-part features are no blockers: they keep HF's attention whole (kept_attention.py)
    for u in unwritten(text):
        if u.part != "attention":
            found.append(f"{u.what(text)} ({cite(spec, u.path) or u.fallback}){u.why}")
    if getattr(text, "embedding_norm", False):
        found.append("a norm of the embeddings (model.embed_norm): the generated model has none")
    if getattr(text, "positions", None) is not None:
        found.append(
            f"{text.positions.kind} absolute positions "
            f"({cite(spec, 'text.positions') or 'text.positions'}): the generated model has no "
            "position table"
        )
    if getattr(text, "transposed_linears", ()):
        found.append(
            f"linears stored (in, out) ({', '.join(text.transposed_linears)}): the state-dict "
            "adapter does not transpose weights yet"
        )
    if not text.norm.weight:
        found.append(
            f"norms without a learnable weight ({cite(spec, 'text.norm.weight') or 'text.norm'}): "
            "the generated norms are AutoModel's RMSNorm / LayerNorm, which learn one"
        )
    ropes = distinct_ropes(text)
    positional = sorted(kind for kind, rope in text.rope if rope.rope_type is not None)
    for kind, rope in text.rope:
        where = f"for {kind} layers (config.json:rope_parameters)"
        if rope.rope_type is None and len(ropes) > 1:  # beside one RoPE: generated (Cohere2)
            found.append(
                f"layers without RoPE {where} beside layers of {len(ropes)} RoPEs "
                f"({', '.join(positional)}): the generated model skips RoPE beside one table"
            )
    kept = attention_features(spec)
    if len(ropes) > 1 and (kept or text.attention.mla is not None):
        why = "; ".join(map(str, kept)) or "multi-head latent attention"
        found.append(
            f"HF's attention kept whole ({why}) beside {len(ropes)} RoPEs "
            f"({', '.join(positional)}): the generated model hands an attention kept whole the "
            "table of HF's one rotary embedding"
        )
    return tuple(found)


def kept_base_blockers(spec: ArchitectureSpec) -> tuple[str, ...]:
    """What the generated causal LM around HF's base model (kept_base.py) cannot express: only
    what it owns (the head, the checkpoint's tensors) and what the analysis left unresolved."""
    found = _shared_blockers(spec, "keeps HF's base model")
    if spec.text.head_transform is not None:
        found.append(
            "a dense layer, activation and norm before the head "
            f"({cite(spec, 'text.head_transform') or 'probe'}): the generated causal LM's head "
            "is one linear layer"
        )
    return (*found, *_split_blockers(spec))


def _shared_blockers(spec: ArchitectureSpec, builds: str) -> list[str]:
    """What blocks either shape: the analysis left something unresolved, or the architecture is
    remote code, which the generated code (it ``builds`` on transformers' modules) cannot import."""
    found = [
        f"{d.what} at {d.where}" + (f" ({d.detail})" if d.detail else "") for d in spec.unresolved
    ]
    if spec.source.remote_files:
        modeling = next((n for n, _ in spec.source.remote_files if n.startswith("modeling_")), "")
        found.append(
            f"{spec.model_type} exists only as Hub remote code ({modeling or 'auto_map'}): "
            f"generated AutoModel code {builds} from transformers.models.{spec.model_type}, "
            f"which transformers {spec.source.transformers_version} does not have"
        )
    return found


def _split_blockers(spec: ArchitectureSpec) -> list[str]:
    return [
        f"checkpoint tensor {split.fused} cut into {', '.join(split.parts)} on load "
        f"({split.where}): the generated state-dict adapter does not cut tensors yet"
        for split in spec.weights.splits
    ]


def moe_blockers(spec: ArchitectureSpec) -> list[str]:
    """What of the spec's MoE block AutoModel's ``Gate`` / ``GroupedExperts`` would not compute
    as HF does, each with the HF router's source line (or the probe that measured it).

    The generator maps routers that score with a softmax (top k of the softmax, optionally
    renormalised and shifted by a choice bias, or a softmax over the top-k logits) and sigmoid
    routers (choice bias, groups, scale) onto ``MoEConfig``; the other variants are refused
    until a model with them is proven end to end.
    """
    moe = spec.text.moe
    assert moe is not None
    router = moe.router
    at = router_location(spec)
    found = []
    # A sigmoid router maps onto AutoModel's Gate with its correction bias, groups and scale.
    if router.scoring == "sigmoid" and router.order != "softmax_topk":
        found.append(f"sigmoid router scores over the top-k logits at {at}: not generated")
    if router.scoring == "softmax" and router.n_group > 1:
        found.append(
            f"group-limited routing (n_group={router.n_group}, topk_group={router.topk_group}) "
            f"at {at}: generated for sigmoid routers only"
        )
    if router.scoring == "softmax" and router.routed_scaling_factor != 1.0:
        found.append(
            f"routed weights scaled by {router.routed_scaling_factor:g} at {at}: generated for "
            "sigmoid routers only"
        )
    if router.bias:
        found.append(f"router linear with a bias at {at}: not generated")
    if router.shared_logits:
        found.append(
            f"shared experts weighted by the router ({router.shared_logits} extra router rows, "
            f"renormalised with the chosen experts) at {at}: AutoModel's Gate scores routed "
            "experts only"
        )
    if router.learned_scale:
        found.append(
            f"learned scale of the routing weights ({router.learned_scale}) at {at}: "
            "AutoModel's Gate has none"
        )
    if router.order == "sparsemixer":
        found.append(
            f"sparsemixer routing (two experts, each within a margin) at {at}: not generated"
        )
    if moe.shared is not None and moe.shared.plain:
        found.append(
            f"shared expert without a gate projection (model.layers.*.{moe.block_name}."
            f"{moe.shared.name}): AutoModel's shared MLP is generated for swiglu experts only"
        )
    glu = moe.block_glu
    if glu is not None:
        evidence = spec.evidence_for(moe.block_glu_path)
        at = (
            f"{evidence[0].detail.partition(':')[0]} at {evidence[0].where}"
            if evidence
            else moe.block_glu_path
        )
        found.append(
            f"experts computing a clamped GLU (gate and up clamped at a limit, "
            f"(up + {glu.up_offset:g}) * gate * sigmoid(alpha * gate)) ({at}): AutoModel's "
            "experts compute act(gate) * up"
        )
    if moe.activation != "silu":
        found.append(
            f"expert activation {moe.activation!r} (config.json:hidden_act): AutoModel's swiglu "
            "experts compute silu(gate) * up"
        )
    return found
