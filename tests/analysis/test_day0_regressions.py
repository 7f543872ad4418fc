"""Day-0 types (transformers newer than the pinned one) that crashed onboard, each reduced to the
generic mechanism it tripped, so the tests run under the pinned transformers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from onboard.analysis.load_renames import read_load_renames, renamed
from onboard.analysis.vision.encoder import forward_call_order
from onboard.analysis.vision.tower import read_tower
from onboard.checkpoint import tensor_shapes
from onboard.errors import UnsupportedFeatureError
from onboard.tiny import TINY_TOP_K, TINY_VOCAB, shrink_config

# -- a second size of the vocabulary (Inkling 2's unpadded_vocab_size) ------------------------


def _shrunk(**keys: int) -> dict:
    config = {"model_type": "x", "num_hidden_layers": 2, "vocab_size": 201024, **keys}
    return shrink_config(config, None).config


def test_an_unpadded_vocab_size_shrinks_and_stays_below_the_vocab() -> None:
    """Left at 200058 beside a tiny vocab_size, transformers' re-padding of the head on save
    asked for -199802 rows (Inkling 2)."""
    tiny = _shrunk(unpadded_vocab_size=200058)
    assert tiny["vocab_size"] == TINY_VOCAB
    assert 0 < tiny["unpadded_vocab_size"] < TINY_VOCAB


def test_a_padded_vocab_size_shrinks_and_stays_above_the_vocab() -> None:
    tiny = _shrunk(padded_vocab_size=201088)
    assert tiny["padded_vocab_size"] > TINY_VOCAB


def test_an_equal_vocab_size_stays_equal() -> None:
    assert _shrunk(output_vocab_size=201024)["output_vocab_size"] == TINY_VOCAB


def test_another_vocabulary_keeps_its_size() -> None:
    """Token types and audio codes are vocabularies of their own, not this one's sizes."""
    tiny = _shrunk(type_vocab_size=2, audio_vocab_size=2048)
    assert tiny["type_vocab_size"] == 2 and tiny["audio_vocab_size"] == 2048


def test_the_tiny_model_cuts_its_logits_to_the_unpadded_size() -> None:
    """The pinned transformers' Inkling slices logits to unpadded_vocab_size: at the real size,
    beside a tiny vocab_size, the cut never happened, so the probe could not see it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    real = AutoConfig.for_model("inkling_text").to_dict()
    real["unpadded_vocab_size"] = real["vocab_size"] - 966  # a checkpoint's (5.18 default: None)
    tiny = shrink_config(real, None).config
    tiny.pop("model_type")
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("inkling_text", **tiny))
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3]])).logits
    assert logits.shape[-1] == tiny["unpadded_vocab_size"] < TINY_VOCAB


# -- a tower whose forward needs more than the pixels (Ovis 2.5's grid_thw) ---------------------


class _Embeddings(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patch_embedding = nn.Conv2d(3, 32, 4, 4)
        self.position_embedding = nn.Embedding(4, 32)


class _PackedTower(nn.Module):
    """A ViT's parts whose forward, like Qwen-VL's, takes the patches' grid besides the pixels."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = _Embeddings()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(2))

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor, scale: float = 1.0):
        return pixel_values * grid_thw.sum() * scale


_CONFIG = SimpleNamespace(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=8, patch_size=4,
    num_channels=3, intermediate_size=64, hidden_act="gelu", layer_norm_eps=1e-6,
)  # fmt: skip


def test_a_tower_needing_the_grid_is_refused_at_its_forward() -> None:
    reading = read_tower(_PackedTower(), _CONFIG, ())
    assert reading.spec is None
    [delta] = reading.deltas
    assert "needs grid_thw besides the pixels" in delta.what
    assert "test_day0_regressions.py" in delta.where


def test_the_call_order_names_every_required_argument() -> None:
    class Tower(_PackedTower):
        def forward(self, pixel_values, grid_thw, *, image_sizes, **kwargs):
            return pixel_values

    with pytest.raises(ValueError, match="needs grid_thw, image_sizes besides"):
        forward_call_order(Tower(), 3, 8, ValueError)


def test_optional_arguments_do_not_stop_the_call() -> None:
    class Tower(_PackedTower):
        def forward(self, pixel_values, image_sizes=None, **kwargs):
            return self.layers[1](self.layers[0](pixel_values.mean((1, 2))[:, :1].expand(1, 32)))

    assert forward_call_order(Tower(), 3, 8, ValueError) == ["", "layers.0", "layers.1"]


