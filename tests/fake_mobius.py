"""A fake mobius checkout: the installed package laid out as the upstream repository."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

TEST_CONFIGS = '''"""Shared test configurations (a trimmed copy of the upstream layout)."""

from __future__ import annotations

import dataclasses

from mobius._configs import VisionConfig

CAUSAL_LM_CONFIGS: list[tuple[str, dict, bool]] = [
    # === Text Generation (Llama-compatible) ===
    ("llama", {}, True),
    ("mistral", {}, False),
    (
        "gemma2",
        {
            "attn_logit_softcapping": 50.0,
        },
        True,
    ),
]

_TINY_VISION = VisionConfig(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    image_size=28,
    patch_size=14,
    norm_eps=1e-6,
)

VL_CONFIGS: list[tuple[str, dict, bool]] = [
    # --- LLaVA family (vision-language, 3-model split) ---
    ("llava", {"vision": _TINY_VISION, "image_token_id": 32000}, True),
]
'''


def installed_mobius() -> Path:
    spec = importlib.util.find_spec("mobius")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def make_mobius_repo(repo: Path) -> Path:
    """A mobius checkout layout: the installed package under src/, upstream-shaped test files."""
    shutil.copytree(
        installed_mobius(),
        repo / "src" / "mobius",
        ignore=shutil.ignore_patterns("__pycache__", "*_test.py", "_testing"),
    )
    (repo / "tests").mkdir()
    (repo / "tests" / "_test_configs.py").write_text(TEST_CONFIGS)
    (repo / "testdata" / "cases" / "causal-lm").mkdir(parents=True)
    return repo


def tree_snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


# A stand-in for mobius' tests/build_graph_test.py, as checked at upstream 2026-12 (written
# here, not copied): one test per causal-LM test-config entry (ids are the model types), and
# what its cache check needs of the entry's layer types: a kind it knows as stateful, or
# attention (then it expects present.N.key / present.N.value).
BUILD_GRAPH_STANDIN = '''"""Build tests per test-config entry (a stand-in for the harness)."""

import pytest
from _test_configs import CAUSAL_LM_CONFIGS

STATELESS = {"mlp", "moe"}
STATEFUL = {"linear_attention", "lightning_attention", "mamba", "mamba2"}
ATTENTION = {"full_attention", "sliding_attention", "attention"}


@pytest.mark.parametrize(
    "model_type,config_overrides",
    [pytest.param(m, o, id=m) for m, o, _ in CAUSAL_LM_CONFIGS],
)
def test_graph_builds_without_weights(model_type, config_overrides):
    for index, kind in enumerate(config_overrides.get("layer_types") or ()):
        if kind not in STATELESS | STATEFUL:
            assert kind in ATTENTION, f"Missing present.{index}.key"
'''


def with_build_graph_standin(repo: Path) -> Path:
    (repo / "tests" / "build_graph_test.py").write_text(BUILD_GRAPH_STANDIN)
    pytest_settings = '[tool.pytest.ini_options]\npython_files = ["*_test.py"]\n'
    (repo / "pyproject.toml").write_text(pytest_settings)
    return repo
