"""The architecture's boolean flags in generated mobius code: read from the config where the
generated code can follow them (proved by parity with the flags flipped), refused by the
generated config where it cannot."""

from __future__ import annotations

import pytest

from onboard.errors import UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.spec import FlagSpecs
from onboard.targets.mobius import TARGET, _import_file
from onboard.targets.mobius.flag_settings import settings_reading_flags
from onboard.targets.mobius.settings import Setting
from tests.hub_cache import fixture_config
from tests.new_types import default_config_dir
from tests.targets.mobius.sabotage import broken_module, config_classes


def _flag(result, key: str):
    return next(f for f in result.analysis.spec.flags if f.key == key)


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    model = str(fixture_config("Qwen/Qwen3-0.6B").parent)
    out = tmp_path_factory.mktemp("qwen3") / "out"
    return onboard_new(NewOptions(model=model, treat_as_new=True, out=out))


def test_qwen3_reads_its_sliding_window_flag(qwen3) -> None:
    """Qwen3-0.6B sets use_sliding_window false; the architecture slides from
    max_window_layers on when a checkpoint sets it, so the generated config reads both."""
    flag = _flag(qwen3, "use_sliding_window")
    assert flag.value is False
    assert ("attention.sliding_window", "none", "per_layer") in flag.switches
    assert any(e.where.startswith("configuration_qwen3.py:") for e in flag.evidence)
    text = (qwen3.root / qwen3.plan.model_file).read_text()
    assert "is generated for" not in text  # no flag refused
    # mobius' base config reads the window and the layer kinds the same way: left to it
    config_text = config_classes(qwen3)
    assert "def from_transformers" in config_text
    assert "sliding_window=" not in config_text and "layer_types=" not in config_text
    module = _import_file(qwen3.root / qwen3.plan.model_file)
    hf = make_hf_config({**qwen3.source.config, "use_sliding_window": True, "layer_types": None})
    hf.max_window_layers, hf.sliding_window = 0, 64
    hf.layer_types = ["sliding_attention"] * hf.num_hidden_layers
    config = module.Qwen3Config.from_transformers(hf)
    assert config.sliding_window == 64 and "sliding_attention" in config.layer_types
    report = qwen3.parity
    assert report.passed
    flipped = [c for c in report.checks if c.name.endswith("+")]
    assert {c.name for c in flipped} >= {"prefill+", "decode+", "weights+"}
    assert all(c.status is not Status.FAIL for c in flipped)
    assert not any("unproved" in notice for notice in qwen3.source.notices)  # parity proved it


def test_qwen3_code_that_ignores_the_window_fails_with_the_flag_on(qwen3, tmp_path) -> None:
    broken = broken_module(qwen3, tmp_path)
    patch = broken.parents[3] / "onboard.patch"
    patch.write_text(with_setting(patch.read_text(), "sliding_window=None", line="+"))
    variant = qwen3.analysis.variants[0]
    assert "use_sliding_window" in {key for key, _ in variant.flagged_from.single}
    generated = (broken, qwen3.plan.model_class)
    flipped = TARGET.parity(variant, qwen3.proposal, generated, qwen3.library)
    failed = {c.name for c in flipped.checks if c.status is Status.FAIL}
    assert {"prefill", "decode"} <= failed
    analysed = TARGET.parity(qwen3.analysis, qwen3.proposal, generated, qwen3.library)
    assert analysed.passed  # the checkpoint's own config cannot tell


@pytest.fixture(scope="module")
def stablelm(tmp_path_factory):
    root = tmp_path_factory.mktemp("stablelm")
    folder = default_config_dir("stablelm", root / "models")
    return onboard_new(NewOptions(model=str(folder), treat_as_new=True, out=root / "out"))


