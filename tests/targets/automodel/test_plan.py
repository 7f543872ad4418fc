"""The files an AutoModel plan writes, and the registry edit, without running parity."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onboard import provenance
from onboard.errors import BadInputError
from onboard.targets.automodel import TARGET
from onboard.targets.automodel.registry import REGISTRY, open_library
from tests.analyses import analysis_of


def _plan(repo_id: str, out: Path | None, library=None, **options):
    library = library or open_library(None)
    analysis = analysis_of(repo_id)
    proposal = TARGET.propose(analysis.spec, library, treat_as_new=True)
    return TARGET.plan(analysis, proposal, library, out=out, **options)


def test_out_folder_is_laid_out_like_the_repo(tmp_path: Path) -> None:
    plan = _plan("google/gemma-3-1b-it", tmp_path)
    package = "nemo_automodel/components/models/gemma3_text"
    assert set(plan.paths()) == {
        f"{package}/__init__.py",
        f"{package}/model.py",
        f"{package}/state_dict_adapter.py",
        f"{package}/layers.py",  # the scaled embedding
        f"{package}/rope_utils.py",  # one RoPE table per layer kind
        "tests/unit_tests/models/gemma3_text/test_gemma3_text_model.py",
        "examples/llm_finetune/gemma3_text/gemma_3_1b_it_hellaswag.yaml",
        "docs/model-coverage/llm/local/gemma-3-1b-it.mdx",
        "onboard.patch",
        "ONBOARD.md",
    }
    assert (plan.model_file, plan.model_class) == (f"{package}/model.py", "Gemma3ForCausalLM")
    patch = plan.content_of("onboard.patch")
    assert patch.startswith(f"--- a/{REGISTRY}\n+++ b/{REGISTRY}\n")
    assert (
        '+        ("Gemma3ForCausalLM", ("nemo_automodel.components.models.gemma3_text.model"'
        in patch
    )
    assert "git apply onboard.patch" in plan.content_of("ONBOARD.md")


HF_LINE = re.compile(r"\b\w+\.py:\d+")


def test_generated_code_names_its_source_and_the_answers_file_cites_the_lines() -> None:
    """Library code names the source it was generated from, but no HF line (they go stale as
    transformers changes); the answers file keeps each citation (provenance.record)."""
    analysis = analysis_of("google/gemma-3-1b-it")
    proposal = TARGET.propose(analysis.spec, open_library(None), treat_as_new=True)
    plan = TARGET.plan(analysis, proposal, open_library(None), out=Path("out"))
    model = plan.content_of("nemo_automodel/components/models/gemma3_text/model.py")
    header = " ".join(line.removeprefix("#").strip() for line in model.split('"""')[0].splitlines())
    assert "onboard 0.1.0: generated from" in header
    assert "modeling_gemma3.py sha256:" in header and "for nemo-automodel 0.7.0" in header
    assert all(not HF_LINE.search(c.content) for c in plan.changes if c.path.endswith(".py"))
    assert "# q_norm / k_norm over each head" in model  # the reason stays, without its line
    cited = provenance.record(analysis.spec, "onboard new google/gemma-3-1b-it")["evidence"]
    for path, citation in (
        ("text.attention.qk_norm", "modeling_gemma3.py:338"),
        ("text.embedding_scale", "modeling_gemma3.py:496"),
        ("text.norm.weight_offset", "modeling_gemma3.py:149"),
        ("text.attention.scale", "modeling_gemma3.py:318"),
    ):
        assert citation in cited[path], (path, cited.get(path))
    assert 'UNSUPPORTED_SWITCHES = ("use_bidirectional_attention",)' in model


def test_no_patch_when_the_registry_already_maps_the_class(tmp_path: Path) -> None:
    plan = _plan("Qwen/Qwen3-0.6B", tmp_path)  # 0.7.0 maps Qwen3ForCausalLM to qwen3.model
    assert "onboard.patch" not in plan.paths()
    assert "Nothing to register" in plan.content_of("ONBOARD.md")


def test_checkout_gets_a_libcst_registry_edit(automodel_repo: Path) -> None:
    library = open_library(automodel_repo)
    plan = _plan("mistralai/Mistral-7B-v0.1", None, library)
    assert "onboard.patch" not in plan.paths() and "ONBOARD.md" not in plan.paths()
    before = (automodel_repo / REGISTRY).read_text()
    after = plan.content_of(REGISTRY)
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert added == [
        '        ("MistralForCausalLM", ("nemo_automodel.components.models.mistral.model", '
        '"MistralForCausalLM")),'
    ]


