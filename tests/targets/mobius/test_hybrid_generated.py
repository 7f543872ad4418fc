"""A hybrid mobius 0.1.0 lacks (LFM2: short convolutions beside attention), onboarded for real.

Parity compares the recurrent states after the prefill and every decode step, and pads on the
left; a generated module that gates the wrong third, turns the kernel around or lets padded
positions into the state fails it.
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
from tests.hub_cache import fixture_config
from tests.new_types import default_config_dir
from tests.targets.mobius.sabotage import config_classes, parity_with

LFM2 = "LiquidAI/LFM2-1.2B"


def _new(out: Path, **options):
    return onboard_new(NewOptions(model=str(fixture_config(LFM2).parent), out=out, **options))


def test_lfm2_onboards_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path / "out")
    assert result.proposal.already_supported is None  # mobius 0.1.0 has no lfm2
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = {c.name: c for c in report.checks if c.provider == "default"}
    assert set(default) == {"weights", "prefill", "decode", "states", "pad-left", "pad-right"}
    assert all(c.status is Status.PASS for c in default.values())
    assert "(conv_state, key, value) after the prefill and 3 decode steps" in (
        default["states"].detail
    )
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    text += config_classes(result)
    assert 'default_task = "hybrid-text-generation"' in text
    assert "short_conv_kernel=config.conv_L_cache" in text
    assert "intermediate_size=cls._mlp_width(config)" in text
    # mobius' own build tests read the kinds from the entry: one layer of each, mobius' words
    design = TARGET.design(result.analysis.spec, result.proposal)
    entry = mobius_plan.test_config_entry(design, result.analysis.spec)
    assert '"layer_types": ["full_attention", "conv"]' in entry
    assert '"num_hidden_layers": 2' in entry


def _sabotaged(tmp_path: Path, old: str, new: str):
    """The generated module with one line broken, through parity."""
    report = parity_with(_new(tmp_path / "out", parity=False), old, new)
    return {c.name: c for c in report.checks if c.provider == "default"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("b, c, x = op.Split(", "c, b, x = op.Split("),  # gates with the wrong third
        # the kernel turned around: the taps read the window the wrong way
        (
            "inputs = [window, self.weight]",
            "inputs = [window, op.Slice(self.weight, [-1], [-(2**62)], [2], [-1])]",
        ),
    ],
    ids=["gate-order", "kernel-reversed"],
)
@pytest.mark.slow
def test_a_wrong_convolution_fails_parity(tmp_path: Path, old: str, new: str) -> None:
    checks = _sabotaged(tmp_path, old, new)
    assert checks["weights"].status is Status.PASS
    assert checks["prefill"].status is Status.FAIL
    assert checks["decode"].status is Status.FAIL


def test_padding_leaking_into_the_state_fails_left_padding(tmp_path: Path) -> None:
    checks = _sabotaged(
        tmp_path,
        "self.in_proj(op, op.Mul(hidden_states, keep))",
        "self.in_proj(op, hidden_states)",
    )
    assert checks["prefill"].status is Status.PASS  # one unpadded row: nothing to leak
    assert checks["pad-left"].status is Status.FAIL


# Bamba's default config has no attention layer; two of eight attend here. Mamba-2 layers then
# come from the generated component, not mobius' Mamba2Block (it ignores the padding mask) nor
# its BambaConfig (it reads transformers-5 full_attention as Mamba-2).
BAMBA = {"attn_layer_indices": [2, 5], "num_hidden_layers": 8}


def test_bamba_re_onboards_with_its_own_mamba2_component(tmp_path: Path) -> None:
    folder = default_config_dir("bamba", tmp_path / "models", **BAMBA)
    result = onboard_new(NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = {c.name: c for c in report.checks if c.provider == "default"}
    assert all(c.status is Status.PASS for c in default.values())
    assert "(conv_state, key, ssm_state, value)" in default["states"].detail
    assert default["pad-left"].status is Status.PASS  # padded positions kept out of the state
    text = (result.root / result.plan.model_file).read_text() + config_classes(result)
    assert "class BambaMamba2(nn.Module)" in text and "Mamba2Block(" not in text
    assert "mamba_n_heads=config.mamba_n_heads" in text


def test_bamba_without_the_d_skip_fails(tmp_path: Path) -> None:
    folder = default_config_dir("bamba", tmp_path / "models", **BAMBA)
    result = onboard_new(
        NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out", parity=False)
    )
    module = result.root / result.plan.model_file
    text = module.read_text()
    old = "y = op.Add(y, op.Reshape(skip, [0, 0, self.inner]))"
    assert old in text
    module.write_text(text.replace(old, "", 1))
    report = TARGET.parity(
        result.analysis, result.proposal, (module, result.plan.model_class), result.library
    )
    checks = {c.name: c for c in report.checks if c.provider == "default"}
    assert checks["prefill"].status is Status.FAIL


def test_mobius_own_bamba_fails_and_is_named_the_culprit(tmp_path: Path) -> None:
    """mobius 0.1.0 reads transformers-5 ``full_attention`` as Mamba-2 (hybrid notes, M3): its
    own Bamba builds the attention layer as Mamba-2, which parity shows as weights no parameter
    takes; the report blames mobius' class, not generated code (there is none)."""
    from rich.console import Console

    from onboard.report import print_new

    folder = default_config_dir("bamba", tmp_path / "models", **BAMBA)
    result = onboard_new(NewOptions(model=str(folder), out=tmp_path / "out"))
    assert result.proposal.already_supported is not None and result.plan is None
    weights = next(c for c in result.parity.checks if c.name == "weights")
    assert weights.status is Status.FAIL
    assert "self_attn.q_proj.weight (from model.layers.0.self_attn.q_proj.weight) fills no" in (
        weights.detail
    )
    console = Console(record=True, width=200)
    print_new(result, console)
    assert "the library's own BambaCausalLMModel computes something else" in console.export_text()


