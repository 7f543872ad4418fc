"""VLMs: the tower, the feature selection, the projector and the merge are read, cited at the
real sizes, and proved against the tiny HF model by the vision check."""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path

import pytest

from onboard.analysis import analyse
from onboard.analysis.features import feature_values
from onboard.analysis.vision import _read_vision
from onboard.analysis.vision.check import TOLERANCE, check_vision, merge
from onboard.analysis.vision.parts import find_parts
from onboard.analysis.vision.trace import trace_vlm
from onboard.hf_config import make_hf_config
from onboard.source import load_source
from onboard.tiny_model import build_tiny_model, perturb
from tests.analyses import analysis_of
from tests.hub_cache import fixture_config
from tests.new_types import default_config_dir

LLAVA = "llava-hf/llava-1.5-7b-hf"


def _real() -> dict:
    return json.loads(fixture_config(LLAVA).read_text())


def _analyse(tmp_path: Path, **changes) -> object:
    config = _real()
    vision = changes.pop("vision_config", {})
    config.update(changes)
    config["vision_config"].update(vision)
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return analyse(load_source(str(tmp_path)))


def test_llava_reads_a_clip_tower_layer_minus_two_and_an_mlp_projector() -> None:
    spec = analysis_of(LLAVA).spec
    real = _real()
    assert spec.kind == "vlm"
    assert spec.unresolved == ()
    vision = spec.vision
    tower = vision.tower
    assert vision.towers.kind == "vit"
    assert (tower.hidden_size, tower.num_layers, tower.image_size, tower.patch_size) == (
        real["vision_config"]["hidden_size"],
        real["vision_config"]["num_hidden_layers"],
        real["vision_config"]["image_size"],
        real["vision_config"]["patch_size"],
    )
    assert tower.attention.num_heads == real["vision_config"]["num_attention_heads"]
    assert tower.attention.scale == (1024 // 16) ** -0.5
    assert tower.mlp.activation == "quick_gelu"  # CLIP's default, nothing in config.json
    assert tower.class_token and tower.pre_norm and not tower.patch_bias
    assert vision.select.layers == (real["vision_feature_layer"],)
    assert vision.select.drop_class_token  # strategy "default"
    assert not vision.select.post_norm
    assert vision.select.layer_key == "vision_feature_layer"
    assert [(s.op, s.in_features, s.out_features) for s in vision.projector.steps] == [
        ("linear", 1024, 4096),
        ("activation", 0, 0),
        ("linear", 4096, 4096),
    ]
    assert vision.projector.steps[1].activation == real["projector_hidden_act"]
    assert vision.projector.activation_key == "projector_hidden_act"
    assert vision.merge.image_token_id == real["image_token_index"]
    assert vision.merge.image_token_key == "image_token_index"
    assert not vision.merge.scaled_before_merge
    assert spec.text.hidden_size == 4096  # the backbone is Llama's, from text_config
    assert dict(vision.prefixes) == {
        "text": "language_model.model.",
        "lm_head": "language_model.lm_head.",
        "tower": "vision_tower.",
        "projector": "multi_modal_projector.",
    }
    # Published LLaVA checkpoints keep CLIP's vision_model. level; transformers 5 drops it
    assert vision.published_aliases == (("vision_tower.vision_model.", "vision_tower."),)
    assert {n.split(".")[0] for n, _ in vision.tensors} == {"vision_tower", "multi_modal_projector"}


def test_llava_features_cite_the_config_and_the_model() -> None:
    analysis = analysis_of(LLAVA)
    values = feature_values(analysis.spec)
    assert values["vision.projector"] == "linear>gelu>linear"
    assert values["vision.feature_layers"] == "-2"
    cited = {e.where for key, items in analysis.spec.evidence for e in items if "vision" in key}
    assert "config.json:vision_feature_layer" in cited
    assert "config.json:vision_feature_select_strategy" in cited


def test_the_text_only_catalogue_has_no_vision_rows() -> None:
    assert not any(
        k.startswith("vision.") for k in feature_values(analysis_of("Qwen/Qwen3-0.6B").spec)
    )


def test_flags_switched_on_are_read_from_what_the_model_does(tmp_path: Path) -> None:
    spec = _analyse(
        tmp_path,
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        projector_hidden_act="silu",
        multimodal_projector_bias=False,
    ).spec
    assert spec.unresolved == ()
    assert spec.vision.select.layers == (-1,)
    assert not spec.vision.select.drop_class_token
    assert spec.vision.projector.steps[1].activation == "silu"
    assert not any(s.bias for s in spec.vision.projector.steps)


def test_several_feature_layers_are_concatenated(tmp_path: Path) -> None:
    spec = _analyse(tmp_path, vision_feature_layer=[-2, -5]).spec
    assert spec.unresolved == ()
    assert spec.vision.select.layers == (-2, -5)
    assert spec.vision.projector.steps[0].in_features == 2 * 1024


def test_a_siglip_tower_has_no_class_token_and_no_pre_norm(tmp_path: Path) -> None:
    spec = _analyse(
        tmp_path,
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        vision_config={"model_type": "siglip_vision_model", "image_size": 384},
    ).spec
    assert spec.unresolved == ()
    tower = spec.vision.tower
    assert not tower.class_token and not tower.pre_norm and tower.patch_bias
    assert tower.mlp.activation == "gelu_pytorch_tanh"


def test_a_tower_of_another_kind_is_refused_at_its_line(tmp_path: Path) -> None:
    spec = _analyse(tmp_path, vision_config={"model_type": "siglip2_vision_model"}).spec
    assert spec.vision is None
    (delta,) = spec.unresolved
    assert "Siglip2VisionModel is not a ViT" in delta.what and "nor a Pixtral tower" in delta.what
    assert delta.where.startswith("modeling_siglip2.py:")


@cache
def _tiny_llava():
    spec = analysis_of(LLAVA)
    config = make_hf_config(spec.tiny.config)
    model = perturb(build_tiny_model(config, auto_class="AutoModelForImageTextToText"))
    vision, _, deltas = _read_vision(model, config)
    assert deltas == ()
    parts = find_parts(model, config)
    return vision, model, parts, trace_vlm(model, parts, config, "post_layernorm")


def _sabotaged(**changes) -> tuple:
    vision, model, parts, trace = _tiny_llava()
    return check_vision(dataclasses.replace(vision, **changes), model, parts, trace)


def test_the_check_fails_on_the_wrong_feature_layer() -> None:
    vision = _tiny_llava()[0]
    deltas = _sabotaged(select=dataclasses.replace(vision.select, layers=(-3,)))
    assert any("receives" in d.what and "modeling_llava.py" in d.where for d in deltas)


def test_the_check_fails_on_a_swapped_projector_activation() -> None:
    vision = _tiny_llava()[0]
    steps = tuple(
        dataclasses.replace(s, activation="silu") if s.op == "activation" else s
        for s in vision.projector.steps
    )
    deltas = _sabotaged(projector=dataclasses.replace(vision.projector, steps=steps))
    assert any("LlavaMultiModalProjector computes" in d.what for d in deltas)


def test_the_check_fails_on_an_image_token_off_by_one() -> None:
    vision = _tiny_llava()[0]
    token = vision.merge.image_token_id - 1
    (delta,) = _sabotaged(merge=dataclasses.replace(vision.merge, image_token_id=token))
    assert "0 placeholders" in delta.detail


def test_the_check_fails_on_a_swapped_tower_activation() -> None:
    vision = _tiny_llava()[0]
    tower = dataclasses.replace(
        vision.tower, mlp=dataclasses.replace(vision.tower.mlp, activation="gelu")
    )
    deltas = _sabotaged(towers=dataclasses.replace(vision.towers, vit=tower))
    # every layer is blamed where its class computes, then the features they feed
    layers = [d for d in deltas if "CLIPEncoderLayer" in d.what]
    assert len(layers) == vision.tower.num_layers
    assert all(d.where.startswith("modeling_clip.py:") for d in layers)


def test_reusing_row_zeros_features_for_row_one_changes_the_merge() -> None:
    """The trace's two rows hold different images, so a merge that gives every row the first
    row's features (mobius' LLaVA embedding) cannot match HF's."""
    vision, _, _, trace = _tiny_llava()
    reused = trace.projector_out[:1].expand_as(trace.projector_out)
    wrong = merge(vision, trace.text_embeddings, trace.input_ids, reused)
    right = merge(vision, trace.text_embeddings, trace.input_ids, trace.projector_out)
    assert float((right - trace.merged).abs().max()) <= TOLERANCE
    assert float((wrong - trace.merged).abs().max()) > 100 * TOLERANCE


def _blockers(target: str, spec) -> tuple[str, ...]:
    from onboard.targets.base import load_target

    loaded = load_target(target)
    return loaded.propose(spec, loaded.open_library(None), treat_as_new=True).blockers


def test_automodel_generates_llava_and_names_what_it_cannot(tmp_path: Path) -> None:
    assert _blockers("automodel", analysis_of(LLAVA).spec) == ()
    # PaliGemma's prefix attends both ways: the generated text model's mask is causal; refused
    # at the line where HF builds the prefix from the token types
    blockers = _blockers("automodel", analyse(_default(tmp_path, "paligemma")).spec)
    (prefix,) = [b for b in blockers if "both ways" in b]
    assert "a bidirectional prefix: the tokens token_type_ids type 0" in prefix
    assert f"({_paligemma_blocks_line()})" in prefix


@pytest.mark.slow
def test_mobius_generates_llava_and_names_what_it_cannot_build_on(tmp_path: Path) -> None:
    assert _blockers("mobius", analysis_of(LLAVA).spec) == ()
    # PaliGemma's tower, projector, embedding scale and bidirectional prefix are generated
    assert _blockers("mobius", analyse(_default(tmp_path, "paligemma")).spec) == ()
    # several feature layers: the generated ViT keeps each read state (VipLLaVA's way)
    several = _analyse(tmp_path / "several", vision_feature_layer=[-2, -5]).spec
    assert len(several.vision.select.layers) == 2
    assert _blockers("mobius", several) == ()


def _paligemma_blocks_line() -> str:
    """Where transformers' PaliGemma builds its blocks from the token types (file:line)."""
    import inspect

    from transformers.models.paligemma import modeling_paligemma

    lines = inspect.getsource(modeling_paligemma).splitlines()
    number = next(i for i, line in enumerate(lines, 1) if "= torch.where(token_type_ids" in line)
    return f"modeling_paligemma.py:{number}"


def _default(tmp_path: Path, model_type: str):
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type).to_dict()
    (tmp_path / "config.json").write_text(json.dumps(config, default=str))
    return load_source(str(tmp_path))


