"""Idefics 2: rows of images, a SigLIP-like tower read after its post norm, and a connector that
is a gated modality projection then a perceiver resampler, read from transformers' default
config (which runs at its real sizes: 64 latents over 7 x 7 patches) and proved against the
tiny HF model stage by stage; a resampler computed otherwise fails the check."""

from __future__ import annotations

import dataclasses
import tempfile
from functools import cache
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.vision.check import check_vision
from onboard.analysis.vision.trace import trace_vlm
from onboard.hf_config import make_hf_config
from onboard.source import load_source
from tests.analyses import read_tiny_vlm
from tests.new_types import default_config_dir


@cache
def _analysis():
    root = Path(tempfile.mkdtemp(prefix="onboard-idefics2-"))
    return analyse(load_source(str(default_config_dir("idefics2", root))))


def _steps(vision=None):
    vision = vision or _analysis().spec.vision
    return {s.op: s for s in vision.projector.steps}


@pytest.mark.slow
def test_the_connector_is_a_gated_projection_then_a_perceiver_resampler() -> None:
    spec = _analysis().spec
    assert spec.unresolved == ()
    vision = spec.vision
    assert vision.image_rows
    assert vision.select.post_norm and not vision.tower.class_token
    assert [s.op for s in vision.projector.steps] == ["gate_up", "linear", "perceiver"]
    steps = _steps()
    gate, down = steps["gate_up"], steps["linear"]
    assert (gate.name, gate.up, gate.activation) == (
        "modality_projection.gate_proj",
        "modality_projection.up_proj",
        "silu",
    )
    # the text's intermediate size between them, the text's width out
    assert (gate.in_features, gate.out_features) == (768, 14336)
    assert (down.name, down.in_features, down.out_features) == (
        "modality_projection.down_proj",
        14336,
        4096,
    )
    assert vision.projector.width.key == "text_config.intermediate_size"
    assert vision.projector.activation_key == "text_config.hidden_act"


def test_the_perceiver_is_read_at_the_real_sizes_from_its_sub_config() -> None:
    perceiver = _steps()["perceiver"].perceiver
    assert (perceiver.latents, perceiver.depth, perceiver.hidden_size) == (64, 3, 4096)
    assert (perceiver.num_heads, perceiver.num_kv_heads, perceiver.head_dim) == (16, 4, 96)
    assert (perceiver.intermediate_factor, perceiver.intermediate_size) == (4, 16384)
    # the perceiver's own epsilon, not the text's 1e-5
    assert (perceiver.activation, perceiver.eps) == ("silu", 1e-6)
    assert perceiver.config == "perceiver_config"
    assert dict(perceiver.keys)["latents"] == "resampler_n_latents"
    names = dict(perceiver.names)
    assert (names["latents_norm"], names["context_norm"]) == (
        "input_latents_norm",
        "input_context_norm",
    )
    assert (names["post_norm"], names["norm"]) == ("post_attention_layernorm", "norm")
    assert [names[r] for r in ("q_proj", "k_proj", "v_proj", "o_proj")] == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
    ]
    evidence = dict(_analysis().spec.evidence)["vision.projector"]
    assert any(e.where == "config.json:perceiver_config.resampler_n_latents" for e in evidence)
    assert any("hidden_size * 4" in e.detail for e in evidence)


def test_the_spec_survives_json() -> None:
    from onboard.spec import ArchitectureSpec

    spec = _analysis().spec
    assert ArchitectureSpec.from_json(spec.to_json()) == spec


def test_the_tiny_perceiver_shows_each_size() -> None:
    """Grouped-query heads whose width is not the hidden size over the heads, and latents other
    than the tiny patch count; HF keeps the tiny perceiver at the tiny text's width."""
    config = make_hf_config(_analysis().tiny.config)
    perceiver = config.perceiver_config
    assert perceiver.hidden_size == config.text_config.hidden_size
    assert perceiver.resampler_n_latents == 5
    assert (perceiver.resampler_n_heads, perceiver.num_key_value_heads) == (4, 2)
    assert perceiver.resampler_head_dim * perceiver.resampler_n_heads != perceiver.hidden_size
    assert perceiver.rms_norm_eps == 1e-6


