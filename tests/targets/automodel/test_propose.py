"""Which AutoModel class is closest, what is hidden, and what the generator refuses."""

from __future__ import annotations

import dataclasses

import pytest

from onboard.block_specs import DifferentialSpec, DynamicMaskSpec
from onboard.errors import UnsupportedFeatureError
from onboard.spec import Delta, PositionsSpec, SharedExpertSpec
from onboard.targets.automodel import TARGET
from onboard.targets.automodel.kept_attention import attention_features
from onboard.targets.automodel.moe_design import _fused
from onboard.targets.automodel.propose import propose
from onboard.targets.automodel.registry import open_library
from tests.analyses import analysis_of


@pytest.fixture(scope="module")
def library():
    return open_library(None)


def _with_arch(spec, arch: str):
    return dataclasses.replace(spec, source=dataclasses.replace(spec.source, architecture=arch))


def test_registered_architecture_is_already_supported(library) -> None:
    proposal = propose(analysis_of("Qwen/Qwen3-0.6B").spec, library, treat_as_new=False)
    assert proposal.already_supported.key == "Qwen3ForCausalLM"
    assert proposal.chosen.variant.key == "Qwen3ForCausalLM"
    assert proposal.chosen.deltas == ()


def test_treat_as_new_hides_the_architecture(library) -> None:
    proposal = propose(analysis_of("Qwen/Qwen3-0.6B").spec, library, treat_as_new=True)
    assert proposal.already_supported is None
    assert proposal.hidden == ("Qwen3ForCausalLM",)
    assert "Qwen3ForCausalLM" not in {c.variant.key for c in proposal.candidates}
    assert [(d.feature, d.wanted) for d in proposal.chosen.deltas] == [
        ("attention.qk_norm", "per_head")
    ]


def test_treat_as_new_hides_every_key_of_the_same_class(library) -> None:
    spec = _with_arch(analysis_of("Qwen/Qwen3-0.6B").spec, "BagelForConditionalGeneration")
    proposal = propose(spec, library, treat_as_new=True)
    assert proposal.hidden == ("BagelForUnifiedMultimodal", "BagelForConditionalGeneration")


def test_new_architecture_ranks_the_closest_classes(library) -> None:
    proposal = propose(analysis_of("mistralai/Mistral-7B-v0.1").spec, library, treat_as_new=False)
    assert proposal.already_supported is None
    assert proposal.chosen.variant.key == "Ministral3ForCausalLM"  # uniform sliding window
    assert proposal.blockers == ()
    gemma = propose(analysis_of("google/gemma-3-1b-it").spec, library, treat_as_new=False)
    features = {d.feature for d in gemma.chosen.deltas}
    assert {"norm.kind", "norm.placement", "embedding.scale", "rope.per_layer_theta"} <= features


def _refused(spec, library) -> UnsupportedFeatureError:
    analysis = dataclasses.replace(analysis_of("Qwen/Qwen3-0.6B"), spec=spec)
    proposal = propose(spec, library, treat_as_new=True)
    with pytest.raises(UnsupportedFeatureError) as raised:
        TARGET.plan(analysis, proposal, library, out=None)
    return raised.value


def test_unresolved_deltas_are_refused_with_their_location(library) -> None:
    spec = analysis_of("Qwen/Qwen3-0.6B").spec
    delta = Delta("parameter with no role in the spec", "modeling_x.py:12", "qkv_proj (288, 96)")
    error = _refused(dataclasses.replace(spec, unresolved=(delta,)), library)
    assert error.items == (
        "parameter with no role in the spec at modeling_x.py:12 (qkv_proj (288, 96))",
    )


def test_rope_nemo_cannot_compute_keeps_hf_attention(library) -> None:
    """HF recomputes dynamic RoPE with the sequence length: HF's attention and rotary, kept
    whole, compute it instead of blocking."""
    spec = analysis_of("Qwen/Qwen3-0.6B").spec
    rope = dataclasses.replace(spec.text.rope_for("full_attention"), rope_type="dynamic")
    spec = dataclasses.replace(
        spec, text=dataclasses.replace(spec.text, rope=(("full_attention", rope),))
    )
    assert propose(spec, library, treat_as_new=True).blockers == ()
    (reason,) = attention_features(spec)
    assert reason.text.startswith("RoPE type 'dynamic' of full_attention layers")
    assert reason.where == "config.json:rope_parameters"


def test_layers_without_rope_beside_one_rope_are_generated(library) -> None:
    """Cohere2-style: some kinds skip RoPE beside kinds sharing one table; two tables refuse."""
    spec = analysis_of("google/gemma-3-1b-it").spec
    sliding = dataclasses.replace(spec.text.rope_for("sliding_attention"), rope_type=None)
    rope = tuple((k, sliding if k == "sliding_attention" else r) for k, r in spec.text.rope)
    text = dataclasses.replace(spec.text, rope=rope)
    assert propose(dataclasses.replace(spec, text=text), library, treat_as_new=True).blockers == ()
    two_ropes = (*spec.text.rope, ("chunked_attention", sliding))
    text = dataclasses.replace(spec.text, rope=two_ropes)
    proposal = propose(dataclasses.replace(spec, text=text), library, treat_as_new=True)
    assert proposal.blockers == (
        "layers without RoPE for chunked_attention layers (config.json:rope_parameters) beside "
        "layers of 2 RoPEs (full_attention, sliding_attention): the generated model skips RoPE "
        "beside one table",
    )


