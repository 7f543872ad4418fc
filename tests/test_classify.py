from __future__ import annotations

import json

import pytest

from onboard.classify import Kind, classify, require_in_scope
from onboard.errors import BadInputError, UnsupportedKindError
from tests.hub_cache import FIXTURES


def _config(repo_id: str) -> dict:
    path = FIXTURES / repo_id / "config.json"
    if not path.exists():
        path = FIXTURES / repo_id / "config.partial.json"
    return json.loads(path.read_text())


@pytest.mark.parametrize(
    ("repo_id", "kind", "reason"),
    [
        ("Qwen/Qwen3-0.6B", Kind.DENSE, "no experts"),
        ("meta-llama/Llama-3.2-1B", Kind.DENSE, "no experts"),
        ("google/gemma-3-1b-it", Kind.DENSE, "no experts"),
        ("mistralai/Mixtral-8x7B-v0.1", Kind.MOE, "num_local_experts = 8"),
        ("Qwen/Qwen3-30B-A3B", Kind.MOE, "num_experts = 128"),
        ("deepseek-ai/DeepSeek-V3", Kind.MOE, "n_routed_experts = 256"),
        ("allenai/OLMoE-1B-7B-0924", Kind.MOE, "num_experts = 64"),
        ("openai/gpt-oss-20b", Kind.MOE, "num_local_experts = 32"),
        ("LiquidAI/LFM2-1.2B", Kind.HYBRID, "conv"),
        ("ai21labs/AI21-Jamba-1.5-Mini", Kind.HYBRID_MOE, "mamba"),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", Kind.HYBRID_MOE, "linear_num_key_heads"),
        ("llava-hf/llava-1.5-7b-hf", Kind.VLM, "vision_config"),
        ("Qwen/Qwen2.5-VL-3B-Instruct", Kind.VLM, "vision_config"),
    ],
)
def test_real_configs(repo_id: str, kind: Kind, reason: str) -> None:
    result = classify(_config(repo_id))
    assert result.kind is kind
    assert any(reason in r for r in result.reasons), result.reasons


def test_vlm_reports_its_text_backbone() -> None:
    result = classify(_config("llava-hf/llava-1.5-7b-hf"))
    assert result.text_path == ("text_config",)
    assert result.text_backbone is Kind.DENSE


def test_is_moe_false_wins() -> None:
    config = {"model_type": "doge", "num_experts": 16384, "is_moe": False, "num_attention_heads": 4}
    assert classify(config).kind is Kind.DENSE


def test_single_expert_is_dense() -> None:
    assert classify({"model_type": "llama", "num_local_experts": 1}).kind is Kind.DENSE


@pytest.mark.parametrize(
    ("config", "kind"),
    [
        ({"model_type": "t5", "is_encoder_decoder": True}, Kind.ENCODER_DECODER),
        ({"model_type": "bert"}, Kind.ENCODER_LM),
        ({"model_type": "vit"}, Kind.NON_LM),
        ({"model_type": "whisper", "is_encoder_decoder": True}, Kind.ENCODER_DECODER),
        ({"model_type": "mamba", "state_size": 16, "conv_kernel": 4}, Kind.SSM),
        # XLNet's default: attention over permuted orders sees both sides of each token
        ({"model_type": "xlnet", "attn_type": "bi", "mem_len": 512}, Kind.ENCODER_LM),
        # Gemma 4's assistant reads the target model's KV states; its hidden size is nested
        (
            {
                "model_type": "gemma4_assistant",
                "backbone_hidden_size": 1536,
                "text_config": {"model_type": "gemma4_text", "hidden_size": 256},
            },
            Kind.DRAFT,
        ),
    ],
)
def test_out_of_scope_kinds(config: dict, kind: Kind) -> None:
    result = classify(config)
    assert result.kind is kind
    if kind in (Kind.ENCODER_DECODER, Kind.ENCODER_LM, Kind.NON_LM, Kind.DRAFT):
        with pytest.raises(UnsupportedKindError, match="out of scope"):
            require_in_scope(result)


def test_a_one_way_xlnet_is_not_called_bidirectional() -> None:
    """Only attn_type 'bi' says bidirectional; 'uni' goes on to the decoder rules (and the
    analysis then says what it does not understand)."""
    assert classify({"model_type": "xlnet", "attn_type": "uni"}).kind is Kind.DENSE


def test_unknown_model_type_without_remote_code() -> None:
    with pytest.raises(BadInputError, match="not known to transformers"):
        classify({"model_type": "never_published_arch"})


def test_source_cross_check_warns() -> None:
    source = "class FooSparseMoeBlock(nn.Module):\n    pass\n"
    result = classify({"model_type": "llama"}, modeling_source=source)
    assert result.kind is Kind.DENSE
    assert any("FooSparseMoeBlock" in w for w in result.warnings)


def test_a_model_of_several_stacks_is_out_of_scope_with_its_sub_configs() -> None:
    """BLT's config.json has no hidden_size because its byte encoder, global transformer,
    byte decoder and entropy patcher are each a sub-config: not a malformed config, and not one
    decoder onboard can generate."""
    from transformers import CONFIG_MAPPING

    result = classify(CONFIG_MAPPING["blt"]().to_dict())
    assert result.kind is Kind.MULTI_STACK
    (reason,) = result.reasons
    assert "no hidden_size" in reason
    for sub_config in ("patcher_config", "encoder_config", "decoder_config", "global_config"):
        assert sub_config in reason
    with pytest.raises(UnsupportedKindError, match="multi_stack is out of scope"):
        require_in_scope(result)


def test_a_config_without_hidden_size_or_stacks_is_still_malformed(tmp_path) -> None:
    """No hidden_size and no sub-config that holds one: classified from its keys, then refused
    as a config that lacks its size (one sub-config alone is not several stacks)."""
    from onboard.errors import InvalidConfigError
    from onboard.hf_config import check_sizes

    config = {
        "model_type": "llama",
        "num_attention_heads": 4,
        "vocab_size": 64,
        "extra_config": {"hidden_size": 8, "num_hidden_layers": 1},
    }
    assert classify(config).kind is Kind.DENSE
    with pytest.raises(InvalidConfigError, match="has no hidden_size"):
        check_sizes(config)