def test_name_option_renames_package_and_classes(tmp_path: Path) -> None:
    plan = _plan("Qwen/Qwen3-0.6B", tmp_path, name="my_qwen")
    assert plan.model_file == "nemo_automodel/components/models/my_qwen/model.py"
    assert plan.model_class == "MyQwenForCausalLM"
    assert "nemo_automodel.components.models.my_qwen.model" in plan.content_of("onboard.patch")


def test_model_class_is_read_from_the_model_file(tmp_path: Path) -> None:
    plan = _plan("Qwen/Qwen3-0.6B", tmp_path)
    path = tmp_path / "model.py"
    path.write_text(plan.content_of(plan.model_file))
    assert TARGET.model_class_in(path) == "Qwen3ForCausalLM"
    path.write_text("class X: ...\n")
    with pytest.raises(BadInputError, match="no `ModelClass = <class>`"):
        TARGET.model_class_in(path)


def test_moe_package_builds_on_automodel_moe(tmp_path: Path) -> None:
    plan = _plan("Qwen/Qwen3-30B-A3B", tmp_path)
    package = "nemo_automodel/components/models/qwen3_moe"
    model = plan.content_of(f"{package}/model.py")
    adapter = plan.content_of(f"{package}/state_dict_adapter.py")
    # HF's decoder layer decides which layers are sparse; those get AutoModel's MoE.
    assert "if isinstance(self.mlp, HFQwen3MoeSparseMoeBlock):" in model
    # its MoE subclass shows the router logits to HF's load-balancing loss
    assert "self.mlp = Qwen3MoeSparseMoE(config, moe_config, backend)" in model
    assert not HF_LINE.search(model)
    assert '"softmax_before_topk": True' in model
    assert '"norm_topk_prob": config.norm_topk_prob' in model
    assert "GenerationMixin, MoEFSDPSyncMixin" in model
    assert "UNSUPPORTED_SWITCHES" not in model  # output_router_logits is honoured
    assert "return load_balancing_loss_func(" in model
    assert "class Qwen3MoeGate(Gate):" in model and "jitter" not in model
    assert "(MoESplitExpertsStateDictMixin, StateDictAdapter)" in adapter
    assert "HF_TO_NATIVE" not in adapter  # the checkpoint already uses the mixin's names
    recipe = plan.content_of("examples/llm_finetune/qwen3_moe/qwen3_30b_a3b_hellaswag.yaml")
    assert "experts: torch_mm" in recipe and "ep_size: 1" in recipe


def test_mixtral_adapter_renames_the_expert_and_router_names(tmp_path: Path) -> None:
    plan = _plan("mistralai/Mixtral-8x7B-v0.1", tmp_path)
    package = "nemo_automodel/components/models/mixtral"
    adapter = plan.content_of(f"{package}/state_dict_adapter.py")
    assert (
        r'(r"\.block_sparse_moe\.experts\.(\d+)\.w3\.weight$", r".mlp.experts.\1.up_proj.weight")'
        in adapter
    )
    assert r'(r"\.block_sparse_moe\.gate\.weight$", r".mlp.gate.weight")' in adapter
    model = plan.content_of(f"{package}/model.py")
    assert '"norm_topk_prob": True' in model  # Mixtral always renormalises: no config key
    assert '"moe_inter_dim": config.intermediate_size' in model
    assert "UNSUPPORTED_SWITCHES" not in model  # the loss and the jitter are both honoured
    assert "self.jitter_noise = config.router_jitter_noise" in model
    assert not HF_LINE.search(model)


