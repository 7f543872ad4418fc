"""The generated entry of mobius' tests/_test_configs.py builds the model in mobius' own harness.

mobius' build and weight-alignment tests make each entry's config as ``_base_config`` does (its
tiny sizes, then the entry's overrides, into the entry's ``_config_cls``) and construct the
registered class from it. An entry that lacks a field the generated class reads fails them all,
though parity (which converts the HF config) passes.
"""

from __future__ import annotations

from pathlib import Path

from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius import TARGET
from onboard.targets.mobius import plan as mobius_plan
from tests.new_types import default_config_dir
from tests.targets.mobius.checks import built_from_test_entry


def test_a_per_layer_moe_list_is_in_the_entry(tmp_path: Path) -> None:
    """Cohere 2 MoE says which layers are MoE in ``mlp_layer_types``, one word per layer."""
    folder = default_config_dir("cohere2_moe", tmp_path / "models")
    result = onboard_new(NewOptions(model=str(folder), out=tmp_path / "out", parity=False))
    design = TARGET.design(result.analysis.spec, result.proposal)
    entry = mobius_plan.test_config_entry(design, result.analysis.spec)
    assert '"mlp_layer_types": ["dense", "sparse"]' in entry
    model_type, _, _ = built_from_test_entry(result, entry)  # IndexError without the list
    assert model_type == "cohere2_moe"
