"""Analyses of the fixture configs, computed once per test process."""

from __future__ import annotations

from functools import cache

from onboard.analysis import Analysis, analyse
from onboard.source import load_source
from tests.hub_cache import fixture_config

# The five dense architectures issue #2 re-onboards with --treat-as-new.
DENSE = (
    "Qwen/Qwen3-0.6B",
    "meta-llama/Llama-3.2-1B",
    "mistralai/Mistral-7B-v0.1",
    "Qwen/Qwen2.5-0.5B",
    "google/gemma-3-1b-it",
    "HuggingFaceTB/SmolLM3-3B",  # RoPE skipped in the layers config.no_rope_layers marks
)


@cache
def analysis_of(repo_id: str) -> Analysis:
    return analyse(load_source(str(fixture_config(repo_id))))


def tiny_vlm(repo_id: str):
    """The tiny config and perturbed model the analysis reads for a VLM fixture."""
    return tiny_vlm_at(str(fixture_config(repo_id).parent))


def read_tiny_vlm(analysis: Analysis):
    """The HF config, perturbed model, vision spec (read without deltas) and parts of
    ``analysis``' tiny VLM, as the vision analysis reads them."""
    from onboard.analysis.vision import _read_vision
    from onboard.analysis.vision.parts import find_parts
    from onboard.hf_config import make_hf_config
    from onboard.tiny_model import build_tiny_model, perturb

    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config, auto_class="AutoModelForImageTextToText"))
    vision, _, deltas = _read_vision(model, config)
    assert deltas == ()
    return config, model, vision, find_parts(model, config)


@cache
def tiny_vlm_at(config_dir: str):
    """The tiny config and perturbed model the analysis reads for the VLM config in
    ``config_dir`` (the steps of ``onboard.analysis.vision.analyse_vlm`` up to the model), built
    once per process."""
    from onboard.analysis import _analyse_decoder
    from onboard.analysis.vision import text_source
    from onboard.analysis.vision.backbone import register_causal_view
    from onboard.classify import Classification, Kind
    from onboard.hf_config import make_hf_config
    from onboard.tiny_model import build_tiny_model, perturb
    from onboard.tiny_vision import shrink_vlm_config

    source = load_source(config_dir)
    real = make_hf_config(source.config)
    register_causal_view(real.text_config)
    text = _analyse_decoder(text_source(source, real), Classification(Kind.DENSE, ()))
    config = make_hf_config(shrink_vlm_config(source.config, text.tiny.config, real))
    return config, perturb(build_tiny_model(config, auto_class="AutoModelForImageTextToText"))