@pytest.mark.slow
def test_paligemma_reads_the_post_normed_last_state_and_a_linear_projector(
    tmp_path: Path,
) -> None:
    spec = analyse(_default(tmp_path, "paligemma")).spec
    assert spec.unresolved == ()
    # token types 0 (the image and the prompt) see each other both ways: read from HF's mask,
    # cited where HF builds the blocks
    assert spec.vision.merge.token_blocks == "prefix"
    source, probe = dict(spec.evidence)["vision.merge.token_blocks"]
    assert source.where == _paligemma_blocks_line()
    assert "token_type_ids == 0" in source.detail and "typed 0" in probe.detail
    assert spec.vision.select.post_norm and not spec.vision.select.drop_class_token
    assert [s.op for s in spec.vision.projector.steps] == ["linear"]
    # Gemma's embedding scales token rows itself: the image features enter unscaled
    assert spec.text.embedding_scale == "sqrt_hidden"
    assert spec.vision.merge.scaled_before_merge


def test_gemma3_pools_norms_and_projects_and_lets_image_tokens_see_each_other(
    tmp_path: Path,
) -> None:
    _default(tmp_path, "gemma3")
    config = json.loads((tmp_path / "config.json").read_text())
    # Gemma 3's published towers: 896 / 14 = 64 patches a side, pooled to 16 x 16 = 256 tokens
    config["vision_config"].update(image_size=896, patch_size=14)
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = analyse(load_source(str(tmp_path))).spec
    assert spec.unresolved == ()
    vision = spec.vision
    steps = vision.projector.steps
    assert [s.op for s in steps] == ["avg_pool", "rms_norm", "matmul"]
    assert steps[0].kernel == 4  # at the real sizes, though the tiny tower pools 4 x 4 by 2
    assert steps[0].tokens_key == "mm_tokens_per_image"
    real = make_hf_config(config)
    assert steps[1].weight_offset == 1.0  # Gemma's (1 + w)
    assert (steps[2].in_features, steps[2].out_features) == (
        real.vision_config.hidden_size,
        real.text_config.hidden_size,
    )
    assert vision.select.post_norm and vision.merge.scaled_before_merge
    assert vision.merge.token_blocks == "images"  # hybrid notes M13: mobius' gemma3 is causal
    assert dict(spec.evidence)["vision.merge.token_blocks"][0].where.startswith("modeling_gemma3")
    assert analysis_of(LLAVA).spec.vision.merge.token_blocks == ""
    # generated with image blocks (mobius' own gemma3 decoder is causal: hybrid notes M13)
    assert _blockers("mobius", spec) == ()