# -- keys config.json stores under an alias (Bailing's num_expert_group is n_group) -------------

_BAILING_ALIASES = {
    "n_group": "num_expert_group",
    "num_local_experts": "num_experts",
    "num_experts_per_tok": "num_experts_per_token",
    "max_position_embeddings": "model_max_length",
}
_BAILING = {
    "model_type": "x",
    "num_hidden_layers": 2,
    "num_expert_group": 8,
    "topk_group": 4,
    "num_experts": 512,
    "num_experts_per_token": 8,
    "model_max_length": 262144,
}


def test_sizes_stored_under_an_alias_are_shrunk() -> None:
    """Left at 8 groups of 4 tiny experts, the router viewed its scores as [-1, 8, 0]."""
    tiny = shrink_config(_BAILING, None, ["moe|A"] * 2, aliases=_BAILING_ALIASES).config
    assert tiny["num_experts"] == 4
    assert tiny["num_expert_group"] == 2 and tiny["topk_group"] == 1
    assert tiny["num_experts_per_token"] == TINY_TOP_K
    assert tiny["model_max_length"] == tiny["max_position_embeddings"] == 128


def test_without_the_aliases_the_groups_outnumber_the_experts() -> None:
    """The failure the aliases fix, so the test above can tell."""
    tiny = shrink_config(_BAILING, None, ["moe|A"] * 2).config
    assert tiny["num_expert_group"] == 8 > tiny["num_experts"]


def test_an_aliased_real_config_class_builds_its_tiny_model() -> None:
    """DeepSeek V3's config class reads num_local_experts from n_routed_experts."""
    from transformers import AutoConfig, AutoModelForCausalLM

    real = AutoConfig.for_model("deepseek_v3")
    aliases = dict(type(real).attribute_map)
    tiny = shrink_config(real.to_dict(), None, ["moe|A"] * 2, aliases=aliases).config
    tiny.pop("model_type")
    config = AutoConfig.for_model("deepseek_v3", **tiny)
    assert config.num_local_experts == config.n_routed_experts == 4
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        assert model(torch.tensor([[1, 2, 3]])).logits.shape[-1] == TINY_VOCAB


# -- checkpoint names transformers renames on load (EXAONE, Sarvam-MoE) ------------------------