@pytest.mark.parametrize(
    "repo_id",
    [
        "Qwen/Qwen3-30B-A3B",
        "mistralai/Mixtral-8x7B-v0.1",
        "allenai/OLMoE-1B-7B-0924",
        "Qwen/Qwen3-Next-80B-A3B-Instruct",  # its shared_expert is AutoModel's shared_experts
    ],
)
def test_moe_renames_round_trip_every_checkpoint_name(repo_id: str) -> None:
    analysis = analysis_of(repo_id)
    proposal = TARGET.propose(analysis.spec, open_library(None), treat_as_new=True)
    moe = TARGET.design(analysis, proposal).moe

    def rename(name: str, rules: list[tuple[str, str]]) -> str:
        for pattern, replacement in rules:
            renamed, count = re.subn(pattern, replacement, name)
            if count:
                return renamed
        return name

    to_native = [(r.hf_pattern, r.native) for r in moe.renames]
    to_hf = [(r.native_pattern, r.hf) for r in moe.renames]
    native_names = set()
    for name, _ in analysis.probe.disk_tensors:
        native = rename(name, to_native)
        assert rename(native, to_hf) == name
        native_names.add(native)
    # Every expert and router tensor ends up where MoESplitExpertsStateDictMixin looks for it.
    experts = {n for n in native_names if ".experts." in n}
    assert experts and all(re.search(r"\.mlp\.experts\.\d+\.\w+_proj\.weight$", n) for n in experts)
    assert "model.layers.0.mlp.gate.weight" in native_names


def test_hybrid_package_keeps_hf_mixers_beside_generated_attention(tmp_path: Path) -> None:
    """Qwen3-Next: DeltaNet layers stay HF's; attention gets its output gate and partial RoPE."""
    analysis = analysis_of("Qwen/Qwen3-Next-80B-A3B-Instruct")
    proposal = TARGET.propose(analysis.spec, open_library(None), treat_as_new=True)
    design = TARGET.design(analysis, proposal)
    assert [(m.label, m.kind, m.attribute, m.hf_class) for m in design.mixers] == [
        ("linear_attention", "gated_deltanet", "linear_attn", "Qwen3NextGatedDeltaNet")
    ]
    assert design.attention_kinds == ("full_attention",)
    assert design.output_gate and design.partial_rope
    assert design.moe.shared_gated
    plan = _plan("Qwen/Qwen3-Next-80B-A3B-Instruct", tmp_path)
    model = plan.content_of("nemo_automodel/components/models/qwen3_next/model.py")
    assert 'causal_mask_mapping["linear_attention"] = create_recurrent_attention_mask(' in model
    assert "attn_output = attn_output * torch.sigmoid(gate)" in model
    assert "rotary = cos.shape[-1]" in model
    assert '"shared_expert_gate": True' in model
    tests = plan.content_of("tests/unit_tests/models/qwen3_next/test_qwen3_next_model.py")
    assert "def test_mixer_matches_hf" in tests and "def test_decode_steps_match_hf" in tests


def test_one_block_hybrid_keeps_hf_names_without_rope(tmp_path: Path) -> None:
    """NemotronH: one mixer a layer, HF's embeddings / norm_f, no RoPE, backbone. on disk."""
    from onboard.analysis import analyse
    from onboard.source import load_source
    from onboard.targets.automodel.design import HFLayout
    from tests.new_types import nemotron_nano_dir

    analysis = analyse(load_source(str(nemotron_nano_dir(tmp_path / "models"))))
    library = open_library(None)
    proposal = TARGET.propose(analysis.spec, library, treat_as_new=True)
    assert proposal.blockers == ()
    design = TARGET.design(analysis, proposal)
    assert design.layout == HFLayout(
        embeddings="embeddings",
        final_norm="norm_f",
        attention="mixer",
        mlp="mixer",
        one_block=True,
        prefixes=(("backbone.", "model."),),
    )
    assert not design.rope and not design.ties  # HF's NemotronH never ties its head
    assert design.hf.decoder_layer == "NemotronHBlock"
    assert [(m.label, m.kind, m.attribute) for m in design.mixers] == [
        ("linear_attention", "mamba2", "mixer")
    ]
    plan = TARGET.plan(analysis, proposal, library, out=tmp_path / "out")
    package = "nemo_automodel/components/models/nemotron_h"
    model = plan.content_of(f"{package}/model.py")
    assert "self.norm_f = NemotronHRMSNorm(" in model
    assert "self.embeddings = nn.Embedding(" in model
    assert "self.rotary_emb" not in model and "position_embeddings" not in model
    assert "attention_mask=causal_mask_mapping.get(decoder_layer.attention_type)" in model
    assert "TieSupport.UNTIED_ONLY" in model
    adapter = plan.content_of(f"{package}/state_dict_adapter.py")
    assert 'PREFIXES = (("backbone.", "model."),)' in adapter
    tests = plan.content_of("tests/unit_tests/models/nemotron_h/test_nemotron_h_model.py")
    assert 'MLP_LAYERS = [i for i, kind in enumerate(TINY_KINDS) if kind in ["mlp"]]' in tests
    assert 'NORMS = ["norm"]' in tests
    assert "def test_rotary_embedding_matches_hf" not in tests