@pytest.mark.slow
def test_parts_read_for_videos_only_are_named_with_their_tensors(tmp_path: Path) -> None:
    """LLaVA-NeXT-Video's frame pooler in its conv mode has weights only videos use: they are
    named, with the prefix the generated weight map skips; the average mode has none."""
    (tmp_path / "conv").mkdir()
    conv = default_config_dir("llava_next_video", tmp_path / "conv", spatial_pool_mode="conv")
    spec = analyse(load_source(str(conv))).spec
    (pooler,) = spec.vision.other_paths
    assert pooler.part == "LlavaNextVideoModel.vision_resampler (LlavaNextVideoPooler)"
    assert (pooler.path, pooler.prefix) == ("videos", "model.vision_resampler.")
    assert pooler.tensors == tuple(f"model.vision_resampler.pool.{n}" for n in ("bias", "weight"))
    (cited,) = dict(spec.evidence)["vision.other_paths"]
    assert cited.where.startswith("modeling_llava_next_video.py:")
    assert cited.detail.endswith("2 weight tensor(s): read for videos only")
    average = default_config_dir("llava_next_video", tmp_path / "average")
    spec = analyse(load_source(str(average))).spec
    assert spec.vision.other_paths == () and spec.unresolved == ()
    (cited,) = dict(spec.evidence)["vision.other_paths"]
    assert cited.detail.endswith("0 weight tensor(s): read for videos only")