@cache
def _tiny():
    config, model, vision, parts = read_tiny_vlm(_analysis())
    post = vision.tower.name_of("post_norm")
    return vision, model, parts, trace_vlm(model, parts, config, post, rows=True)


def _check(vision=None) -> tuple:
    tiny_vision, model, parts, trace = _tiny()
    return check_vision(vision or tiny_vision, model, parts, trace)


def _with_perceiver(**changes):
    vision = _tiny()[0]
    steps = tuple(
        dataclasses.replace(s, perceiver=dataclasses.replace(s.perceiver, **changes))
        if s.perceiver
        else s
        for s in vision.projector.steps
    )
    return dataclasses.replace(vision, projector=dataclasses.replace(vision.projector, steps=steps))


def test_the_tiny_spec_passes_the_check() -> None:
    assert _check() == ()


def _perceiver_layers_fail(deltas: tuple) -> bool:
    return any("Idefics2PerceiverLayer computes" in d.what for d in deltas) and any(
        "Idefics2Connector computes" in d.what for d in deltas
    )


def test_the_check_fails_without_the_latents_among_the_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from onboard.analysis.vision import perceiver_run

    _tiny()  # analysed and cached before the sabotage, whichever test runs first

    def context_only(spec, name, weight, index, latents, context):
        layer = f"{name}.{spec.name_of('layers')}.{index}"

        def w(role, leaf="weight", inside=""):
            middle = f"{spec.name_of(inside)}." if inside else ""
            return weight(f"{layer}.{middle}{spec.name_of(role)}.{leaf}")

        normed = perceiver_run._rms(latents, w("latents_norm"), spec.eps)
        keys_in = perceiver_run._rms(context, w("context_norm"), spec.eps)
        latents = latents + perceiver_run._attention(spec, w, normed, keys_in)
        return latents + perceiver_run._mlp(
            spec, w, perceiver_run._rms(latents, w("post_norm"), spec.eps)
        )

    monkeypatch.setattr(perceiver_run, "run_perceiver_layer", context_only)
    monkeypatch.setattr("onboard.analysis.vision.check.run_perceiver_layer", context_only)
    assert _perceiver_layers_fail(_check())


def test_the_check_fails_without_the_final_norm(monkeypatch: pytest.MonkeyPatch) -> None:
    from onboard.analysis.vision import perceiver_run

    _tiny()

    def unnormed(spec, name, weight, context):
        latents = weight(f"{name}.{spec.name_of('latents')}")[None].expand(context.shape[0], -1, -1)
        for index in range(spec.depth):
            latents = perceiver_run.run_perceiver_layer(spec, name, weight, index, latents, context)
        return latents

    monkeypatch.setattr("onboard.analysis.vision.check.run_perceiver", unnormed)
    deltas = _check()
    assert any("Idefics2PerceiverResampler computes" in d.what for d in deltas)
    assert not any("Idefics2PerceiverLayer" in d.what for d in deltas)  # each layer is right


@pytest.mark.parametrize(
    ("changes", "what"),
    [
        ({"eps": 1e-5}, "the text's epsilon"),
        ({"num_kv_heads": 4}, "one key/value head per query head"),
        ({"activation": "gelu"}, "another activation"),
    ],
    ids=["text-eps", "no-gqa", "gelu"],
)
def test_the_check_fails_on_a_perceiver_read_otherwise(changes: dict, what: str) -> None:
    assert _perceiver_layers_fail(_check(_with_perceiver(**changes))), what


def test_the_check_fails_on_swapped_norms() -> None:
    names = dict(_tiny()[0].projector.steps[-1].perceiver.names)
    swapped = {
        **names,
        "latents_norm": names["context_norm"],
        "context_norm": names["latents_norm"],
    }
    deltas = _check(_with_perceiver(names=tuple(sorted(swapped.items()))))
    assert _perceiver_layers_fail(deltas)


def test_the_check_fails_on_a_modality_projection_with_gate_and_up_swapped() -> None:
    vision = _tiny()[0]
    steps = tuple(
        dataclasses.replace(s, name=s.up, up=s.name) if s.op == "gate_up" else s
        for s in vision.projector.steps
    )
    deltas = _check(
        dataclasses.replace(vision, projector=dataclasses.replace(vision.projector, steps=steps))
    )
    assert any("Idefics2PerceiverResampler receives" in d.what for d in deltas)