def _llama(class_name: str, mapping: list) -> nn.Module:
    """A tiny Llama whose class transformers converts with ``mapping``: it saves the names the
    mapping's sources describe, as EXAONE's LlamaForCausalLM saves transformer.h.*."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.conversion_mapping import register_checkpoint_conversion_mapping

    register_checkpoint_conversion_mapping(class_name, mapping, overwrite=True)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=False,
    )  # fmt: skip
    return type(class_name, (LlamaForCausalLM,), {})(config)


def _exaone_like() -> nn.Module:
    from transformers.core_model_loading import WeightRenaming

    return _llama(
        "OnboardTestSavedAsGpt2ForCausalLM",
        [
            WeightRenaming(r"^transformer\.wte\.", "model.embed_tokens."),
            WeightRenaming(r"^transformer\.h\.", "model.layers."),
            WeightRenaming(r"\.attn\.attention\.", ".self_attn."),
            WeightRenaming(r"\.self_attn\.out_proj\.", ".self_attn.o_proj."),  # chained
            WeightRenaming(r"\.ln_1\.", ".input_layernorm."),
        ],
    )


def test_names_transformers_renames_on_load_are_renamed_like_it() -> None:
    model = _exaone_like()
    saved = tensor_shapes(model)
    assert "transformer.h.0.attn.attention.out_proj.weight" in dict(saved)
    renames = read_load_renames(model, model, saved, ())
    memory = {n: tuple(p.shape) for n, p in model.state_dict().items()}
    assert {renamed(n, renames): s for n, s in saved}.items() <= memory.items()
    assert renames[:2] == (
        ("transformer.wte.", "model.embed_tokens."),
        ("transformer.h.", "model.layers."),
    )


def _suffix_renamed(suffix: str) -> nn.Module:
    """A tiny Llama saved as transformer.h.* whose input norm weight is saved under a bare name
    transformers renames by a ``$``-anchored pattern (HunYuan V4's learnable_sink_param)."""
    from transformers.core_model_loading import WeightRenaming

    return _llama(
        "OnboardTestSuffixRenamedForCausalLM",
        [
            WeightRenaming(r"^transformer\.h\.", "model.layers."),
            WeightRenaming(suffix, ".input_layernorm.weight"),
        ],
    )


def test_a_suffix_rename_is_a_plain_rename() -> None:
    model = _suffix_renamed(r"\.ln_1_param$")
    saved = tensor_shapes(model)
    assert "transformer.h.0.ln_1_param" in dict(saved)
    renames = read_load_renames(model, model, saved, ())
    assert renames[1] == (".ln_1_param", ".input_layernorm.weight")
    memory = {n: tuple(p.shape) for n, p in model.state_dict().items()}
    assert {renamed(n, renames): s for n, s in saved}.items() <= memory.items()


def test_a_suffix_rename_that_also_matches_inside_a_name_is_refused() -> None:
    """Sabotage: read as a substring, the suffix would also rename ln_1_param.extra, which
    transformers leaves alone."""
    model = _suffix_renamed(r"\.ln_1_param$")
    saved = (*tensor_shapes(model), ("transformer.h.0.ln_1_param.extra", (4,)))
    with pytest.raises(UnsupportedFeatureError, match=r"ln_1_param\.extra to model\.layers"):
        read_load_renames(model, model, saved, ())


@pytest.mark.parametrize(
    ("pattern", "plain"),
    [
        (r"^transformer\.h\.", "transformer.h."),
        (r"\.learnable_sink_param$", ".learnable_sink_param"),
        (r"\.hc_pre\.hc_", ".hc_pre.hc_"),
        (r"price\$", "price$"),  # an escaped dollar is a character, not an anchor
        (r"layers\.(\d+)\.", None),
        (r"\.experts\.\d+\.", None),
        (r"mlp\.(gate|up)_proj", None),
        (r"a.*b", None),
    ],
)
def test_only_literal_patterns_read_as_plain_names(pattern: str, plain: str | None) -> None:
    from onboard.analysis.load_renames import plain_pattern

    assert plain_pattern(pattern) == plain


def test_a_real_regex_rename_is_refused_by_its_pattern() -> None:
    """Saved under the plain suffix, loaded by a class whose rename is a real regex (``\\d``)."""
    saved = tensor_shapes(_suffix_renamed(r"\.ln_1_param$"))
    model = _suffix_renamed(r"\.ln_\d_param$")
    with pytest.raises(UnsupportedFeatureError, match=r"ln_\\\\d_param\$' on load .*not a plain"):
        read_load_renames(model, model, saved, ())


def test_a_model_saved_under_its_own_names_needs_no_renames() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1))
    assert read_load_renames(model, model, tensor_shapes(model), ()) == ()


def test_a_tensor_transformers_converts_on_load_is_refused_by_name() -> None:
    """Sarvam-MoE's fused query_key_value is split on load: no rename fills q, k and v."""
    from transformers.core_model_loading import Chunk, WeightConverter, WeightRenaming

    model = _llama(
        "OnboardTestFusedQkvForCausalLM",
        [
            WeightRenaming(r"\.attention\.", ".self_attn."),
            WeightConverter(
                source_patterns="query_key_value",
                target_patterns=["q_proj", "k_proj", "v_proj"],
                operations=[Chunk(dim=0)],
            ),
        ],
    )
    saved = tensor_shapes(model)
    assert "model.layers.0.attention.query_key_value.weight" in dict(saved)
    with pytest.raises(
        UnsupportedFeatureError, match=r"query_key_value\.weight is converted on load"
    ):
        read_load_renames(model, model, saved, ())


def test_the_analysis_reads_the_renamed_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the probe's names are transformers' in-memory ones, and the spec's renames
    start with the load-time ones, so generated loaders see the checkpoint's own names."""
    import onboard.analysis as analysis

    monkeypatch.setattr(analysis, "build_tiny_model", lambda config: _exaone_like())
    config = {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2}
    _, _, _, _, probe = analysis._probed(config, None, ["dense|A"] * 2)
    assert probe.load_renames[0] == ("transformer.wte.", "model.embed_tokens.")
    assert "model.layers.0.self_attn.o_proj.weight" in dict(probe.disk_tensors)


