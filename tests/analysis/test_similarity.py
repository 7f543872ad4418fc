from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from onboard.analysis.ancestry import role_of
from onboard.analysis.similarity import Similarity, compare_with_transformers, guess_roles
from onboard.errors import BadInputError
from onboard.source import SourceFile

REMOTE = Path(__file__).parents[1] / "fixtures" / "remote"
EMBER = REMOTE / "ember-tiny" / "modeling_ember.py"
QUILL = REMOTE / "quill-tiny" / "modeling_quill.py"


def _transformers_modeling(model_type: str) -> SourceFile:
    spec = importlib.util.find_spec("transformers")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    return SourceFile.read(root / "models" / model_type / f"modeling_{model_type}.py")


def _compare(modeling: SourceFile, explained: tuple[int, ...] = ()) -> Similarity:
    return compare_with_transformers(modeling, guess_roles(modeling), explained)


@pytest.fixture(scope="module")
def ember() -> SourceFile:
    return SourceFile.read(EMBER)


@pytest.fixture(scope="module")
def quill() -> SourceFile:
    return SourceFile.read(QUILL)


@pytest.fixture(scope="module")
def reviews(ember: SourceFile, quill: SourceFile) -> dict[str, Similarity]:
    return {"ember": _compare(ember), "quill": _compare(quill)}


def test_guess_roles_by_class_name_suffix(ember: SourceFile, quill: SourceFile) -> None:
    assert guess_roles(ember) == {
        "rotary": "EmberRotaryEmbedding",
        "norm": "EmberRMSNorm",
        "mlp": "EmberMLP",
        "attention": "EmberAttention",
        "decoder_layer": "EmberDecoderLayer",
        "model": "EmberModel",
        "causal_lm": "EmberForCausalLM",
    }
    assert "norm" not in guess_roles(quill)  # quill uses torch's nn.LayerNorm, no class of its own


@pytest.mark.parametrize("name", ["ember", "quill"])
def test_fixture_ranking_and_one_match_per_role(
    name: str, reviews: dict[str, Similarity], ember: SourceFile, quill: SourceFile
) -> None:
    review = reviews[name]
    assert len(review.ranking) == 3
    scores = [score for _, score in review.ranking]
    assert all(0 < score <= 1 for score in scores)
    assert scores == sorted(scores, reverse=True)
    roles = guess_roles(ember if name == "ember" else quill)
    matched = {m.role: m for m in review.roles if m.role != "function"}
    assert {role: m.remote_class for role, m in matched.items()} == roles
    for match in matched.values():
        assert role_of(match.hf_class) == match.role
        assert 0 < match.similarity <= 1
    helpers = [m.remote_class for m in review.roles if m.role == "function"]
    assert "apply_rotary_pos_emb" in helpers  # called by the attention class


@pytest.mark.parametrize(
    ("name", "line", "fragment"),
    [
        ("ember", 180, "bias=True"),  # q_proj bias, hard-coded
        ("ember", 314, "self.embed_scale = config.hidden_size**0.5"),
        ("ember", 421, "logits / self.config.final_logit_softcapping"),
        ("ember", 110, "torch.cat([q_embed, q_pass], dim=-1)"),  # partial RoPE, in a helper
        ("quill", 234, "eps=config.layer_norm_eps, bias=True"),  # post-attention LayerNorm
        ("quill", 297, "self.norm = nn.LayerNorm("),
        ("quill", 155, "config.sliding_window if self.layer_type"),
    ],
)
def test_cited_feature_line_is_listed_until_explained(
    name: str,
    line: int,
    fragment: str,
    reviews: dict[str, Similarity],
    ember: SourceFile,
    quill: SourceFile,
) -> None:
    modeling = ember if name == "ember" else quill
    assert fragment in modeling.text.splitlines()[line - 1]  # FEATURES.md cites this line
    where = f"{modeling.name}:{line}"
    listed = {item.where: item for item in reviews[name].unexplained}
    assert where in listed
    assert fragment in listed[where].code

    explained = _compare(modeling, (line,))
    assert {item.where for item in explained.unexplained} == set(listed) - {where}


