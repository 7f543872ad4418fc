"""Multimodal RoPE of a Qwen-VL text model: its sections (the config's, or HF's fallback) and the
layout HF's rotary module gives them, read by running it on three unequal axes."""

from __future__ import annotations

import ast
import re
from typing import Any

from onboard.analysis.probe import source_location
from onboard.analysis.vision.qwen_vl import NotQwenVL
from onboard.analysis.vision.qwen_vl_run import mrope_cos_sin
from onboard.spec import Evidence
from onboard.vision import MRopeSpec

MROPE_KEY = "rope_parameters.mrope_section"


def mrope_spec(text_config: Any, layout: str = "chunks") -> MRopeSpec:
    """The sections from the config, else HF's own fallback (named where HF holds it)."""
    sections = (getattr(text_config, "rope_parameters", None) or {}).get("mrope_section")
    if sections:
        return MRopeSpec(sections=tuple(int(s) for s in sections), key=MROPE_KEY, layout=layout)
    default = hf_mrope_default(text_config.model_type)
    if default is None:
        raise NotQwenVL("text_config.rope_parameters has no mrope_section")
    sections, where = default
    return MRopeSpec(sections=sections, key=MROPE_KEY, layout=layout, default_at=where)


_DEFAULT_SECTIONS = re.compile(r"""get\(\s*["']mrope_section["']\s*,\s*(\[[\d,\s]+\])\s*\)""")


def hf_mrope_default(text_model_type: str) -> tuple[tuple[int, ...], str] | None:
    """The sections HF's text rotary module falls back to when the config sets none, and the
    line that says so (``rope_parameters.get("mrope_section", [...])``)."""
    from onboard.source import transformers_source_files

    for file in transformers_source_files(text_model_type):
        if not file.name.startswith("modeling_"):
            continue
        for number, line in enumerate(file.text.splitlines(), 1):
            if found := _DEFAULT_SECTIONS.search(line):
                sections = ast.literal_eval(found.group(1))
                return tuple(int(x) for x in sections), f"{file.name}:{number}"
    return None


def rotary_width(config: Any) -> int:
    """How many of a head's channels turn: all of ``head_dim``, or its
    ``partial_rotary_factor`` (Qwen3.5 turns a quarter; HF's inv_freq spans only those)."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    partial = (getattr(config, "rope_parameters", None) or {}).get("partial_rotary_factor", 1.0)
    return int(head_dim * partial)


def read_mrope_layout(rotary: Any, sections: tuple[int, ...]) -> tuple[str, str, Evidence]:
    """Which frequencies each position axis turns and which channel pairs each frequency turns,
    from HF's text rotary module run on three unequal axes: the layout and pairs whose angles
    it returns (chunks on halves when none fits: the check then names the rotary module)."""
    import torch

    config = rotary.config
    theta = float(config.rope_parameters["rope_theta"])
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    width = rotary_width(config)
    steps = torch.arange(6)
    positions = torch.stack([steps, 2 * steps + 1, 3 * steps + 2])[:, None]  # [3, 1, 6]
    where = source_location(type(rotary).forward) or type(rotary).__name__
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, 6, head_dim), positions)
    for layout in ("chunks", "interleaved"):
        for pairs in ("halves", "adjacent"):
            try:
                want = mrope_cos_sin(sections, theta, width, positions, layout, pairs)
            except ValueError:
                continue
            if all(
                torch.allclose(a.float(), b, atol=1e-6)
                for a, b in zip((cos, sin), want, strict=True)
            ):
                what = f"rotary angles match {layout} sections on {pairs} channel pairs"
                return layout, pairs, Evidence("probe", where, what)
    return "chunks", "halves", Evidence("probe", where, "rotary angles match no M-RoPE layout")


def require_sections_cover(model_type: str, text_config: Any) -> None:
    """Chunked M-RoPE sections split the rotated frequencies exactly (HF's ``split`` over
    them fails otherwise): sections that cover another count are bad input, named at their key
    (GLM-4V's default config turns whole heads against its fallback's half)."""
    from onboard.errors import InvalidConfigError

    rope = getattr(text_config, "rope_parameters", None) or {}
    if rope.get("mrope_interleaved"):
        return  # interleaved sections index the frequencies, they do not split them
    found = rope.get("mrope_section")
    where = f"config.json:text_config.{MROPE_KEY}"
    if not found:
        default = hf_mrope_default(text_config.model_type)
        if default is None:
            return
        found, where = default
    half = rotary_width(text_config) // 2
    if sum(found) != half:
        raise InvalidConfigError(
            f"{where}: {model_type}'s M-RoPE sections {list(found)} cover {sum(found)} "
            f"frequencies, but its heads turn {half} (head_dim x partial_rotary_factor / 2)"
        )
