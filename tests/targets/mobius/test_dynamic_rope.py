"""mobius' DynamicNTKRope (bug M8): reported as a library bug by its counterfactual, and not
inherited by generated code, which builds the default tables transformers uses up to
max_position_embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from mobius.components import initialize_rope
from mobius.models.base import CausalLMModel
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from onboard.analysis import analyse
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.source import load_source
from onboard.targets.mobius import TARGET, _import_file
from onboard.targets.mobius.parity import mobius_config
from onboard.targets.mobius.propose import propose
from onboard.targets.mobius.registry import open_library
from onboard.targets.mobius.rope import M8_NOTE
from tests.hub_cache import fixture_config
from tests.targets.mobius.sabotage import config_classes

DYNAMIC = {"rope_type": "dynamic", "factor": 2.0}


def _dynamic_llama(folder: Path) -> Path:
    """Llama 3.2's config with a dynamic NTK RoPE (as InternLM3 has)."""
    config = json.loads(fixture_config("meta-llama/Llama-3.2-1B").read_text())
    config["rope_scaling"] = dict(DYNAMIC)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _tables(module_class: type, hf_config) -> np.ndarray:
    config = mobius_config(module_class, hf_config)
    return np.asarray(initialize_rope(config).cos_cache.const_value.numpy())


def test_the_library_rope_class_misses_hf_where_the_default_tables_match(tmp_path: Path) -> None:
    """The counterfactual on the component itself: HF's cos at positions 0..max-1 against
    mobius' DynamicNTKRope table and against the default table the generated config asks for."""
    analysis = analyse(load_source(str(_dynamic_llama(tmp_path / "model"))))
    hf_config = make_hf_config(analysis.tiny.config)
    limit = hf_config.max_position_embeddings
    positions = torch.arange(limit)[None]
    hf_cos, _ = LlamaRotaryEmbedding(hf_config)(torch.zeros(1, dtype=torch.float32), positions)
    hf_cos = hf_cos[0].numpy()  # [positions, head_dim]: both halves
    half = hf_cos.shape[-1] // 2
    library = _tables(CausalLMModel, hf_config)
    assert mobius_config(CausalLMModel, hf_config).rope_type == "dynamic"
    assert np.abs(library[:, :half] - hf_cos[:, :half]).max() > 1e-2

    result = onboard_new(
        NewOptions(
            model=str(tmp_path / "model"), treat_as_new=True, out=tmp_path / "out", parity=False
        )
    )
    generated = getattr(_import_file(result.root / result.plan.model_file), result.plan.model_class)
    corrected = _tables(generated, hf_config)
    assert corrected.shape == library.shape == (limit, half)
    assert np.abs(corrected - hf_cos[:, :half]).max() < 1e-6


def test_the_library_class_fails_and_the_counterfactual_names_m8(tmp_path: Path) -> None:
    analysis = analyse(load_source(str(_dynamic_llama(tmp_path / "model"))))
    library = open_library(None)
    proposal = propose(analysis.spec, library, treat_as_new=False)
    assert proposal.already_supported is not None  # llama: mobius' own CausalLMModel
    report = TARGET.parity(analysis, proposal, None, library)
    excused = [c for c in report.checks if c.status is Status.XFAIL]
    assert {c.provider for c in excused} == {"default", "cpu"}
    assert all(c.bug == "M8" for c in excused)
    assert max(c.metrics.max_abs for c in excused if c.metrics) > 1e-2
    assert {b.id for b in report.bugs} == {"M8"}
    evidence = report.bugs[0].evidence
    assert "with rope_type 'default' in place of 'dynamic'" in evidence
    assert "_rotary_embedding.py:233" in report.bugs[0].title
    counterfactual = float(evidence.split("; ")[1].split(" ")[0])
    assert counterfactual < 1e-4


def test_generated_code_does_not_inherit_m8(tmp_path: Path) -> None:
    result = onboard_new(
        NewOptions(
            model=str(_dynamic_llama(tmp_path / "model")), treat_as_new=True, out=tmp_path / "out"
        )
    )
    report = result.parity
    assert report.passed and not report.bugs
    assert all(c.status in (Status.PASS, Status.SKIP) for c in report.checks)
    assert M8_NOTE in report.notes
    text = (result.root / result.plan.model_file).read_text() + config_classes(result)
    assert 'rope_type="default"' in text and "(bug M8)" in text