def test_nemotron_h_re_onboards_with_one_block_layers(tmp_path: Path) -> None:
    """Each generated layer names its one block for its kind, as mobius' own NemotronH does
    (HF calls every one mixer): the generated preprocess_weights renames them by layer."""
    from tests.new_types import nemotron_nano_dir

    folder = nemotron_nano_dir(tmp_path / "models")
    result = onboard_new(NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = {c.name: c for c in report.checks if c.provider == "default"}
    assert all(c.status is Status.PASS for c in default.values())
    assert "(conv_state, key, ssm_state, value)" in default["states"].detail
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    text += config_classes(result)
    for layer in ("Mamba2DecoderLayer", "AttentionDecoderLayer", "MLPDecoderLayer"):
        assert f"class NemotronH{layer}(nn.Module)" in text
    assert (
        "self.self_attn = Attention(config)" in text and "self.mlp = NemotronHMLP(config)" in text
    )
    assert "self.mamba = NemotronHMamba2(config)" in text
    assert '("backbone.", "model."),' in text
    assert "state_dict = _name_blocks(state_dict, self.config.layer_types)" in text
    assert "hidden_act=config.mlp_hidden_act" in text
    design = TARGET.design(result.analysis.spec, result.proposal)
    entry = mobius_plan.test_config_entry(design, result.analysis.spec)
    assert '"layer_types": ["full_attention", "mamba2", "mlp"]' in entry


def test_nemotron_h_without_the_mlp_residual_fails(tmp_path: Path) -> None:
    from tests.new_types import nemotron_nano_dir

    folder = nemotron_nano_dir(tmp_path / "models")
    result = onboard_new(
        NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out", parity=False)
    )
    old = "return op.Add(hidden_states, mixed), (None, None)"
    report = parity_with(result, old, "return mixed, (None, None)")
    checks = {c.name: c for c in report.checks if c.provider == "default"}
    assert checks["prefill"].status is Status.FAIL


def test_nemotron_h_blocks_named_for_the_wrong_kind_fail_the_weights(tmp_path: Path) -> None:
    from tests.new_types import nemotron_nano_dir

    folder = nemotron_nano_dir(tmp_path / "models")
    result = onboard_new(
        NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out", parity=False)
    )
    report = parity_with(result, '"mlp": "mlp"', '"mlp": "mamba"')
    weights = next(c for c in report.checks if c.name == "weights")
    assert weights.status is Status.FAIL


def test_mobius_own_nemotron_h_fails_and_is_named_the_culprit(tmp_path: Path) -> None:
    """mobius 0.1.0's NemotronHConfig keeps transformers-5 ``linear_attention`` for Mamba-2
    layers, and its cache builder then asks for DeltaNet sizes (hybrid notes, M5)."""
    from rich.console import Console

    from onboard.report import print_new
    from tests.new_types import nemotron_nano_dir

    folder = nemotron_nano_dir(tmp_path / "models")
    result = onboard_new(NewOptions(model=str(folder), out=tmp_path / "out"))
    assert result.proposal.already_supported is not None and result.plan is None
    build = next(c for c in result.parity.checks if c.name == "build")
    assert build.status is Status.FAIL and "Linear-attention cache inputs" in build.detail
    console = Console(record=True, width=200)
    print_new(result, console)
    assert "the library's own NemotronHCausalLMModel computes something else" in (
        console.export_text()
    )


def test_nemotron_h_with_experts_re_onboards(tmp_path: Path) -> None:
    """transformers' default NemotronH: Mamba-2, MoE (experts and a shared expert without a
    gate), attention and MLP layers, one block each."""
    folder = default_config_dir("nemotron_h", tmp_path / "models")
    result = onboard_new(NewOptions(model=str(folder), treat_as_new=True, out=tmp_path / "out"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    assert all(c.status is not Status.FAIL for c in report.checks)
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    text += config_classes(result)
    assert "self.moe = NemotronHMoELayer(config, gate=gate)" in text
    assert "shared_expert_intermediate_size=config.moe_shared_expert_intermediate_size" in text
    broken = parity_with(result, "return op.Add(routed, shared)", "return routed")
    checks = {c.name: c for c in broken.checks if c.provider == "default"}
    assert checks["prefill"].status is Status.FAIL


JAMBA = "ai21labs/AI21-Jamba-1.5-Mini"


def test_jamba_re_onboards_with_its_own_mamba_component(tmp_path: Path) -> None:
    """Jamba: Mamba (the first, with dt/B/C norms) beside attention without RoPE, experts every
    expert_layer_period-th layer, routed in the block (softmax, top-k, not renormalised)."""
    model = str(fixture_config(JAMBA).parent)
    result = onboard_new(NewOptions(model=model, treat_as_new=True, out=tmp_path / "out"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = {c.name: c for c in report.checks if c.provider == "default"}
    assert all(c.status is Status.PASS for c in default.values()), default
    assert "(conv_state, key, ssm_state, value)" in default["states"].detail
    moe = result.analysis.spec.text.moe
    assert moe.dense_rule == "expert_layer_period"
    assert (moe.router.order, moe.router.renormalize) == ("softmax_topk", False)
    module = result.root / result.plan.model_file
    text = module.read_text()
    assert lint_python(text, filename=module.name, style=STYLE) == ""
    text += config_classes(result)
    assert "return index % config.expert_layer_period == config.expert_layer_offset" in text
    assert "self.dt_layernorm = RMSNorm(self.dt_rank, eps=config.mamba_norm_eps)" in text
    assert "mamba_expand=config.mamba_expand" in text and "MambaBlock(" not in text
    assert "rope_type=None" in text  # Jamba's attention has no RoPE


def test_mobius_own_jamba_fails_and_is_named_the_culprit(tmp_path: Path) -> None:
    """mobius 0.1.0's MambaBlock takes one token (hybrid notes, M9): its own Jamba fails the
    prefill, and the report blames mobius' class."""
    from rich.console import Console

    from onboard.report import print_new

    model = str(fixture_config(JAMBA).parent)
    result = onboard_new(NewOptions(model=model, out=tmp_path / "out"))
    assert result.proposal.already_supported is not None and result.plan is None
    prefill = next(c for c in result.parity.checks if c.name == "prefill")
    assert prefill.status is Status.FAIL
    console = Console(record=True, width=200)
    print_new(result, console)
    assert "the library's own JambaCausalLMModel computes something else" in console.export_text()