def test_stablelm_follows_its_residual_layout_qkv_bias_and_qk_norm(stablelm) -> None:
    report = stablelm.parity
    assert report.passed
    assert {"prefill+", "decode+"} <= {c.name for c in report.checks}
    flags = {f.key: f for f in stablelm.analysis.spec.flags}
    assert set(flags) == {"qk_layernorm", "use_parallel_residual", "use_qkv_bias"}
    assert flags["use_parallel_residual"].switches == (("norm.placement", "pre", "parallel"),)
    assert all(f.understood for f in flags.values())
    # StableLM keeps a LayerNorm per head (q_layernorm.norms.{h}): one weight row per head
    assert ("attention.qk_norm_each_head", "False", "True") in flags["qk_layernorm"].switches
    every = stablelm.analysis.variants[0].spec.text.attention
    assert every.qk_norm_head_modules == "norms"
    text = (stablelm.root / stablelm.plan.model_file).read_text()
    assert "attn_qk_norm=bool(config.qk_layernorm)" in config_classes(stablelm)
    assert "state_dict = _stack_head_norms(state_dict)" in text
    assert "self.use_parallel_residual = config.use_parallel_residual" in text
    module = _import_file(stablelm.root / stablelm.plan.model_file)
    config_class = next(
        v for k, v in vars(module).items() if k.endswith("Config") and k.startswith("StableLm")
    )
    hf = make_hf_config(stablelm.source.config)
    analysed = config_class.from_transformers(hf)
    assert (analysed.use_parallel_residual, analysed.attn_qkv_bias) == (False, False)
    hf.use_parallel_residual = hf.use_qkv_bias = hf.qk_layernorm = True
    flipped = config_class.from_transformers(hf)
    # the qkv bias is read by mobius' base config (no setting restates it), the rest here
    assert "attn_qkv_bias=" not in config_classes(stablelm)
    assert (flipped.use_parallel_residual, flipped.attn_qkv_bias, flipped.attn_qk_norm) == (
        True,
        True,
        True,
    )


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        # mobius' own q/k norms: one weight shared by the heads
        ("if config.attn_qk_norm:  # a weight per head, [heads, head_dim]", "if False:", "rows"),
        # the per-head weights left unstacked: nothing fills the norms' weights
        ("state_dict = _stack_head_norms(state_dict)", "pass", "stack"),
    ],
    ids=["shared-norm", "unstacked"],
)
def test_stablelm_qk_norm_left_out_fails_with_qk_layernorm(stablelm, tmp_path, old, new, why):
    module = stablelm.root / stablelm.plan.model_file
    text = module.read_text()
    assert old in text
    broken = broken_module(stablelm, tmp_path)
    broken.write_text(text.replace(old, new))
    variant = next(
        v for v in stablelm.analysis.variants if "qk_layernorm" in dict(v.flagged_from.single)
    )
    generated = (broken, stablelm.plan.model_class)
    flipped = TARGET.parity(variant, stablelm.proposal, generated, stablelm.library)
    assert not flipped.passed, why
    analysed = TARGET.parity(stablelm.analysis, stablelm.proposal, generated, stablelm.library)
    assert analysed.passed  # the default config has the flag off: only the flipped run tells


def test_stablelm_layer_that_ignores_the_flag_fails_with_it_flipped(stablelm, tmp_path) -> None:
    module = stablelm.root / stablelm.plan.model_file
    old = "self.use_parallel_residual = config.use_parallel_residual"
    broken = broken_module(stablelm, tmp_path)
    broken.write_text(module.read_text().replace(old, "self.use_parallel_residual = False"))
    variant = next(
        v
        for v in stablelm.analysis.variants
        if "use_parallel_residual" in dict(v.flagged_from.single)
    )
    generated = (broken, stablelm.plan.model_class)
    flipped = TARGET.parity(variant, stablelm.proposal, generated, stablelm.library)
    assert not flipped.passed
    failed = {c.name for c in flipped.checks if c.status is Status.FAIL}
    assert "weights" in failed  # the sequential layer's post-attention norm: nothing fills it


def with_setting(text: str, setting: str, line: str = "") -> str:
    """The config class's source with ``setting`` added to its ``from_transformers`` (``line``:
    what starts each of its lines, "+" in a patch)."""
    anchor = f"return dataclasses.replace(\n{line}            base,\n"
    assert anchor in text
    return text.replace(anchor, f"{anchor}{line}            {setting},\n", 1)


def _settings(**exprs: str) -> tuple[Setting, ...]:
    return tuple(Setting(field, expr, "why") for field, expr in exprs.items())


def _flags(single: dict[str, dict[str, str]]) -> FlagSpecs:
    # Specs stand in as keys of the settings table below.
    return FlagSpecs("analysed", tuple((key, key) for key in single))