def test_hf_attribute_names_reach_the_generated_code(tmp_path: Path) -> None:
    """LFM2 names its parts its own way; the generated classes, subclassing HF's, keep them."""
    from onboard.targets.automodel.design import HFLayout

    analysis = analysis_of("LiquidAI/LFM2-1.2B")
    proposal = TARGET.propose(analysis.spec, open_library(None), treat_as_new=True)
    design = TARGET.design(analysis, proposal)
    assert design.layout == HFLayout(
        final_norm="embedding_norm",
        mlp="feed_forward",
        attention_names=(
            ("o_proj", "out_proj"),
            ("q_norm", "q_layernorm"),
            ("k_norm", "k_layernorm"),
        ),
    )
    assert design.hf.decoder_layer == "Lfm2DecoderLayer" and not design.attention_dropout
    plan = _plan("LiquidAI/LFM2-1.2B", tmp_path)
    model = plan.content_of("nemo_automodel/components/models/lfm2/model.py")
    assert "return self.out_proj(attn_output), attn_weights" in model
    assert "query_states = self.q_layernorm(query_states).transpose(1, 2)" in model
    assert "self.embedding_norm = Lfm2RMSNorm(" in model
    assert "dropout=0.0,  # Lfm2Attention has no attention dropout" in model
    tests = plan.content_of("tests/unit_tests/models/lfm2/test_lfm2_model.py")
    norms = ["operator_norm", "ffn_norm", "self_attn.q_layernorm", "self_attn.k_layernorm"]
    assert all(f'    "{name}",' in tests for name in norms)


def test_decoder_layers_of_two_classes_are_refused(tmp_path: Path) -> None:
    from onboard.errors import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError) as raised:
        _plan("ai21labs/AI21-Jamba-1.5-Mini", tmp_path)
    assert raised.value.items == (
        "JambaAttentionDecoderLayer at modeling_jamba.py",
        "JambaMambaDecoderLayer at modeling_jamba.py",
    )


def _plan_default(model_type: str, tmp_path: Path):
    from onboard.analysis import analyse
    from onboard.source import load_source
    from tests.new_types import default_config_dir

    analysis = analyse(load_source(str(default_config_dir(model_type, tmp_path / "models"))))
    library = open_library(None)
    proposal = TARGET.propose(analysis.spec, library, treat_as_new=True)
    return TARGET.plan(analysis, proposal, library, out=tmp_path / "out")


def test_config_multipliers_are_applied_where_hf_applies_them(tmp_path: Path) -> None:
    """Granite: embeddings and logits in the generated model; residual and attention in HF's."""
    model = _plan_default("granite", tmp_path).content_of(
        "nemo_automodel/components/models/granite/model.py"
    )
    assert "inputs_embeds = inputs_embeds * self.config.embedding_multiplier" in model
    assert "logits = logits * 1.0 / self.config.logits_scaling" in model
    words = " ".join(model.split())  # the docstring wraps
    assert "HF's forward applies the config multiplier: attention and MLP outputs" in words


def test_interleaved_rope_rotates_adjacent_pairs(tmp_path: Path) -> None:
    plan = _plan_default("cohere", tmp_path)
    model = plan.content_of("nemo_automodel/components/models/cohere/model.py")
    assert "query_states, key_states = apply_interleaved_rotary_pos_emb(" in model
    assert "logits = logits * self.config.logit_scale" in model
    tests = plan.content_of("tests/unit_tests/models/cohere/test_cohere_model.py")
    # Cohere's own tables repeat each frequency over a pair: the rotary test compares them so
    assert "ours = tuple(t[..., : t.shape[-1] // 2].repeat_interleave(2, dim=-1)" in tests


def test_kinds_without_rope_skip_the_rotation(tmp_path: Path) -> None:
    model = _plan_default("cohere2", tmp_path).content_of(
        "nemo_automodel/components/models/cohere2/model.py"
    )
    assert 'ROPE_TYPES = ("sliding_attention",)' in model
    assert "        if self.attention_type in ROPE_TYPES:\n            cos, sin = " in model


