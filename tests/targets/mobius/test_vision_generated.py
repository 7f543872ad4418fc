"""LLaVA (CLIP tower, MLP projector, Llama text) regenerated into mobius' vision-language task.

Parity compares the image features, the merged embeddings, a batch of two rows with their own
images, three decode steps and a text-only prompt; a generated module that reuses the first row's
features, reads the wrong hidden state, swaps the projector's activation or marks the wrong
placeholder fails it. mobius' own LLaVAModel fails it too (its weights never load).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.codegen import lint_python
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.targets.mobius.plan import STYLE
from tests.hub_cache import fixture_config
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import config_classes, parity_with

LLAVA = "llava-hf/llava-1.5-7b-hf"
CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}


def _new(out: Path, model: Path | None = None, **options):
    source = model or fixture_config(LLAVA).parent
    return onboard_new(NewOptions(model=str(source), out=out, treat_as_new=True, **options))


def test_llava_regenerates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    result = _new(tmp_path / "out")
    text = passed_module(result, CHECKS)
    report = result.parity
    # the tower's last layer and its post norm: HF computes them and never reads the result
    unread = report.weights.unread
    assert len(unread) == 18
    assert all(".layers.23." in n or "post_layernorm" in n for n in unread)
    assert 'default_task = "vision-language"' in text
    assert "vision_feature_layer=top.vision_feature_layer" in text
    assert 'drop_class_token=top.vision_feature_select_strategy == "default"' in text
    assert "projector_hidden_act=top.projector_hidden_act" in text
    patch = (result.root / "onboard.patch").read_text()
    assert 'ModelRegistration(LlavaMultiModalModel, task="vision-language")' in patch


def _sabotaged(tmp_path: Path, old: str, new: str, model: Path | None = None) -> dict:
    """The generated module with one line broken, through parity: status per default check."""
    report = parity_with(_new(tmp_path / "out", model=model, parity=False), old, new)
    return statuses(report)


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        # mobius' own LLaVA embedding: the feature count restarts on every row
        (
            "row = op.Sub(op.CumSum(flat, op.Constant(value_int=0)), op.Constant(value_int=1))\n"
            "        row = op.Reshape(op.Clip(row, op.Constant(value_int=0)), op.Shape(input_ids))",
            "row = op.Sub(op.CumSum(op.Cast(is_image, to=ir.DataType.INT64), "
            "op.Constant(value_int=1)), op.Constant(value_int=1))\n"
            "        row = op.Clip(row, op.Constant(value_int=0))",
            "merged-embeddings",
        ),
        (
            "vision_feature_layer=top.vision_feature_layer,",
            "vision_feature_layer=top.vision_feature_layer + 1,",
            "image-features",
        ),
        pytest.param(  # image-features is covered by feature-layer by default
            "projector_hidden_act=top.projector_hidden_act,",
            'projector_hidden_act="silu",',
            "image-features",
            marks=pytest.mark.slow,
        ),
        (
            "self._image_token_id = config.image_token_id",
            "self._image_token_id = config.image_token_id - 1",
            "merged-embeddings",
        ),
    ],
    ids=["row-zero-features-reused", "feature-layer", "projector-activation", "image-token"],
)
@pytest.mark.slow
def test_a_wrong_vision_side_fails_parity(tmp_path: Path, old: str, new: str, failing: str) -> None:
    checks = _sabotaged(tmp_path, old, new)
    assert checks["weights"] is Status.PASS
    assert checks[failing] is Status.FAIL
    assert checks["prefill"] is Status.FAIL


def test_flags_switched_on_are_followed(tmp_path: Path) -> None:
    """Layer -1 with the class token kept, a silu projector without biases: still zero edits."""
    config = json.loads(fixture_config(LLAVA).read_text())
    config.update(
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        projector_hidden_act="silu",
        multimodal_projector_bias=False,
    )
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    result = _new(tmp_path / "out", model=model)
    assert result.parity is not None and result.parity.passed, [
        c.to_dict() for c in result.parity.failures
    ]
    assert len(result.parity.weights.unread) == 2  # only the post norm, every layer is read


def _siglip_llava(root: Path) -> Path:
    """LLaVA over a SigLIP tower (no class token, no pre-norm, a biased patch convolution, a
    pooling head), reading the last hidden state with every token."""
    config = json.loads(fixture_config(LLAVA).read_text())
    config.update(vision_feature_layer=-1, vision_feature_select_strategy="full")
    config["vision_config"] = {
        "model_type": "siglip_vision_model",
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "image_size": 384,
        "patch_size": 14,
    }
    root.mkdir()
    (root / "config.json").write_text(json.dumps(config))
    return root


def test_a_siglip_tower_is_generated_and_passes(tmp_path: Path) -> None:
    """mobius has no ViT that computes SigLIP's hidden states (its VisionModel post-norms every
    token): the tower is generated from the spec."""
    result = _new(tmp_path / "out", model=_siglip_llava(tmp_path / "model"))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    # the post norm and the pooling head: HF computes them and the projector never reads them
    unread = report.weights.unread
    # named as published checkpoints name them (vision_tower.vision_model.)
    assert {n.split(".")[2] for n in unread} == {"post_layernorm", "head"}
    text = (result.root / result.plan.model_file).read_text() + config_classes(result)
    module = (result.root / result.plan.model_file).read_text()
    assert lint_python(module, filename="llava.py", style=STYLE) == ""
    assert "class LlavaVisionTransformer(nn.Module)" in text
    assert "CLIPVisionModel" not in text


def test_a_generated_tower_with_the_wrong_activation_fails(tmp_path: Path) -> None:
    checks = _sabotaged(
        tmp_path,
        "activation=vision.hidden_act,",
        'activation="quick_gelu",',
        model=_siglip_llava(tmp_path / "model"),
    )
    assert checks["weights"] is Status.PASS
    assert checks["image-features"] is Status.FAIL


def test_mobius_own_llava_model_loads_no_weights(tmp_path: Path) -> None:
    """Hybrid notes M1: LLaVAModel renames nothing, so no checkpoint tensor reaches its graphs."""
    result = onboard_new(NewOptions(model=str(fixture_config(LLAVA).parent), out=tmp_path))
    assert result.proposal.already_supported is not None
    report = result.parity
    assert report is not None and not report.passed
    weights = next(c for c in report.checks if c.name == "weights")
    assert weights.status is Status.FAIL
    assert "fills no parameter" in weights.detail
    (bug,) = report.bugs
    assert bug.id == "hybrid M1"
    assert "0 placed" in bug.evidence


def test_a_graph_that_stops_a_layer_early_drops_a_weight_hf_reads(tmp_path: Path) -> None:
    """Only what HF never reads may be left out: one layer less leaves layer 22 unused."""
    report = parity_with(
        _new(tmp_path / "out", parity=False),
        "vision_feature_layer=top.vision_feature_layer,",
        "vision_feature_layer=top.vision_feature_layer - 1,",
    )
    weights = next(c for c in report.checks if c.name == "weights")
    assert weights.status is Status.FAIL
    assert "vision_tower.vision_model.encoder.layers.22." in weights.detail
    assert "is not used" in weights.detail


def test_a_checkout_keeps_its_own_llava_module(mobius_repo: Path) -> None:
    """mobius' llava.py serves 27 registry keys: regenerating llava never replaces it, the
    generated model goes beside it (``onboard.targets.beside``)."""
    source = str(fixture_config(LLAVA).parent)
    library_module = mobius_repo / "src/mobius/models/llava.py"
    before = library_module.read_bytes()
    onboard_new(NewOptions(model=source, repo=mobius_repo, treat_as_new=True, parity=False))
    assert library_module.read_bytes() == before
    assert (mobius_repo / "src/mobius/models/llava_onboarded.py").is_file()
    # (parity imports mobius from the checkout, which a test process that imported the installed
    # one cannot: the command line does it, as README's real-checkout run shows)
    onboard_new(
        NewOptions(
            model=source, repo=mobius_repo, treat_as_new=True, name="llava_clip", parity=False
        )
    )
    registry = (mobius_repo / "src/mobius/_registry.py").read_text()
    assert '"llava": ModelRegistration(LlavaClipMultiModalModel, task="vision-language")' in (
        registry
    )
    configs = (mobius_repo / "tests/_test_configs.py").read_text()
    assert "from mobius._configs import LlavaClipMultiModalConfig, VisionConfig" in configs
    assert '"_config_cls": LlavaClipMultiModalConfig' in configs
    assert (mobius_repo / "testdata/cases/vision-language/llava_clip.yaml").is_file()


# Gemma 3: a SigLIP tower read at its post-normed last state, a projector that pools the patch
# grid, RMS-normalises by (1 + w) and multiplies by a bare weight, token embeddings scaled before
# the merge, and a text backbone with generated (sandwich-norm, per-kind RoPE) layers.
# transformers' default Gemma3Config pools a 14 x 14 grid to 16 x 16 tokens (HF cannot build
# it); Gemma 3 4B's tower sees 896-pixel images in 14-pixel patches.
GEMMA3_TOWER = {"image_size": 896, "patch_size": 14}


def _gemma3(root: Path, **tower) -> Path:
    from tests.new_types import default_config_dir

    return default_config_dir("gemma3", root, vision_config=tower)


def test_a_config_whose_tokens_do_not_pool_the_grid_is_bad_input(tmp_path: Path) -> None:
    from onboard.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="mm_tokens_per_image 256 does not pool"):
        _new(tmp_path / "out", model=_gemma3(tmp_path))


def test_gemma3_regenerates_into_mobius_with_zero_edits(tmp_path: Path) -> None:
    """HF is given token_type_ids marking the placeholders, as Gemma 3's processor does: each
    image's tokens see each other both ways (mobius' own decoder is causal: hybrid M13)."""
    result = _new(tmp_path / "out", model=_gemma3(tmp_path, **GEMMA3_TOWER))
    report = result.parity
    assert report is not None and report.passed, [c.to_dict() for c in report.failures]
    default = statuses(report)
    assert default == dict.fromkeys(CHECKS, Status.PASS)
    # the cpu EP's GroupQueryAttention rewrite drops the attention bias that carries the image
    # blocks (M5), confirmed by building the same graph without the rewrite
    assert "M5" in [b.id for b in report.bugs]
    text = (result.root / result.plan.model_file).read_text() + config_classes(result)
    module = (result.root / result.plan.model_file).read_text()
    assert lint_python(module, filename="gemma3.py", style=STYLE) == ""
    assert "self.mm_soft_emb_norm = OffsetRMSNorm(" in text
    assert "op.MatMul(features, self.mm_input_projection_weight)" in text
    assert "features = self._average_pool(op, features)" in text
    assert "mm_tokens_per_image=top.mm_tokens_per_image" in text
    assert "GemmaScaledWordEmbedding(" in text.split("Embedding(nn.Module)")[1]
    assert "block_sequence_ids=image_blocks(op, input_ids, self._image_token_id)" in text
    assert "default_task = Gemma3VisionLanguageTask()" in text
    patch = (result.root / "onboard.patch").read_text()
    assert '"gemma3": ModelRegistration(Gemma3MultiModalModel),' in patch


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        (  # the projector's norm scaling by w instead of (1 + w): (1 + w) x^ - x^
            "features = self.mm_soft_emb_norm(op, features)",
            "features = op.Sub(self.mm_soft_emb_norm(op, features), op.Div(features, op.Sqrt("
            "op.Add(op.ReduceMean(op.Mul(features, features), op.Constant(value_ints=[-1])), "
            "1e-6))))",
            "image-features",
        ),
        (  # the token rows left unscaled before the merge
            "op.Where(op.Unsqueeze(filled, [-1]), rows, embeddings)",
            "op.Where(op.Unsqueeze(filled, [-1]), rows, op.Div(embeddings, 2.0))",
            "merged-embeddings",
        ),
        (  # causal image blocks, as mobius' own gemma3 decoder (hybrid M13)
            "block_sequence_ids=image_blocks(op, input_ids, self._image_token_id),",
            "block_sequence_ids=None,",
            "prefill",
        ),
    ],
    ids=["projector-norm-offset", "token-scale", "causal-image-blocks"],
)
@pytest.mark.slow
def test_a_wrong_gemma3_projector_scale_or_mask_fails_parity(
    tmp_path: Path, old: str, new: str, failing: str
) -> None:
    checks = _sabotaged(tmp_path, old, new, model=_gemma3(tmp_path, **GEMMA3_TOWER))
    assert checks["weights"] is Status.PASS
    assert checks[failing] is Status.FAIL
    assert checks["prefill"] is Status.FAIL
