"""Saved tensors the generated ``preprocess_weights`` cuts into several, as transformers does on
load (HRM keeps its attention's gate, q, k and v as one ``attn.gqkv_proj.weight``).

The cut happens first, on the checkpoint's names, so every later rename reads the names
transformers gives the parts. The in-memory layout already has the parts and passes untouched.
"""

from __future__ import annotations

from collections.abc import Callable

from onboard.analysis.load_splits import split_name
from onboard.errors import UnsupportedFeatureError
from onboard.spec import ArchitectureSpec, WeightSplit

Expected = Callable[[str], "str | tuple[str, ...]"]


def load_splits(spec: ArchitectureSpec) -> tuple[WeightSplit, ...]:
    """The spec's splits, all along one axis (the generated helper cuts along one)."""
    splits = spec.weights.splits
    dims = sorted({s.dim for s in splits})
    if len(dims) > 1:
        raise UnsupportedFeatureError(
            f"checkpoint tensors cut on load along different axes ({', '.join(map(str, dims))}: "
            f"{', '.join(s.fused for s in splits)}): the generated mobius loader cuts along one"
        )
    return splits


def with_splits(expected: Expected, splits: tuple[WeightSplit, ...]) -> Expected:
    """``expected`` (checkpoint key -> the parameters it fills) for a checkpoint whose fused
    tensors fill each part's parameters, in order."""
    if not splits:
        return expected

    def parts_expected(key: str) -> str | tuple[str, ...]:
        split = next((s for s in splits if s.fused in key), None)
        if split is None:
            return expected(key)
        names: list[str] = []
        for part in split.parts:
            found = expected(split_name(key, split, part))
            names.extend((found,) if isinstance(found, str) else found)
        return tuple(names)

    return parts_expected
