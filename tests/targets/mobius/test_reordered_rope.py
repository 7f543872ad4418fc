"""RoPE frequencies reordered (Cohere Compass' text model): its default RoPE table is
``1 / theta^(2i / d)`` with the frequencies before the last ``mrope_section`` taken evens first,
then odds (modeling_cohere_compass.py, ``compute_default_rope_parameters``). Text positions are
one row repeated for M-RoPE's three axes, so the recomposition of the sections puts every
frequency back where it was: a plain RoPE on the reordered table. From the backlog (mobius 0.1.0
lacks the type): the spec check proves the order; generated mobius code builds the table and
passes parity with zero edits, and fails it with the standard order; AutoModel refuses it by
name.

The config is transformers' default one with the published checkpoint's layer kinds and RoPE
(benchmarks/reonboard.py BUILD_OVERRIDES: transformers cannot build its default config).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from onboard.analysis.spec_check import check_spec
from onboard.codegen import lint_python
from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.spec import FrequencyOrder
from onboard.targets.mobius import TARGET
from onboard.targets.mobius import plan as mobius_plan
from onboard.targets.mobius.plan import STYLE
from onboard.tiny_model import build_tiny_model, perturb
from tests.targets.automodel.kept import automodel_view
from tests.targets.mobius.checks import (
    assert_default_checks_pass,
    built_from_test_entry,
    onboarded_from_backlog,
    statuses,
)
from tests.targets.mobius.sabotage import parity_with

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
REORDER = "order = np.concatenate([head[0::2], head[1::2], np.arange(len(head), dim // 2)])"


@pytest.fixture(scope="module")
def compass(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.new_types import default_config_dir

    sys.path.insert(0, str(BENCHMARKS))
    try:
        from reonboard import BUILD_OVERRIDES
    finally:
        sys.path.remove(str(BENCHMARKS))
    overrides = BUILD_OVERRIDES["cohere_compass_text"]
    return default_config_dir("cohere_compass_text", tmp_path_factory.mktemp("hub"), **overrides)


def test_the_order_is_the_first_sections_evens_then_odds() -> None:
    """HF's ``cat([f[:-t][0::2], f[:-t][1::2]])`` then ``f[-t:]``, for sections 3, 2, 3."""
    assert FrequencyOrder("mrope_section").indices([3, 2, 3], 8) == (0, 2, 4, 1, 3, 5, 6, 7)


def test_spec_check_proves_the_reordered_frequencies(compass: Path) -> None:
    """The order read with its evidence (the HF line, the sections' key); the interpreter names
    Cohere Compass' attention when the table is taken in the standard order."""
    from onboard.analysis import analyse
    from onboard.source import load_source

    analysis = analyse(load_source(str(compass)))
    assert analysis.spec.unresolved == ()
    text = analysis.spec.text
    rope = dict(text.rope)
    assert rope["sliding_attention"].order == FrequencyOrder("mrope_section")
    assert rope["full_attention"].rope_type is None  # NoPE: nothing to reorder
    evidence = dict(analysis.spec.evidence)["text.rope.sliding_attention"]
    assert any(
        e.kind == "source" and e.where.startswith("modeling_cohere_compass.py:") for e in evidence
    ), evidence
    # the tiny sections split its 8 frequencies unevenly, so the order is not a plain halving
    assert analysis.tiny.config["rope_parameters"]["sliding_attention"]["mrope_section"] == [
        3,
        2,
        3,
    ]
    config = make_hf_config(analysis.tiny.config)
    model = perturb(build_tiny_model(config))
    assert check_spec(text, model, config) == ()
    standard = dataclasses.replace(rope["sliding_attention"], order=None)
    changed = dataclasses.replace(
        text, rope=tuple((k, standard if r.order else r) for k, r in text.rope)
    )
    deltas = check_spec(changed, model, config)
    assert any("CohereCompassAttention computes something" in d.what for d in deltas), deltas


@pytest.mark.slow
def test_reordered_rope_generates_into_mobius_with_zero_edits(
    compass: Path, tmp_path: Path
) -> None:
    """The generated table passes parity (the cpu EP's window bug T8 excused); the standard
    order in its place fails the default EP's prefill, every weight placed."""
    result = onboarded_from_backlog(compass, tmp_path / "out")
    report = result.parity
    assert_default_checks_pass(report)
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert "self.rotary_emb = CohereCompassReorderedRope(config)" in text
    assert 'config.rope_parameters.get("sliding_attention", config.rope_parameters)' in text
    assert REORDER in text
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    assert report.bugs and {b.id for b in report.bugs} == {"T8"}  # the cpu EP's windows
    standard = parity_with(result, REORDER, "order = np.arange(dim // 2)")
    checks = statuses(standard)
    assert checks["weights"] is Status.PASS
    assert checks["prefill"] is Status.FAIL
    assert checks["decode"] is Status.FAIL
    module.write_text(text)


def test_library_tests_build_the_reordered_table(compass: Path, tmp_path: Path) -> None:
    """mobius' own tests build from a hand-made config (heads of 16): the entry of its
    tests/_test_configs.py sets the sections shrunk to their 8 frequencies, and the model built
    from it holds the reordered table."""
    result = onboard_new(NewOptions(model=str(compass), out=tmp_path / "out", parity=False))
    design = TARGET.design(result.analysis.spec, result.proposal)
    entry = mobius_plan.test_config_entry(design, result.analysis.spec)
    assert '"rope_sections": [3, 2, 3]' in entry, entry
    _, config, built = built_from_test_entry(result, entry)
    inv_freq = 1.0 / config.rope_theta ** (np.arange(0, 16, 2, dtype=np.float32) / 16)
    row = built.model.rotary_emb.cos_cache.const_value.numpy()[1]
    np.testing.assert_allclose(row, np.cos(inv_freq[[0, 2, 4, 1, 3, 5, 6, 7]]), rtol=1e-6)


def test_automodel_refuses_hf_attention_beside_tables_per_kind(
    compass: Path, tmp_path: Path
) -> None:
    """The reordered frequencies would keep HF's attention whole, but HF's attention reads
    tables per layer kind (and M-RoPE) the generated model does not build for it: refused."""
    _, kept = automodel_view(compass)
    named = [i for i in kept if i.startswith("RoPE frequencies reordered in sliding_attention")]
    assert named and "modeling_cohere_compass.py:" in named[0], kept
    out = tmp_path / "out"
    options = NewOptions(model=str(compass), out=out, target="automodel", parity=False)
    with pytest.raises(UnsupportedFeatureError) as raised:
        onboard_new(options)
    items = raised.value.items
    assert any("RoPE tables per layer kind" in i for i in items), items
    assert not out.exists()
