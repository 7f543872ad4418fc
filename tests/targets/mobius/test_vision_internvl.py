"""InternVL (InternViT with layer scale and bare parameter tables, a pixel shuffle run before the
projector module, Qwen2 text) generated into mobius from transformers' default config.

The default tower's q/k/v carry no bias (``attention_bias`` false) while its output projection
always does, so the generated attention reads the flag; its sizes are (height, width) pairs.
"""

from __future__ import annotations

import pytest

from onboard.errors import UnsupportedFeatureError
from onboard.parity.report import Status
from onboard.pipeline import NewOptions, onboard_new
from onboard.tiny_vision import pixel_shuffle_factor, square_side
from tests.targets.mobius.checks import passed_module, statuses
from tests.targets.mobius.sabotage import parity_with

CHECKS = {"weights", "image-features", "merged-embeddings", "prefill", "decode", "text-only"}


@pytest.fixture(scope="module")
def internvl(tmp_path_factory: pytest.TempPathFactory):
    from tests.new_types import default_config_dir

    root = tmp_path_factory.mktemp("internvl")
    model = default_config_dir("internvl", root / "hub")
    return onboard_new(NewOptions(model=str(model), out=root / "out", treat_as_new=True))


def test_internvl_generates_into_mobius_with_zero_edits(internvl) -> None:
    text = passed_module(internvl, CHECKS)
    assert internvl.parity.weights.unread == ()
    assert "pixel_shuffle_factor=round(1 / top.downsample_ratio)," in text
    assert "vision_attention_bias=top.vision_config.attention_bias," in text
    assert "image_size=top.vision_config.image_size[0]," in text
    assert "op.Mul(attended, self.lambda_1)" in text


_ZERO = "op.Constant(value_float=0.0)"


@pytest.mark.parametrize(
    "edits",
    [
        # the attention's layer scale left out (its weights still held)
        [("op.Mul(attended, self.lambda_1)", f"op.Add(attended, op.Mul(self.lambda_1, {_ZERO}))")],
        # the two scales swapped: lambda_1 read as the MLP's, lambda_2 as the attention's
        pytest.param(
            [
                ("op.Mul(attended, self.lambda_1)", "op.Mul(attended, self.LAMBDA)"),
                ("op.Mul(transformed, self.lambda_2)", "op.Mul(transformed, self.lambda_1)"),
                ("self.LAMBDA", "self.lambda_2"),
            ],
            marks=pytest.mark.slow,
        ),
        # the position table not added (its weights still held)
        pytest.param(
            [
                (
                    "op.Add(embeddings, self.position_embeddings)",
                    f"op.Add(embeddings, op.Mul(self.position_embeddings, {_ZERO}))",
                )
            ],
            marks=pytest.mark.slow,
        ),
        # the pixel shuffle's blocks taken column-major
        [("perm=[0, 1, 3, 2, 4, 5]", "perm=[0, 3, 1, 4, 2, 5]")],
    ],
)
def test_internvl_parity_fails_without_each_tower_part(internvl, edits) -> None:
    module = internvl.root / internvl.plan.model_file
    generated = module.read_text()
    try:
        for old, new in edits[:-1]:
            assert old in module.read_text()
            module.write_text(module.read_text().replace(old, new, 1))
        report = parity_with(internvl, *edits[-1])
    finally:  # the next case breaks the module as generated
        module.write_text(generated)
    assert statuses(report)["image-features"] is Status.FAIL


def test_square_pairs_are_one_side_and_other_pairs_are_refused() -> None:
    assert square_side([448, 448], "image_size") == 448
    assert square_side(14, "patch_size") == 14
    with pytest.raises(UnsupportedFeatureError, match=r"vision_config.image_size .* not square"):
        square_side([448, 336], "image_size")


def test_a_downsample_ratio_is_the_pixel_shuffle_factor_inverted() -> None:
    class Config:
        downsample_ratio = 0.5

    assert pixel_shuffle_factor(Config()) == 2
    Config.downsample_ratio = 0.3  # 1 / 0.3 folds no whole block
    assert pixel_shuffle_factor(Config()) is None


@pytest.mark.slow
def test_internvl_with_its_optional_flags_on_generates_with_zero_edits(tmp_path) -> None:
    """Biased q/k/v and the tower's post norm (use_mean_pooling false: HF reads the normed last
    state, folded by the pixel shuffle) are followed from the config."""
    from tests.new_types import default_config_dir

    flags = {"attention_bias": True, "use_mean_pooling": False}
    model = default_config_dir("internvl", tmp_path / "hub", vision_config=flags)
    result = onboard_new(NewOptions(model=str(model), out=tmp_path / "out", treat_as_new=True))
    text = passed_module(result, CHECKS)
    assert "hidden_states = self.layernorm(op, hidden_states)" in text