def test_lines_the_closest_class_shares_are_not_listed(reviews: dict[str, Similarity]) -> None:
    # ember's per-head q/k norms are written exactly as in Qwen3-style attention.
    listed = {item.where for item in reviews["ember"].unexplained}
    assert "modeling_ember.py:205" not in listed
    assert "modeling_ember.py:206" not in listed


def test_every_line_explained_leaves_nothing(ember: SourceFile) -> None:
    everything = tuple(range(1, len(ember.text.splitlines()) + 1))
    assert _compare(ember, everything).unexplained == ()


def test_transformers_file_compared_with_itself() -> None:
    qwen3 = _transformers_modeling("qwen3")
    review = _compare(qwen3)
    assert review.ranking[0] == ("qwen3", 1.0)
    assert review.unexplained == ()
    assert all(match.similarity == 1.0 for match in review.roles)
    assert {m.model_type for m in review.roles if m.role != "function"} == {"qwen3"}


def test_renamed_copy_still_ranks_its_model_first() -> None:
    qwen3 = _transformers_modeling("qwen3")
    text = qwen3.text.replace("Qwen3", "Zebra")
    zebra = SourceFile("modeling_zebra.py", Path("modeling_zebra.py"), "", text)
    review = _compare(zebra)
    model_type, score = review.ranking[0]
    assert model_type == "qwen3"
    assert score >= 0.99
    attention = next(m for m in review.roles if m.role == "attention")
    assert (attention.remote_class, attention.similarity) == ("ZebraAttention", 1.0)
    assert review.unexplained == ()


_MLP = '''
class ZebraMLP(nn.Module):
    """A gated MLP, laid out differently from transformers'."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        # the same projections, wrapped
        self.gate_proj = nn.Linear(
            self.hidden_size,
            self.intermediate_size,
            bias=False,
        )
        self.up_proj = (
            nn.Linear(self.hidden_size, {width}, bias=False)
        )
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
'''


def _mlp(width: str) -> SourceFile:
    text = _MLP.replace("{width}", width)
    return SourceFile("modeling_zebra.py", Path("modeling_zebra.py"), "", text)


def test_layout_comments_and_names_are_not_differences() -> None:
    review = compare_with_transformers(_mlp("self.intermediate_size"), {"mlp": "ZebraMLP"}, ())
    (match,) = review.roles
    assert match.similarity == 1.0
    assert review.unexplained == ()


def test_a_changed_number_is_listed_on_its_own_line() -> None:
    modeling = _mlp("2 * self.intermediate_size")
    review = compare_with_transformers(modeling, {"mlp": "ZebraMLP"}, ())
    line = next(n for n, text in enumerate(modeling.text.splitlines(), 1) if "2 *" in text)
    assert [(item.where, item.code, item.role) for item in review.unexplained] == [
        (
            f"modeling_zebra.py:{line}",
            "nn.Linear(self.hidden_size, 2 * self.intermediate_size, bias=False)",
            "mlp",
        )
    ]


def test_docstring_text_in_column_0_does_not_cut_a_class(
    quill: SourceFile, reviews: dict[str, Similarity]
) -> None:
    docstring = "GQA attention with biased q/k/v/o projections and full-head-dim RoPE."
    assert docstring in quill.text
    text = quill.text.replace(docstring, docstring.replace(" with ", "\nwith "))
    review = _compare(SourceFile(quill.name, quill.path, "", text))
    assert review.roles == reviews["quill"].roles
    assert [i.code for i in review.unexplained] == [i.code for i in reviews["quill"].unexplained]


def test_roles_naming_no_class_of_the_file_are_skipped(quill: SourceFile) -> None:
    roles = {"norm": "LayerNorm", "mlp": "QuillMLP"}
    review = compare_with_transformers(quill, roles, ())
    assert [m.role for m in review.roles] == ["mlp"]


def test_output_is_deterministic(quill: SourceFile, reviews: dict[str, Similarity]) -> None:
    assert _compare(quill) == reviews["quill"]


def test_invalid_python_is_bad_input() -> None:
    broken = SourceFile("modeling_broken.py", Path("modeling_broken.py"), "", "class A(:\n")
    with pytest.raises(BadInputError, match=r"modeling_broken\.py"):
        compare_with_transformers(broken, {}, ())