def test_experts_saved_one_by_one_are_left_to_the_moe_reader() -> None:
    """Under another block name (Mixtral's block_sparse_moe) or as the layer's own child
    (Mistral Large 4's experts), per-expert names are the MoE reader's to map."""
    from onboard.analysis.load_renames import _outside

    modules = {"model", "model.layers", "model.layers.0", "model.layers.0.mlp"}
    for name in (
        "model.layers.0.block_sparse_moe.experts.0.w1.weight",
        "model.layers.0.experts.0.w1.weight",
    ):
        assert not _outside(name, modules, [name], ())
    assert _outside("model.layers.0.attention.dense.weight", modules, [], ())


def test_a_block_part_saved_under_another_name_is_outside() -> None:
    """Laguna saves its shared expert as mlp.shared_expert, mlp.shared_experts in memory: the
    layer's child exists, its part does not, so transformers' renaming is read."""
    from onboard.analysis.load_renames import _part_outside, _part_renamed

    modules = {"model.layers.1", "model.layers.1.mlp", "model.layers.1.mlp.shared_experts"}
    saved = "model.layers.1.mlp.shared_expert.down_proj.weight"
    theirs = saved.replace("_expert.", "_experts.")
    assert _part_outside(saved, modules) and _part_renamed(saved, theirs, modules)
    assert not _part_outside(theirs, modules)
    # a tensor moved into another block's (GraniteMoE's input_linear): the MoE reader's
    granite = "model.layers.1.mlp.input_linear.weight"
    assert not _part_renamed(granite, "model.layers.1.mlp.experts.gate_up_proj", modules)


def test_names_inside_a_known_block_that_fill_nothing_are_renamed_like_transformers() -> None:
    """HY-V3 saves its MoE block's bias and shared expert under other names inside the block
    (mlp.expert_bias, mlp.shared_mlp.*): the block exists in memory, its tensors do not."""
    from onboard.analysis.load_renames import _unknown_leaf

    modules = {"model", "model.layers", "model.layers.0", "model.layers.0.mlp"}
    memory = {"model.layers.0.mlp.e_score_correction_bias"}
    bias = "model.layers.0.mlp.e_score_correction_bias"
    assert _unknown_leaf("model.layers.0.mlp.expert_bias", bias, modules, memory)
    shared = "model.layers.0.mlp.shared_mlp.up_proj.weight"
    assert _unknown_leaf(shared, shared.replace("_mlp", "_experts"), modules, memory)
    assert not _unknown_leaf(bias, bias, modules, memory)
    # what the MoE reader finds by value: experts (Granite's fused input_linear too), routers
    for saved, theirs in (
        ("model.layers.0.mlp.experts.0.w1.weight",) * 2,
        ("model.layers.0.mlp.input_linear.weight", "model.layers.0.mlp.experts.gate_up_proj"),
        ("model.layers.0.mlp.router.layer.weight", "model.layers.0.mlp.router.weight"),
    ):
        assert not _unknown_leaf(saved, theirs, modules, memory)


def test_a_rename_whose_new_name_holds_the_old_one_is_undone_on_renamed_names() -> None:
    """A.X-K1's post_mlp_layernorm -> mlp.post_mlp_layernorm would rename the in-memory name
    again (mlp.mlp.post_mlp_layernorm): a second pair undoes that."""
    from onboard.analysis.load_renames import _idempotent

    pairs = _idempotent((("post_mlp_layernorm", "mlp.post_mlp_layernorm"), ("a.", "b.")))
    assert pairs[1] == ("mlp.mlp.post_mlp_layernorm", "mlp.post_mlp_layernorm")
    in_memory = "model.layers.1.mlp.post_mlp_layernorm.weight"
    for name in ("model.layers.1.post_mlp_layernorm.weight", in_memory):
        assert renamed(name, pairs) == in_memory


# -- layers that read as attention but hold no heads (RWKV's time mixing) ----------------------


def test_a_layer_without_attention_heads_is_an_unknown_mixer_not_a_crash(tmp_path) -> None:
    """The backlog benchmark's RWKV ended in AttributeError: no num_attention_heads."""
    from onboard.analysis import analyse
    from onboard.source import load_source
    from tests.new_types import default_config_dir

    with pytest.raises(UnsupportedFeatureError, match="RwkvConfig has no num_attention_heads") as e:
        analyse(load_source(str(default_config_dir("rwkv", tmp_path))))
    assert "attention (RwkvSelfAttention)" in e.value.items[0]