@pytest.mark.parametrize(
    ("model_type", "message"),
    [
        pytest.param(
            "llama4", "holds its tower and language model itself", marks=pytest.mark.slow
        ),  # 37 s: the refusal comes after analysing Llama 4's text model
        # neither sub-config (a VQ image tokenizer); Fuyu, without vision_config but with the
        # patch keys of one linear, is read (test_vision_linear_patch.py)
        ("chameleon", "without text_config or vision_config"),
    ],
)
def test_vlms_of_other_shapes_are_refused_by_name(
    tmp_path: Path, model_type: str, message: str
) -> None:
    from onboard.errors import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match=message):
        analyse(_default(tmp_path, model_type))


def test_a_tower_of_images_that_are_not_square_is_refused_by_name(tmp_path: Path) -> None:
    """InternVL sizes its tower by (height, width) pairs: equal sides are read, others not."""
    from transformers import AutoConfig

    from onboard.errors import UnsupportedFeatureError

    config = AutoConfig.for_model("internvl").to_dict()
    config["vision_config"]["image_size"] = [448, 336]
    (tmp_path / "config.json").write_text(json.dumps(config, default=str))
    with pytest.raises(UnsupportedFeatureError, match=r"image_size \[448, 336\] is not square"):
        analyse(load_source(str(tmp_path)))


@pytest.mark.parametrize("layers", [0, 10_000])
def test_a_tower_of_no_or_absurdly_many_layers_is_refused(tmp_path: Path, layers: int) -> None:
    """The tiny tower keeps every real layer: a hostile depth must not build a huge model."""
    from onboard.errors import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match=f"tower has {layers} layers"):
        _analyse(tmp_path, vision_config={"num_hidden_layers": layers})


def test_vipllava_reads_five_layers_by_its_plural_key_and_a_norm_first_projector(
    tmp_path: Path,
) -> None:
    spec = analyse(_default(tmp_path, "vipllava")).spec
    assert spec.unresolved == ()
    select = spec.vision.select
    real = json.loads((tmp_path / "config.json").read_text())
    assert select.layers == tuple(real["vision_feature_layers"])
    assert select.layer_key == "vision_feature_layers"
    assert select.drop_class_token and select.strategy_key is None  # always drops it
    steps = spec.vision.projector.steps
    assert [s.op for s in steps] == ["layer_norm", "linear", "activation", "linear"]
    assert steps[1].in_features == len(select.layers) * spec.vision.tower.hidden_size
    # both targets generate it: mobius' ViT keeps each read state, AutoModel reuses HF's tower
    assert _blockers("mobius", spec) == ()
    assert _blockers("automodel", spec) == ()