def test_a_literal_that_one_flag_flips_reads_that_flag() -> None:
    table = {
        "analysed": _settings(attn_qk_norm="False", mlp_bias="False", act="config.hidden_act"),
        "use_qk_norm": _settings(attn_qk_norm="True", mlp_bias="False", act="config.hidden_act"),
        "no_bias": _settings(attn_qk_norm="False", mlp_bias="True", act="config.hidden_act"),
    }
    flipped = _settings(attn_qk_norm="True", mlp_bias="True", act="config.hidden_act")
    read = settings_reading_flags(
        flipped,
        _flags({"use_qk_norm": {}, "no_bias": {}}),
        table.__getitem__,
        {"use_qk_norm": False, "no_bias": True},
    )
    exprs = {s.field: s.expr for s in read}
    assert exprs == {
        "attn_qk_norm": "bool(config.use_qk_norm)",
        "mlp_bias": "not config.no_bias",  # True once the flag is flipped to False
        "act": "config.hidden_act",
    }


def test_a_literal_no_one_flag_explains_is_refused() -> None:
    table = {
        "analysed": _settings(attn_qk_norm="False"),
        "a": _settings(attn_qk_norm="False"),
        "b": _settings(attn_qk_norm="False"),
    }
    with pytest.raises(UnsupportedFeatureError, match="no one flag explains"):
        settings_reading_flags(
            _settings(attn_qk_norm="True"),
            _flags({"a": {}, "b": {}}),
            table.__getitem__,
            {"a": False, "b": False},
        )


def test_a_registered_class_is_checked_with_each_flag_flipped(tmp_path) -> None:
    """mobius registers stablelm as LayerNormCausalLMModel, which has no parallel residual: the
    checkpoint at hand passes, and a note says which flag the class does not follow."""
    folder = default_config_dir("stablelm", tmp_path / "models")
    result = onboard_new(NewOptions(model=str(folder), out=tmp_path / "out"))
    assert result.proposal.already_supported is not None
    report = result.parity
    assert report.passed
    notes = " | ".join(report.notes)
    assert "does not follow use_parallel_residual=True" in notes
    assert "also passes with use_qkv_bias=True" in notes


@pytest.fixture(scope="module")
def cohere(tmp_path_factory):
    root = tmp_path_factory.mktemp("cohere")
    folder = default_config_dir("cohere", root / "models")
    return onboard_new(NewOptions(model=str(folder), treat_as_new=True, out=root / "out"))


def test_cohere_follows_use_qk_norm_with_a_norm_weight_per_head(cohere) -> None:
    """Cohere's q/k norms, off in its default config, hold a weight row per head."""
    assert cohere.parity.passed
    flag = next(f for f in cohere.analysis.spec.flags if f.key == "use_qk_norm")
    assert ("attention.qk_norm_each_head", "False", "True") in flag.switches
    text = (cohere.root / cohere.plan.model_file).read_text()
    module = _import_file(cohere.root / cohere.plan.model_file)
    hf = make_hf_config(cohere.source.config)
    assert module.CohereConfig.from_transformers(hf).attn_qk_norm is False
    hf.use_qk_norm = True  # mobius' base config reads the flag itself: no setting restates it
    assert module.CohereConfig.from_transformers(hf).attn_qk_norm is True
    assert "class CohereHeadNorm(nn.Module):" in text
    flipped = [c for c in cohere.parity.checks if c.name.endswith("+")]
    assert any(c.name == "prefill+" and c.status is Status.PASS for c in flipped)


def test_cohere_norms_shared_by_the_heads_fail_with_use_qk_norm(cohere, tmp_path) -> None:
    module = cohere.root / cohere.plan.model_file
    text = module.read_text()
    old = "if config.attn_qk_norm:  # a weight per head, [heads, head_dim]"
    assert old in text
    broken = broken_module(cohere, tmp_path)
    broken.write_text(text.replace(old, "if False:"))  # mobius' own q/k norms: one row
    variant = next(
        v for v in cohere.analysis.variants if "use_qk_norm" in dict(v.flagged_from.single)
    )
    generated = (broken, cohere.plan.model_class)
    flipped = TARGET.parity(variant, cohere.proposal, generated, cohere.library)
    assert not flipped.passed
    analysed = TARGET.parity(cohere.analysis, cohere.proposal, generated, cohere.library)
    assert analysed.passed
