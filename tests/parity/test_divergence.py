"""Localising a parity failure: probe points by structure, the first divergence, the report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from onboard.analysis import analyse
from onboard.hf_config import make_hf_config
from onboard.parity.divergence import (
    Divergence,
    find_points,
    first_divergence,
    localise,
    valid_positions,
)
from onboard.parity.harness import DEFAULT_SCENARIOS, prompt_batch
from onboard.parity.reference import HFRunner, build_reference
from onboard.parity.report import ParityReport
from onboard.source import load_source
from tests.new_types import default_config_dir

GPT2 = [
    ("", "GPT2LMHeadModel"),
    ("transformer", "GPT2Model"),
    ("transformer.wte", "Embedding"),
    ("transformer.h", "ModuleList"),
    *(
        (f"transformer.h.{i}{part}", cls)
        for i in range(2)
        for part, cls in (
            ("", "GPT2Block"),
            (".ln_1", "LayerNorm"),
            (".attn", "GPT2Attention"),
            (".attn.c_attn", "Conv1D"),
            (".ln_2", "LayerNorm"),
            (".mlp", "GPT2MLP"),
        )
    ),
    ("transformer.ln_f", "LayerNorm"),
    ("lm_head", "Linear"),
]


def test_probe_points_are_found_by_structure_not_by_llama_names() -> None:
    points = find_points(GPT2, 2, "lm_head")
    assert points.layers == ("transformer.h.0", "transformer.h.1")
    assert points.attention == ("transformer.h.0.attn", "transformer.h.1.attn")
    assert points.mlp == ("transformer.h.0.mlp", "transformer.h.1.mlp")
    probes = [c.probe for c in points.captures()]
    assert probes == [
        "embeddings",
        "layer 0 attention",
        "layer 0 mlp",
        "layer 0 output",
        "layer 1 attention",
        "layer 1 mlp",
        "layer 1 output",
        "final norm",
    ]


def test_a_layer_count_that_matches_no_container_gives_no_layer_probes() -> None:
    points = find_points(GPT2, 3, "lm_head")
    assert points.layers == () and [c.probe for c in points.captures()] == ["final norm"]


def _probes(**bumps: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Reference probes and a candidate with ``bumps`` (probe name, underscores for spaces)
    added to each named probe."""
    rng = np.random.default_rng(0)
    names = [
        "embeddings",
        *(f"layer {i} {p}" for i in range(2) for p in ("attention", "mlp", "output")),
        "final norm",
        "logits",
    ]
    reference = {n: rng.standard_normal((1, 5, 8)).astype(np.float32) for n in names}
    candidate = {n: v + bumps.get(n.replace(" ", "_"), 0.0) for n, v in reference.items()}
    return reference, candidate


def test_the_first_diverging_module_of_the_first_diverging_layer_is_named() -> None:
    reference, candidate = _probes(layer_1_mlp=0.5, layer_1_output=0.5, final_norm=0.5, logits=0.5)
    found = first_divergence("default", "the prefill", reference, candidate)
    assert (found.layer, found.module, found.where) == (1, "mlp", "layer 1 mlp")
    assert found.max_abs == pytest.approx(0.5)
    assert found.agreed == "layer 1 attention"
    assert "first diverges at layer 1 mlp in the prefill, max abs 0.5" in found.line()


def test_a_module_boundary_difference_that_the_stream_absorbs_is_not_named() -> None:
    """Layer 0's attention differs (a scale inside one side's module, outside the other's),
    but its output agrees: the divergence is layer 1's."""
    reference, candidate = _probes(layer_0_attention=0.3, layer_1_output=0.2, logits=0.2)
    found = first_divergence("cpu", "decode step 1", reference, candidate)
    assert found.where == "layer 1 output" and found.layer == 1
    assert found.agreed == "layer 1 mlp"


def test_identical_probes_report_no_divergence_and_a_shape_mismatch_does() -> None:
    reference, candidate = _probes()
    assert first_divergence("default", "the prefill", reference, candidate) is None
    candidate["embeddings"] = candidate["embeddings"][:, :4]
    found = first_divergence("default", "the prefill", reference, candidate)
    assert found.where == "embeddings" and "shape" in found.detail


def test_padded_positions_are_left_out() -> None:
    mask = np.array([[1, 1, 0]])
    kept = valid_positions({"embeddings": np.arange(6.0).reshape(1, 3, 2)}, mask)
    assert kept["embeddings"].tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_the_divergence_round_trips_through_the_json_report() -> None:
    found = Divergence("cpu", "the prefill", "layer 1 attention", 0.25, "layer 0 output", 1e-7)
    assert Divergence.from_dict(json.loads(json.dumps(found.to_dict()))) == found
    report = ParityReport("automodel", "llama", "X", (), None, divergences=(found,))
    data = report.to_dict()["divergences"][0]
    assert (data["layer"], data["module"], data["max_abs"]) == (1, "attention", 0.25)


def test_the_same_model_on_both_sides_agrees_at_every_probe(tmp_path) -> None:
    analysis = analyse(load_source(str(default_config_dir("llama", tmp_path))))
    config = make_hf_config(analysis.tiny.config)
    model = build_reference(config)
    reference, candidate = HFRunner(model, probe=True), HFRunner(model, probe=True)
    prefill = reference.prefill(prompt_batch(config.vocab_size))
    assert len(prefill.probes) == 2 + 3 * config.num_hidden_layers
    assert localise(reference, candidate, config.vocab_size, DEFAULT_SCENARIOS) is None
