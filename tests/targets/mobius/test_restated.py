"""The generated config keeps only the settings that change what mobius' base config derives."""

from __future__ import annotations

from transformers import Qwen3Config

from onboard.targets.mobius.restated import restated
from onboard.targets.mobius.settings import Setting

TINY = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 100,
}


def _kept(*settings: Setting, configs=None) -> set[str]:
    configs = configs or [Qwen3Config(**TINY).to_dict()]
    dropped = restated(settings, "CausalLMConfig", configs)
    return {s.field for s in settings if s not in dropped}


def test_a_setting_the_base_derives_the_same_way_is_dropped() -> None:
    assert (
        _kept(
            Setting("hidden_act", "config.hidden_act", "MLP activation"),
            Setting("rms_norm_eps", "config.rms_norm_eps", "norm epsilon"),
            Setting("tie_word_embeddings", "bool(config.tie_word_embeddings)", "tied head"),
        )
        == set()
    )


def test_a_setting_only_a_model_type_list_makes_redundant_is_kept() -> None:
    # mobius derives attn_qk_norm from its list of types for "qwen3", not from the config:
    # the same config under a model type no list names has no q/k norm
    assert _kept(Setting("attn_qk_norm", "True", "q/k norms")) == {"attn_qk_norm"}


def test_a_setting_that_changes_the_value_is_kept() -> None:
    assert _kept(Setting("mlp_bias", "True", "MLP bias")) == {"mlp_bias"}


def test_every_flag_variant_must_agree() -> None:
    window = Setting("sliding_window", "None", "no layer slides")
    off = Qwen3Config(**TINY).to_dict()
    on = Qwen3Config(**TINY, use_sliding_window=True, sliding_window=8).to_dict()
    assert _kept(window, configs=[off]) == set()  # the base leaves the window out too
    assert _kept(window, configs=[off, on]) == {"sliding_window"}  # with the flag on it does not


def test_what_cannot_be_measured_is_kept() -> None:
    odd = Setting("hidden_act", "_helper(config)", "a helper of the generated module")
    assert _kept(odd) == {"hidden_act"}
    unknown_base = restated((odd,), "NoSuchConfig", [Qwen3Config(**TINY).to_dict()])
    assert unknown_base == frozenset()  # nothing dropped
