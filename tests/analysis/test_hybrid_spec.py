"""Hybrids: the recurrent mixer of each layer kind is read, cited and proved by the spec check."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.features import feature_values
from onboard.analysis.layout import llama_view
from onboard.analysis.spec_check import check_spec
from onboard.analysis.width_rule import evaluate_width, read_width_rule, vetted
from onboard.hf_config import make_hf_config
from onboard.source import SourceFile, load_source
from onboard.tiny import shrink_config
from onboard.tiny_model import build_tiny_model, perturb
from tests.analyses import analysis_of
from tests.hub_cache import fixture_config

LFM2 = "LiquidAI/LFM2-1.2B"


def _check(analysis, text):
    """The spec check as the analysis runs it: on the Llama-layout view of the tiny model."""
    config = make_hf_config(analysis.tiny.config)
    model = build_tiny_model(config)
    view = llama_view(model)
    return check_spec(text, perturb(view.model if view else model), config)


def test_lfm2_reads_its_short_convolution_and_every_layer_kind() -> None:
    spec = analysis_of(LFM2).spec
    text = spec.text
    real = json.loads(fixture_config(LFM2).read_text())
    assert spec.kind == "hybrid"
    assert spec.unresolved == ()
    attending = [i for i, kind in enumerate(text.layer_types) if kind == "full_attention"]
    assert attending == real["full_attn_idxs"]
    assert set(text.layer_types) == {"full_attention", "short_conv"}
    assert text.mixer_labels == (("conv", "short_conv"),)
    conv = text.mixers.short_conv
    assert (conv.conv_kernel, conv.conv_kernel_key) == (real["conv_L_cache"], "conv_L_cache")
    assert (conv.bias, conv.bias_key) == (False, "conv_bias")
    assert conv.order[1] == "c" and set(conv.order) == {"b", "c", "x"}
    evidence = spec.evidence_for("text.mixers.short_conv")
    assert any(e.where.startswith("modeling_lfm2.py:") for e in evidence)
    assert feature_values(spec)["layers.mixers"] == "short_conv"
    assert [k for k, _ in text.rope] == ["full_attention"]  # convolutions do not rotate


def test_lfm2_mlp_width_is_hf_rule_not_the_config_key() -> None:
    text = analysis_of(LFM2).spec.text
    assert text.mlp.projections == ("w1", "w3", "w2")  # w2(silu(w1 x) * w3 x)
    assert text.mlp.activation_key is None  # the code fixes F.silu; the config has no key
    # block_ff_dim 12288 -> two thirds, x1.0, a multiple of 256
    assert text.mlp.intermediate_size == 8192
    assert text.mlp.width_code is not None


def test_wrong_gate_order_points_at_the_convolution() -> None:
    analysis = analysis_of(LFM2)
    text = analysis.spec.text
    assert _check(analysis, text) == ()
    wrong = dataclasses.replace(text.mixers.short_conv, order=("c", "b", "x"))
    deltas = _check(
        analysis,
        dataclasses.replace(text, mixers=dataclasses.replace(text.mixers, short_conv=wrong)),
    )
    assert deltas and "Lfm2ShortConv computes something" in deltas[0].what


def test_wrong_kernel_makes_the_check_fail() -> None:
    analysis = analysis_of(LFM2)
    text = analysis.spec.text
    wrong = dataclasses.replace(text.mixers.short_conv, conv_kernel=2)
    mixers = dataclasses.replace(text.mixers, short_conv=wrong)
    assert _check(analysis, dataclasses.replace(text, mixers=mixers))


def test_hybrid_tiny_config_keeps_an_attention_layer_first() -> None:
    real = json.loads(fixture_config(LFM2).read_text())
    kinds = ["full_attention" if i in real["full_attn_idxs"] else "conv" for i in range(16)]
    tiny = shrink_config(real, kinds)
    assert tiny.config["layer_types"] == ["full_attention", "conv"]
    assert tiny.layer_indices == (2, 0)  # the real layers they stand for


class TestWidthRule:
    FILE = SourceFile(
        "modeling_x.py",
        Path("modeling_x.py"),
        "",
        "class XMLP:\n"
        "    def __init__(self, config):\n"
        "        inner = config.intermediate_size\n"
        "        if config.auto:\n"
        "            inner = int(2 * inner / 3)\n"
        "        self.up = nn.Linear(config.hidden_size, inner)\n"
        "        self.down = nn.Linear(inner, config.hidden_size)\n",
    )

    def test_statements_before_the_linears_are_read_and_run(self) -> None:
        rule = read_width_rule([self.FILE], "XMLP", "down")
        assert rule is not None and rule.evidence.where == "modeling_x.py:3-5"
        config = type("C", (), {"intermediate_size": 300, "auto": True})()
        assert evaluate_width(rule.code, config) == 200

    def test_reading_twice_reads_the_same(self) -> None:
        """The parsed source is cached and shared: reading a rule must not edit it."""
        rules = [read_width_rule([self.FILE], "XMLP", "down") for _ in range(2)]
        assert rules[0] is not None and rules[1] == rules[0]

    @pytest.mark.parametrize(
        "code",
        [
            "width = __import__('os').system('true')",
            "width = config.__class__.__init__",
            "width = open('x')",
            "width = (lambda: 3)()",
            "other = 3\nwidth = other",
            "width = config.a.b",
        ],
    )
    def test_anything_but_arithmetic_over_the_config_is_refused(self, code: str) -> None:
        assert not vetted(ast.parse(code))
        with pytest.raises(ValueError, match="not arithmetic"):
            evaluate_width(code, object())


def _tiny_mixer(model_type: str, layer: int, attribute: str, *, family: str = "", **config):
    """A perturbed tiny HF model's mixer, with the HF modeling file it comes from (the
    ``family``'s where the model type shares one: qwen3_5_text is in qwen3_5's)."""
    import transformers

    from onboard.source import SourceFile

    model = perturb(build_tiny_model(make_hf_config({"model_type": model_type, **config})))
    family = family or model_type
    folder = Path(transformers.__file__).parent / "models" / family
    files = [SourceFile.read(folder / f"modeling_{family}.py")]
    base = model.model if hasattr(model, "model") else model.backbone  # Mamba: backbone
    return model, base.layers[layer].get_submodule(attribute), files


_SMALL = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2}
_SMALL |= {"num_key_value_heads": 1, "vocab_size": 256, "max_position_embeddings": 128}


@pytest.mark.parametrize(
    ("model_type", "attribute", "config", "norm_groups", "keys"),
    [
        (
            "bamba",
            "mamba",
            {"num_hidden_layers": 2, "attn_layer_indices": [0], "mamba_n_heads": 8},
            1,  # BambaRMSNormGated spans every channel
            {"num_heads": "mamba_n_heads", "groups": "mamba_n_groups", "norm_eps": "rms_norm_eps"},
        ),
        (
            "nemotron_h",
            "mixer",
            {
                "hybrid_override_pattern": "*M-",
                "num_hidden_layers": 3,
                "mamba_num_heads": 8,
                "mamba_head_dim": 16,
                "ssm_state_size": 16,
                "head_dim": 32,
            },
            8,  # Zamba2RMSNormGated: within each of n_groups (8 by default) groups
            {
                "num_heads": "mamba_num_heads",
                "time_step_min": "time_step_min",
                "proj_bias": "use_bias",
            },
        ),
    ],
)
def test_mamba2_mixers_are_read_with_their_keys(
    model_type, attribute, config, norm_groups, keys
) -> None:
    from onboard.analysis.mixers import mamba2

    model, module, files = _tiny_mixer(model_type, 1, attribute, **_SMALL, **config)
    reading = mamba2.read(attribute, module, model.config, files)
    assert reading is not None and reading.deltas == ()
    spec = reading.spec
    assert spec.norm_groups == norm_groups
    assert {k: spec.key(k) for k in keys} == keys
    assert {"A_log", "D", "dt_bias", "conv1d.weight", "norm.weight"} <= set(reading.parameters)
    assert any(e.where.startswith(f"modeling_{model_type}.py:") for e in reading.evidence)


def test_mamba2_compute_follows_hf_and_a_wrong_reading_does_not() -> None:
    import torch

    from onboard.analysis.mixers import mamba2

    model, module, files = _tiny_mixer(
        "bamba", 1, "mamba", **_SMALL, num_hidden_layers=2, attn_layer_indices=[0],
        mamba_n_heads=8, mamba_n_groups=2, mamba_chunk_size=4,
    )  # fmt: skip
    spec = mamba2.read("mamba", module, model.config, files).spec
    weights = dict(module.named_parameters())
    x = torch.randn(2, 13, 64, generator=torch.Generator().manual_seed(3))  # three chunks
    with torch.no_grad():
        want = module(x)
        assert torch.allclose(mamba2.compute(spec, weights.get, "", x), want, atol=1e-5)
        for wrong in (
            dataclasses.replace(spec, norm_groups=2),
            dataclasses.replace(spec, activation="relu"),
        ):
            got = mamba2.compute(wrong, weights.get, "", x)
            assert not torch.allclose(got, want, atol=1e-3)


def test_hybrid_specs_survive_json(tmp_path) -> None:
    from onboard.spec import ArchitectureSpec
    from tests.new_types import default_config_dir

    bamba = default_config_dir("bamba", tmp_path, attn_layer_indices=[1], num_hidden_layers=4)
    for spec in (analysis_of(LFM2).spec, analyse(load_source(str(bamba))).spec):
        assert spec.text.mixers.in_use() and spec.unresolved == ()
        assert ArchitectureSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("model_type", "layer", "attribute", "config", "norms", "keys"),
    [
        (
            "jamba",
            1,
            "mamba",
            {"num_hidden_layers": 2, "attn_layer_period": 2, "attn_layer_offset": 0},
            True,  # Jamba's dt_layernorm, b_layernorm, c_layernorm
            {"state_size": "mamba_d_state", "dt_rank": "mamba_dt_rank", "inner": None},
        ),
        (
            "mamba",
            0,
            "mixer",
            {"num_hidden_layers": 2},
            False,
            {"state_size": "state_size", "dt_rank": "time_step_rank", "inner": "intermediate_size"},
        ),
    ],
)
def test_mamba1_mixers_are_read_and_computed(model_type, layer, attribute, config, norms, keys):
    """Jamba's width is mamba_expand x hidden_size, a product: no one key is recorded for it."""
    import torch

    from onboard.analysis.mixers import mamba

    model, module, files = _tiny_mixer(
        model_type, layer, attribute, **_SMALL, **config, expert_layer_period=4,
        expert_layer_offset=3, mamba_dt_rank=8, time_step_rank=8,
    )  # fmt: skip
    reading = mamba.read(attribute, module, model.config, files)
    assert reading is not None and reading.deltas == ()
    assert reading.spec.norms is norms
    assert {k: reading.spec.key(k) for k in keys} == keys
    weights = dict(module.named_parameters())
    x = torch.randn(2, 11, 64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = module(x)
        assert torch.allclose(mamba.compute(reading.spec, weights.get, "", x), want, atol=1e-5)
        wrong = dataclasses.replace(reading.spec, activation="relu")
        assert not torch.allclose(mamba.compute(wrong, weights.get, "", x), want, atol=1e-3)


def test_nemotron_h_layers_are_one_block_each(tmp_path) -> None:
    """NemotronH keeps one norm and one block (attention, Mamba-2 or an MLP) in each layer:
    the spec says so, and each layer's kind comes from what its block holds."""
    from onboard.block_specs import BlockLayout
    from tests.new_types import nemotron_nano_dir

    analysis = analyse(load_source(str(nemotron_nano_dir(tmp_path))))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert text.blocks == BlockLayout("norm", "mixer")
    pattern = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
    kinds = {"M": "mamba2", "-": "mlp", "*": "full_attention"}
    assert text.layer_types == tuple(kinds[c] for c in pattern)
    assert dict(text.mixer_labels) == {"linear_attention": "mamba2", "mlp": "mlp"}
    mamba2 = text.mixers.mamba2
    assert mamba2.attribute == "mixer" and mamba2.norm_groups == mamba2.groups > 1
    assert text.mlp.kind == "plain" and text.mlp.activation_key == "mlp_hidden_act"
    assert [text.feed_forward_of(k, i) for i, k in enumerate(text.layer_types[:3])] == [
        None,
        "dense",
        None,
    ]
    # saved under backbone. (HF's conversion mapping); renamed before the layout's own names
    assert analysis.spec.weights.renames[0] == ("backbone.", "model.")


def test_a_wrong_one_block_mlp_fails_the_check(tmp_path) -> None:
    from tests.new_types import nemotron_nano_dir

    analysis = analyse(load_source(str(nemotron_nano_dir(tmp_path))))
    text = analysis.spec.text
    assert _check(analysis, text) == ()
    wrong = dataclasses.replace(text, mlp=dataclasses.replace(text.mlp, activation="silu"))
    found = _check(analysis, wrong)
    assert found and "model.layers.2.mlp" in found[0].detail
    assert found[0].where.startswith("modeling_nemotron_h.py:")


def test_nemotron_h_experts_without_a_gate_are_read_and_proved(tmp_path) -> None:
    """transformers' default NemotronH: one-block MoE layers whose routed and shared experts
    are up, activation, down; the shared width has a key of its own."""
    from tests.new_types import default_config_dir

    folder = default_config_dir("nemotron_h", tmp_path)
    analysis = analyse(load_source(str(folder)))
    text = analysis.spec.text
    assert analysis.spec.unresolved == ()
    assert set(text.layer_types) == {"mamba2", "moe", "full_attention", "mlp"}
    moe = text.moe
    assert moe.plain and moe.activation == "relu2"
    assert moe.shared.plain and moe.shared.width_expr == "moe_shared_expert_intermediate_size"
    assert moe.router.correction_bias and moe.router.scoring == "sigmoid"
    assert _check(analysis, text) == ()
    gated = dataclasses.replace(text, moe=dataclasses.replace(moe, plain=False))
    assert _check(analysis, gated)
    silu = dataclasses.replace(text, moe=dataclasses.replace(moe, activation="silu"))
    assert _check(analysis, silu)


QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"


def test_qwen3_next_reads_gated_deltanet_and_gated_attention() -> None:
    spec = analysis_of(QWEN3_NEXT).spec
    text = spec.text
    assert spec.kind == "hybrid_moe" and spec.unresolved == ()
    assert dict(text.mixer_labels) == {"linear_attention": "gated_deltanet"}
    deltanet = text.mixers.gated_deltanet
    assert deltanet.projections == "grouped" and deltanet.attribute == "linear_attn"
    # read on the tiny layer, each size with the config key HF reads it from: the real ones
    real = json.loads(fixture_config(QWEN3_NEXT).read_text())
    assert (
        (deltanet.key_heads, deltanet.value_heads)
        == (16, 32)
        == (
            real["linear_num_key_heads"],
            real["linear_num_value_heads"],
        )
    )
    assert (deltanet.key_head_dim, deltanet.value_head_dim) == (128, 128)
    assert deltanet.key("value_heads") == "linear_num_value_heads"
    assert deltanet.key("norm_eps") == "rms_norm_eps"
    assert deltanet.l2_eps == 1e-6
    assert text.attention.output_gate and text.attention.qk_norm == "per_head"
    assert text.norm.weight_offset == 1.0
    cited = [e.where for e in spec.evidence_for("text.attention.output_gate")]
    assert any(w.startswith("modeling_qwen3_next.py:") for w in cited)
    ungated = dataclasses.replace(text.attention, output_gate=False)
    assert _check(analysis_of(QWEN3_NEXT), dataclasses.replace(text, attention=ungated))


def test_gated_deltanet_compute_follows_hf_and_a_wrong_reading_does_not() -> None:
    """HF runs its chunked rule on a prompt longer than a chunk (64); the spec's recurrence
    step by step must agree, and a wrong layout, epsilon or head sharing must not."""
    import torch

    from onboard.analysis.mixers import gated_deltanet

    model, module, files = _tiny_mixer(
        "qwen3_next", 1, "linear_attn", **_SMALL, num_hidden_layers=2,
        layer_types=["full_attention", "linear_attention"], linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=24,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
    )  # fmt: skip
    reading = gated_deltanet.read("linear_attn", module, model.config, files)
    assert reading is not None and reading.deltas == ()
    spec = reading.spec
    assert {"A_log", "dt_bias", "in_proj_qkvz.weight", "conv1d.weight"} <= set(reading.parameters)
    weights = dict(module.named_parameters())
    x = torch.randn(2, 70, 64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = module(x)
        assert torch.allclose(gated_deltanet.compute(spec, weights.get, "", x), want, atol=1e-5)
        for wrong in (
            dataclasses.replace(spec, projections="separate"),
            dataclasses.replace(spec, key_heads=4, key_head_dim=8),
            dataclasses.replace(spec, activation="relu"),
        ):
            try:
                got = gated_deltanet.compute(wrong, weights.get, "", x)
            except (KeyError, TypeError, RuntimeError):
                continue  # a layout whose tensors are not there fails outright
            assert not torch.allclose(got, want, atol=1e-3)


def test_qwen3_5_separate_projections_are_read() -> None:
    """Qwen3.5 keeps q/k/v, z, b and a in four linears."""
    from onboard.analysis.mixers import gated_deltanet

    model, module, files = _tiny_mixer(
        "qwen3_5_text", 1, "linear_attn", family="qwen3_5", **_SMALL, num_hidden_layers=2,
        layer_types=["full_attention", "linear_attention"], linear_num_key_heads=2,
        linear_num_value_heads=2, linear_key_head_dim=16, linear_value_head_dim=24,
    )  # fmt: skip
    reading = gated_deltanet.read("linear_attn", module, model.config, files)
    assert reading is not None and reading.deltas == ()
    assert reading.spec.projections == "separate"
    assert reading.spec.key("key_heads") == "linear_num_key_heads"


def test_mamba2_is_a_state_space_model_without_attention_or_mlp(tmp_path) -> None:
    """Mamba-2 (Codestral's config is transformers' default): every layer is one Mamba-2
    block after a norm; the spec holds no attention and no MLP, and the check proves it."""
    from onboard.block_specs import BlockLayout
    from onboard.spec import ArchitectureSpec
    from tests.new_types import default_config_dir

    analysis = analyse(load_source(str(default_config_dir("mamba2", tmp_path))))
    spec, text = analysis.spec, analysis.spec.text
    assert spec.kind == "ssm" and spec.unresolved == ()
    assert text.attention is None and text.mlp is None and text.rope == ()
    assert set(text.layer_types) == {"mamba2"} and len(text.layer_types) == 64
    assert text.blocks == BlockLayout("norm", "mixer")
    assert (text.norm.placement, text.norm.eps_key) == ("pre", "layer_norm_epsilon")
    mamba2 = text.mixers.mamba2
    assert (mamba2.num_heads, mamba2.head_dim, mamba2.groups) == (128, 64, 8)  # the real sizes
    assert mamba2.key("num_heads") == "num_heads" and mamba2.key("groups") == "n_groups"
    # the tiny model's heads split its width, and its chunks are shorter than the prompt
    assert analysis.tiny.config["num_heads"] * analysis.tiny.config["head_dim"] == 2 * 96
    assert analysis.tiny.config["chunk_size"] == 4
    assert "num_attention_heads" not in analysis.tiny.config
    values = feature_values(spec)
    assert (values["attention.kind"], values["mlp.kind"], values["attention.qk_norm"]) == (
        "none",
        "none",
        None,
    )
    assert ArchitectureSpec.from_json(spec.to_json()) == spec
