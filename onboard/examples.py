"""Regenerate ``generated_examples/``: the real output of ``onboard new`` for one model per kind.

Each example runs the installed ``onboard`` command offline against an empty HF cache, so it reads
the bundled config snapshot exactly as a user without Hub access would. ``make examples`` writes
them; ``tests/test_examples.py`` regenerates them into a temporary folder and fails on any drift.

    python -m onboard.examples generated_examples
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Example:
    model: str
    target: str
    folder: str  # relative to generated_examples/
    flags: tuple[str, ...] = ()


EXAMPLES = (
    # Qwen3 is already in mobius; --treat-as-new rebuilds it from the closest other class.
    Example("Qwen/Qwen3-0.6B", "mobius", "qwen3/mobius", ("--treat-as-new",)),
    Example("Qwen/Qwen3-30B-A3B", "mobius", "qwen3_moe/mobius", ("--treat-as-new",)),
    Example("Qwen/Qwen3-0.6B", "automodel", "qwen3/automodel", ("--treat-as-new",)),
    Example("Qwen/Qwen3-30B-A3B", "automodel", "qwen3_moe/automodel", ("--treat-as-new",)),
    # A hybrid mobius 0.1.0 does not have: short-convolution layers beside attention.
    Example("LiquidAI/LFM2-1.2B", "mobius", "lfm2/mobius"),
    # Gated DeltaNet and gated attention beside MoE layers; mobius' own qwen3_next is off (M7).
    Example("Qwen/Qwen3-Next-80B-A3B-Instruct", "mobius", "qwen3_next/mobius", ("--treat-as-new",)),
    # The same hybrid into AutoModel: HF's DeltaNet kept, AutoModel's MoE with its shared expert.
    Example(
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "automodel",
        "qwen3_next/automodel",
        ("--treat-as-new",),
    ),
    # A vision-language model: mobius' own LLaVAModel loads no weights; rebuilt from its parts.
    Example("llava-hf/llava-1.5-7b-hf", "mobius", "llava/mobius", ("--treat-as-new",)),
    # A windowed-ViT VLM with M-RoPE whose text backbone has no causal-LM class in transformers;
    # mobius' own qwen2_5_vl entry hidden, its windowed ViT reused, merger and embedding generated.
    Example("Qwen/Qwen2.5-VL-3B-Instruct", "mobius", "qwen2_5_vl/mobius", ("--treat-as-new",)),
    # The same VLM into AutoModel: HF's tower and projector around the generated Llama text model.
    Example("llava-hf/llava-1.5-7b-hf", "automodel", "llava/automodel", ("--treat-as-new",)),
    # Three types from mobius' backlog (#16), each transformers' default config for its type
    # (no Hub access here), named by the checkpoint it stands for: a dense one, a MoE, and one
    # whose two stacks of layers run in cycles (run from the repo root).
    Example(
        "tests/fixtures/backlog/vaultgemma",
        "mobius",
        "vaultgemma/mobius",
        ("--hub-id", "google/vaultgemma-1b"),
    ),
    Example(
        "tests/fixtures/backlog/minimax_m2",
        "mobius",
        "minimax_m2/mobius",
        ("--hub-id", "MiniMaxAI/MiniMax-M2"),
    ),
    Example(
        "tests/fixtures/backlog/hrm_text",
        "mobius",
        "hrm_text/mobius",
        ("--hub-id", "sapientinc/HRM-Text-1B"),
    ),
    # A never-published architecture that exists only as Hub remote code (run from the repo root).
    Example("tests/fixtures/remote/ember-tiny", "mobius", "ember/mobius", ("--trust-remote-code",)),
)


def regenerate(root: Path, *, parity: bool = True) -> list[subprocess.CompletedProcess[str]]:
    runs = []
    with tempfile.TemporaryDirectory(prefix="onboard-empty-cache-") as cache:
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=cache, NO_COLOR="1")
        for example in EXAMPLES:
            out = (root / example.folder).resolve()
            command = [
                sys.executable,
                "-m",
                "onboard",
                "new",
                example.model,
                "--target",
                example.target,
                "--out",
                str(out),
                "--force",
                *example.flags,
            ]
            if not parity:
                command.append("--no-parity")
            run = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if run.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed:\n{run.stdout}\n{run.stderr}")
            runs.append(run)
    return runs


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "generated_examples")
    for result in regenerate(target):
        print(result.stdout)
