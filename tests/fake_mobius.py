"""A fake mobius checkout: the installed package laid out as the upstream repository."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

TEST_CONFIGS = '''"""Shared test configurations (a trimmed copy of the upstream layout)."""

from __future__ import annotations

import dataclasses

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
