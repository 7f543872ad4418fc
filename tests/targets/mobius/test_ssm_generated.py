"""A pure state-space model (Mamba-2: no attention, no MLP) onboarded into mobius.

The generated model runs in mobius' hybrid task, which takes the padding mask, so parity
compares the conv and SSM states after the prefill and every decode step and pads on the left;
mobius' own Mamba-2 runs in its ssm task, whose graph takes no mask at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius import TARGET
from onboard.targets.mobius import plan as mobius_plan
from onboard.targets.mobius.plan import STYLE
from tests.new_types import default_config_dir
from tests.targets.mobius.sabotage import config_classes


def test_mamba2_re_onboards_as_one_mixer_block_a_layer(tmp_path: Path) -> None:
    folder = default_config_dir("mamba2", tmp_path / "models")
    result = onboard_new(NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = {c.name: c for c in report.checks if c.provider == "default"}
    assert all(c.status is Status.PASS for c in default.values()), default
    assert "2 layers (conv_state, ssm_state) after the prefill and 3 decode steps" in (
        default["states"].detail
    )
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    text += config_classes(result)
    assert "class Mamba2Mixer(nn.Module)" in text  # not Mamba2Mamba2
    assert "[Mamba2MixerDecoderLayer(config) for _ in range(config.num_hidden_layers)]" in text
    assert "AttentionDecoderLayer" not in text and "create_attention_bias" not in text
    assert 'default_task = "hybrid-text-generation"' in text
    assert "mamba_n_heads=config.num_heads" in text
    design = TARGET.design(result.analysis.spec, result.proposal)
    entry = mobius_plan.test_config_entry(design, result.analysis.spec)
    assert '"layer_types": ["mamba2"]' in entry and "attn_" not in entry


def test_mobius_own_mamba2_passes_where_its_graph_can_be_run(tmp_path: Path) -> None:
    """mobius' Mamba2CausalLMModel builds its ssm task (past_states.* inputs, no mask): parity
    feeds its states and says why left padding cannot be tested, instead of blaming mobius."""
    folder = default_config_dir("mamba2", tmp_path / "models")
    result = onboard_new(NewOptions(model=str(folder), out=tmp_path / "out"))
    assert result.proposal.already_supported is not None and result.plan is None
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    left = next(c for c in report.checks if c.name == "pad-left" and c.provider == "default")
    assert (left.status, left.detail) == (Status.SKIP, "the graph takes no attention_mask")
    states = next(c for c in report.checks if c.name == "states" and c.provider == "default")
    assert states.status is Status.PASS


def _onboarded(tmp_path: Path, model_type: str, **options):
    folder = default_config_dir(model_type, tmp_path / "models")
    return onboard_new(
        NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out", **options)
    )


@pytest.mark.parametrize(
    ("model_type", "component", "own_lines"),
    [
        ("mamba", "MambaMixer", ("mamba_dt_rank=config.time_step_rank",)),
        # FalconMamba normalises dt, B and C without weights (its norms hold dummy buffers)
        (
            "falcon_mamba",
            "FalconMambaMixer",
            ("mamba_norm_eps=config.mixer_rms_eps", "dt, b, c = self._rms(op, dt)"),
        ),
    ],
)
def test_mamba_re_onboards_with_a_whole_prompt_scan(
    tmp_path: Path, model_type: str, component: str, own_lines: tuple[str, ...]
) -> None:
    """Mamba (the first): the generated mixer scans the prompt in one LinearAttention (one head
    per channel, a decay per state entry), not mobius' MambaBlock, which takes one token (M9)."""
    result = _onboarded(tmp_path, model_type)
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = {c.name: c for c in report.checks if c.provider == "default"}
    assert all(c.status is Status.PASS for c in default.values()), default
    assert (
        "(conv_state, ssm_state) after the prefill and 3 decode steps" in default["states"].detail
    )
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    text += config_classes(result)
    assert f"class {component}(nn.Module)" in text and "MambaBlock(" not in text
    assert "mamba_expand=config.intermediate_size // config.hidden_size" in text
    assert all(line in text for line in own_lines), own_lines


def test_mamba_with_one_decay_per_channel_fails(tmp_path: Path) -> None:
    """Each state entry of a channel decays at its own rate (A is channels x state): one rate
    per channel, as Mamba-2 has per head, computes something else."""
    from tests.targets.mobius.sabotage import parity_with

    result = _onboarded(tmp_path, "mamba", parity=False)
    report = parity_with(
        result,
        "op.Neg(op.Exp(self.A_log))",
        "op.ReduceMean(op.Neg(op.Exp(self.A_log)), [1], keepdims=1)",
    )
    checks = {c.name: c for c in report.checks if c.provider == "default"}
    assert checks["weights"].status is Status.PASS
    assert checks["prefill"].status is Status.FAIL