def test_torch_norms_and_head_biases_are_kept(tmp_path: Path) -> None:
    model = _plan_default("phi", tmp_path).content_of(
        "nemo_automodel/components/models/phi/model.py"
    )
    assert "self.final_layernorm = nn.LayerNorm(config.hidden_size" in model
    assert "nn.Linear(config.hidden_size, config.vocab_size, bias=True)" in model
    assert "return self.dense(attn_output), attn_weights" in model


@pytest.mark.parametrize(
    ("model_type", "split"),
    [
        ("phi3", "= self.qkv_proj(hidden_states).split("),
        ("persimmon", "qkv = self.query_key_value(hidden_states).view(*input_shape, -1, 3, "),
    ],
)
def test_fused_qkv_is_split_as_hf_splits_it(tmp_path: Path, model_type: str, split: str) -> None:
    plan = _plan_default(model_type, tmp_path)
    model = plan.content_of(f"nemo_automodel/components/models/{model_type}/model.py")
    assert split in model and "self.v_proj" not in model


def test_sigmoid_router_maps_onto_automodels_gate(tmp_path: Path) -> None:
    """GLM-4.5: sigmoid scores, correction bias, groups and scale read from the config."""
    model = _plan_default("glm4_moe", tmp_path).content_of(
        "nemo_automodel/components/models/glm4_moe/model.py"
    )
    assert '"score_func": "sigmoid_with_bias"' in model  # HF's -inf group mask
    assert '"force_e_score_correction_bias": True' in model
    assert '"n_expert_groups": config.n_group' in model
    assert '"n_limited_groups": config.topk_group' in model
    assert '"route_scale": config.routed_scaling_factor' in model
    assert (
        '"shared_expert_inter_dim": config.moe_intermediate_size * config.n_shared_experts' in model
    )


@pytest.mark.parametrize("model_type", ["olmo3", "mellum"])
def test_rope_read_per_kind_gets_a_table_per_kind(tmp_path: Path, model_type: str) -> None:
    """HF's rotary is asked for a kind's table (forward(x, position_ids, layer_type)) and reads
    config.rope_parameters[kind], though Olmo3's kinds rotate alike and Mellum's layers are all
    of one kind: NeMo's LlamaRotaryEmbedding would read the default theta from that dict."""
    plan = _plan_default(model_type, tmp_path)
    package = f"nemo_automodel/components/models/{model_type}"
    model = plan.content_of(f"{package}/model.py")
    assert "self.rotary_emb = LayerTypeRotaryEmbedding(config, layer_types(config))" in model
    assert "LlamaRotaryEmbedding" not in model
    assert f"{package}/rope_utils.py" in plan.paths()
    rope_utils = plan.content_of(f"{package}/rope_utils.py")
    # NeMo's default table reads the rotated share from the config, not rope_parameters
    assert "view.partial_rotary_factor = view.rope_parameters.get(" in rope_utils
    tests = plan.content_of(f"tests/unit_tests/models/{model_type}/test_{model_type}_model.py")
    assert "theirs = hf.model.rotary_emb(x, position_ids, kind)" in tests


def test_correction_bias_beside_the_router_is_renamed_onto_the_gate(tmp_path: Path) -> None:
    """EXAONE-MoE's checkpoint keeps mlp.e_score_correction_bias (transformers renames it to
    mlp.gate.e_score_correction_bias on load); AutoModel's Gate holds it under that name."""
    adapter = _plan_default("exaone_moe", tmp_path).content_of(
        "nemo_automodel/components/models/exaone_moe/state_dict_adapter.py"
    )
    assert r'(r"\.mlp\.e_score_correction_bias$", r".mlp.gate.e_score_correction_bias")' in adapter
    assert r'(r"\.mlp\.gate\.e_score_correction_bias$", r".mlp.e_score_correction_bias")' in adapter


def test_experts_weight_their_down_projection_output_as_hf(tmp_path: Path) -> None:
    """HF's experts scale each expert's output after the down projection; AutoModel's default
    scales the activation before it, which rounds differently in fp32."""
    model = _plan("Qwen/Qwen3-30B-A3B", tmp_path).content_of(
        "nemo_automodel/components/models/qwen3_moe/model.py"
    )
    assert '"apply_router_weight_after_down": True,' in model
    assert "scale it" in model and not HF_LINE.search(model)