def test_moe_is_proposed_without_blockers(library) -> None:
    proposal = propose(analysis_of("Qwen/Qwen3-30B-A3B").spec, library, treat_as_new=True)
    assert proposal.blockers == ()
    assert proposal.hidden == ("Qwen3MoeForCausalLM",)
    assert [(d.feature, d.wanted) for d in proposal.chosen.deltas] == [
        ("moe.router", "softmax_then_topk")
    ]
    mixtral = propose(analysis_of("mistralai/Mixtral-8x7B-v0.1").spec, library, treat_as_new=True)
    assert mixtral.blockers == ()
    assert "Qwen3MoeForCausalLM" in {c.variant.key for c in mixtral.candidates}


ROUTER = "modeling_qwen3_moe.py:258"  # Qwen3MoeTopKRouter.forward in transformers 5.18.0


@pytest.mark.parametrize(
    ("router", "expected"),
    [
        (
            {"scoring": "sigmoid", "order": "topk_softmax"},
            f"sigmoid router scores over the top-k logits at {ROUTER}",
        ),
        (
            {"n_group": 8, "topk_group": 4},
            f"group-limited routing (n_group=8, topk_group=4) at {ROUTER}: generated for sigmoid",
        ),
        ({"routed_scaling_factor": 2.5}, f"routed weights scaled by 2.5 at {ROUTER}"),
        ({"bias": True}, f"router linear with a bias at {ROUTER}"),
    ],
)
def test_routers_the_generator_cannot_express_are_refused(library, router, expected) -> None:
    spec = analysis_of("Qwen/Qwen3-30B-A3B").spec
    moe = dataclasses.replace(
        spec.text.moe, router=dataclasses.replace(spec.text.moe.router, **router)
    )
    spec = dataclasses.replace(spec, text=dataclasses.replace(spec.text, moe=moe))
    proposal = propose(spec, library, treat_as_new=True)
    assert len(proposal.blockers) == 1 and proposal.blockers[0].startswith(expected)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"shared": SharedExpertSpec(64, False, "shared_experts", plain=True)},
            "shared expert without a gate projection (model.layers.*.mlp.shared_experts)",
        ),
        ({"activation": "gelu"}, "expert activation 'gelu' (config.json:hidden_act)"),
    ],
)
def test_moe_blocks_the_generator_cannot_express_are_refused(library, change, expected) -> None:
    spec = analysis_of("Qwen/Qwen3-30B-A3B").spec
    spec = dataclasses.replace(
        spec, text=dataclasses.replace(spec.text, moe=dataclasses.replace(spec.text.moe, **change))
    )
    error = _refused(spec, library)
    assert len(error.items) == 1 and error.items[0].startswith(expected)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("moe", "MoE model (Qwen3ForCausalLM) without an MoE block in its spec"),
        (
            "ssm",
            "ssm model (Qwen3ForCausalLM): the AutoModel generator writes dense, MoE and hybrid",
        ),
    ],
)
def test_other_kinds_are_refused(library, kind, expected) -> None:
    spec = dataclasses.replace(analysis_of("Qwen/Qwen3-0.6B").spec, kind=kind)
    error = _refused(spec, library)
    assert error.items[0].startswith(expected)


@pytest.mark.parametrize(
    ("text_change", "attention_change", "expected"),
    [
        ({"positions": PositionsSpec(offset=2)}, {}, "learned absolute positions"),
        (
            {"positions": PositionsSpec(offset=2, kind="sinusoidal")},
            {},
            "sinusoidal absolute positions",
        ),
        ({"transposed_linears": ("mlp.c_fc",)}, {}, "linears stored (in, out) (mlp.c_fc)"),
        ({"embedding_norm": True}, {}, "a norm of the embeddings (model.embed_norm)"),
        ({"final_norm": False}, {}, "no final norm"),
        ({"first_layer_without": ("attn_in",)}, {}, "layer 0 without the attn_in norm"),
        ({}, {"alibi": True}, "ALiBi attention biases"),
        (
            {},
            {"fused_qkv": "qkv_proj", "fused_qkv_layout": "grouped"},
            "one fused qkv_proj for q, k and v (grouped, q/k norm per_head)",
        ),
        ({}, {"multi_query": True}, "multi-query attention set by config.multi_query"),
        ({}, {"last_layer_o_bias": "dense_bias"}, "an attention output bias in the last layer"),
    ],
)
def test_computations_the_generator_cannot_express_are_refused(
    library, text_change, attention_change, expected
) -> None:
    """What the analysis now understands for mobius is refused by name here, not half-built."""
    spec = analysis_of("Qwen/Qwen3-0.6B").spec
    attention = dataclasses.replace(spec.text.attention, **attention_change)
    text = dataclasses.replace(spec.text, attention=attention, **text_change)
    proposal = propose(dataclasses.replace(spec, text=text), library, treat_as_new=True)
    assert len(proposal.blockers) == 1 and proposal.blockers[0].startswith(expected)


