"""The weight-map proof catches dropped, swapped, duplicated and misshapen weights by name."""

from __future__ import annotations

from onboard.weightmap import prove

CHECKPOINT = {
    "model.embed_tokens.weight": (8, 4),
    "model.layers.0.mlp.gate.weight": (3, 4),
    **{
        f"model.layers.0.mlp.experts.{e}.{p}.weight": (2, 4)
        for e in range(3)
        for p in ("gate_proj", "up_proj")
    },
    "model.layers.0.mlp.shared_experts.gate_proj.weight": (2, 4),
}
PARAMETERS = dict(CHECKPOINT)


def _identity(state):
    return state


def _expected(key: str) -> str:
    return key


def test_identity_mapping_is_proved() -> None:
    proof = prove(CHECKPOINT, _identity, PARAMETERS, expected_name=_expected)
    assert proof.ok, proof.problems
    assert proof.checkpoint_tensors == proof.parameters == len(CHECKPOINT)
    experts = next(r for r in proof.rows if r.group == "layer 0 experts")
    assert (experts.checkpoint, experts.placed, experts.detail) == (6, 6, "experts 0..2")


def test_dropped_expert_is_named() -> None:
    def drop(state):
        return {k: v for k, v in state.items() if ".experts.1." not in k}

    problems = prove(CHECKPOINT, drop, PARAMETERS, expected_name=_expected).problems
    assert "model.layers.0.mlp.experts.1.gate_proj.weight is not used" in problems
    assert (
        "model.layers.0.mlp.experts.1.up_proj.weight is filled by no checkpoint tensor" in problems
    )


def test_swapped_experts_are_named() -> None:
    def swap(state):
        return {
            k.replace(".experts.0.", ".experts.X.")
            .replace(".experts.2.", ".experts.0.")
            .replace(".experts.X.", ".experts.2."): v
            for k, v in state.items()
        }

    problems = prove(CHECKPOINT, swap, PARAMETERS, expected_name=_expected).problems
    assert (
        "model.layers.0.mlp.experts.0.gate_proj.weight landed in "
        "model.layers.0.mlp.experts.2.gate_proj.weight, expected "
        "model.layers.0.mlp.experts.0.gate_proj.weight" in problems
    )


def test_dropped_shared_expert_is_named() -> None:
    def drop(state):
        return {k: v for k, v in state.items() if "shared_experts" not in k}

    problems = prove(CHECKPOINT, drop, PARAMETERS).problems
    assert "model.layers.0.mlp.shared_experts.gate_proj.weight is not used" in problems


def test_missing_expert_parameters_are_a_gap() -> None:
    parameters = {k: v for k, v in PARAMETERS.items() if ".experts.1." not in k}
    problems = prove(CHECKPOINT, _identity, parameters).problems
    assert "layer 0 has no parameters for experts [1]" in problems


def test_splits_and_stacks_keep_provenance() -> None:
    """A fused [E, 2I, H] tensor split per expert is traced back to its one source."""
    checkpoint = {"model.layers.0.mlp.experts.gate_up_proj": (2, 4, 3)}
    parameters = {
        f"model.layers.0.mlp.experts.{e}.{p}.weight": (2, 3)
        for e in range(2)
        for p in ("gate_proj", "up_proj")
    }

    def split(state):
        fused = state["model.layers.0.mlp.experts.gate_up_proj"]
        out = {}
        for e, weights in enumerate(fused):
            gate, up = weights.chunk(2, dim=0)
            out[f"model.layers.0.mlp.experts.{e}.gate_proj.weight"] = gate
            out[f"model.layers.0.mlp.experts.{e}.up_proj.weight"] = up
        return out

    proof = prove(checkpoint, split, parameters)
    assert proof.ok, proof.problems  # every value used exactly once, across four parameters

    def split_and_copy(state):
        out = split(state)
        out["model.layers.0.mlp.experts.1.up_proj.weight"] = out[
            "model.layers.0.mlp.experts.0.up_proj.weight"
        ]
        return out

    problems = prove(checkpoint, split_and_copy, parameters).problems
    assert (
        "model.layers.0.mlp.experts.gate_up_proj: only 18 of its 24 values reach a parameter"
        in problems
    )
    assert any("some values are copied into" in p for p in problems)


def test_shape_mismatch_is_named() -> None:
    def transpose(state):
        return {k: (v.T if k == "model.embed_tokens.weight" else v) for k, v in state.items()}

    problems = prove(CHECKPOINT, transpose, PARAMETERS).problems
    assert "model.embed_tokens.weight: shape (4, 8) != parameter (8, 4)" in problems


def test_zeros_from_no_checkpoint_tensor_are_counted_other_values_are_not_allowed() -> None:
    """GPT-NeoX Japanese: o_proj biases of layers HF gives none are zeros; a parameter holding
    anything else that no checkpoint tensor gave is a problem."""
    parameters = {**PARAMETERS, "model.layers.0.bias": (4,)}

    def zero_bias(state):
        return {**state, "model.layers.0.bias": state["model.embed_tokens.weight"][0] * 0}

    proof = prove(CHECKPOINT, zero_bias, parameters, expected_name=_expected)
    assert proof.ok, proof.problems
    assert proof.zeros == ("model.layers.0.bias",) and "(1 set to zero)" in proof.summary()

    def negative_bias(state):
        return {**state, "model.layers.0.bias": state["model.embed_tokens.weight"][0] * 0 - 1}

    problems = prove(CHECKPOINT, negative_bias, parameters, expected_name=_expected).problems
    assert problems == ("model.layers.0.bias holds values from no checkpoint tensor",)


def test_a_copy_no_parameter_takes_is_harmless_only_when_its_source_is_consumed() -> None:
    """A library's conversion may keep a copy the graph does not hold (the decoder's embedding
    table under a decoder that runs on embeddings): fine while the source fills a parameter
    elsewhere or HF never reads it; a tensor whose only copy lands nowhere is lost."""
    checkpoint = {"embed.weight": (4, 2), "head.weight": (4, 2), "pool.weight": (2,)}

    def convert(state):
        return {
            "embedding.embed.weight": state["embed.weight"],
            "decoder.embed.weight": state["embed.weight"],  # a copy no parameter takes
            "decoder.head.weight": state["head.weight"],
            "vision.pool.weight": state["pool.weight"],  # HF never reads the pool either
        }

    parameters = {"embedding.embed.weight": (4, 2), "decoder.head.weight": (4, 2)}
    proof = prove(checkpoint, convert, parameters, unread=("pool.weight",))
    assert proof.ok, proof.problems
    lost = prove(checkpoint, convert, parameters)
    assert list(lost.problems) == [
        "vision.pool.weight (from pool.weight) fills no parameter",
        "pool.weight is not used",
    ]


def test_a_checkpoint_past_float32s_exact_integers_is_still_told_apart() -> None:
    """MiniMax-M2 with its 256 experts unshrunk (19 M values): past 2**24 float32 rounds to
    even, so a tensor's first value seemed to belong to its neighbour ("w2 landed in up_proj")."""
    shapes = {"a": (2**24,), "b": (3,), "c": (3,)}
    proof = prove(shapes, lambda tensors: tensors, shapes, expected_name=lambda key: key)
    assert proof.ok, proof.problems