@pytest.mark.parametrize(
    ("text_change", "attention_change", "kept"),
    [
        ({}, {"position_scale": True}, "a position-dependent query scale"),
        (
            {},
            {"dynamic_mask": DynamicMaskSpec("A", "dt_proj", "keep_window_size")},
            "a dynamic attention mask computed from the values",
        ),
        (
            {},
            {
                "differential": DifferentialSpec(
                    ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"),
                    "0.8 - 0.6 * math.exp(-0.3 * layer_idx)",
                    "groupnorm",
                    "rms_norm_eps",
                )
            },
            "differential attention",
        ),
        # HF's decoder layer forward, which the generated layer keeps, applies them
        (
            {"residual_gates": (("attn", "input_residual"), ("mlp", "post_attention_residual"))},
            {},
            None,
        ),
    ],
)
def test_computations_hf_modules_keep_are_not_refused(
    library, text_change, attention_change, kept
) -> None:
    """What HF's attention or decoder layer computes, kept whole, blocks nothing."""
    spec = analysis_of("Qwen/Qwen3-0.6B").spec
    attention = dataclasses.replace(spec.text.attention, **attention_change)
    text = dataclasses.replace(spec.text, attention=attention, **text_change)
    spec = dataclasses.replace(spec, text=text)
    assert propose(spec, library, treat_as_new=True).blockers == ()
    assert [r.text for r in attention_features(spec)] == ([kept] if kept else [])


def test_a_learned_activation_is_not_refused(library) -> None:
    """HF's MLP is kept whole, its activation's parameters with it (test_learned_activation)."""
    spec = analysis_of("Qwen/Qwen3-0.6B").spec
    mlp = dataclasses.replace(spec.text.mlp, activation="xielu", learned_activation="act_fn")
    spec = dataclasses.replace(spec, text=dataclasses.replace(spec.text, mlp=mlp))
    assert propose(spec, library, treat_as_new=True).blockers == ()


def test_a_choice_bias_beside_softmax_scores_is_not_refused(library) -> None:
    """AutoModel's Gate scores it as "softmax_with_bias" (test_softmax_choice_bias)."""
    spec = analysis_of("Qwen/Qwen3-30B-A3B").spec
    router = dataclasses.replace(spec.text.moe.router, correction_bias=True)
    moe = dataclasses.replace(spec.text.moe, router=router)
    spec = dataclasses.replace(spec, text=dataclasses.replace(spec.text, moe=moe))
    assert propose(spec, library, treat_as_new=True).blockers == ()


def test_a_sparsemixer_router_is_refused(library) -> None:
    spec = analysis_of("mistralai/Mixtral-8x7B-v0.1").spec
    router = dataclasses.replace(
        spec.text.moe.router,
        order="sparsemixer",
        jitter_eps=0.01,
        jitter_key="router_jitter_noise",
    )
    moe = dataclasses.replace(spec.text.moe, router=router)
    spec = dataclasses.replace(spec, text=dataclasses.replace(spec.text, moe=moe))
    proposal = propose(spec, library, treat_as_new=True)
    assert len(proposal.blockers) == 1
    assert proposal.blockers[0].startswith(
        "sparsemixer routing (two experts, each within a margin)"
    )


def test_experts_saved_fused_are_generated(library) -> None:
    """Fused experts on disk (Granite MoE) are transposed by the adapter, not refused; a fused
    role AutoModel has no grouped tensor for still is."""
    spec = analysis_of("mistralai/Mixtral-8x7B-v0.1").spec
    fused = (
        ("gate_up", "block_sparse_moe.input_linear.weight"),
        ("down", "block_sparse_moe.output_linear.weight"),
    )
    moe = dataclasses.replace(spec.text.moe, fused_on_disk=fused)
    spec = dataclasses.replace(spec, text=dataclasses.replace(spec.text, moe=moe))
    assert propose(spec, library, treat_as_new=True).blockers == ()
    rules = _fused(moe)
    assert [(r.hf_pattern, r.native) for r in rules] == [
        (r"\.block_sparse_moe\.input_linear\.weight$", ".mlp.experts.gate_and_up_projs"),
        (r"\.block_sparse_moe\.output_linear\.weight$", ".mlp.experts.down_projs"),
    ]
    with pytest.raises(UnsupportedFeatureError, match="fused expert tensors of role gate"):
        _fused(dataclasses.replace(moe, fused_on_disk=(("gate", "x.weight"),)))
