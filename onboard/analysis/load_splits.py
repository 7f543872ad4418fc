"""Checkpoint tensors transformers cuts into several parameters when it loads a model.

HRM saves each attention's gate, q, k and v as one ``attn.gqkv_proj.weight`` and its MLP's gate
and up as one ``mlp.gate_up_proj.weight``; transformers' conversion mapping cuts them into equal
chunks on load (a ``WeightConverter`` whose only operation is ``Chunk``). The analysis reads the
checkpoint as transformers does, so the split names stand in for the fused one; the generated
loaders cut the saved tensor the same way (``WeightSpec.splits``). Each split is proved by value:
chunk i of the saved tensor is the parameter transformers fills with it, so a wrong order is
caught here, before anything is generated. A converter with other operations is left to
``load_renames``, which refuses the tensor by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onboard.analysis.load_renames import (
    _SUPPORTED,
    _conversions,
    _rename_key,
    _where,
    plain_pattern,
)
from onboard.errors import UnsupportedFeatureError
from onboard.spec import WeightSplit

Names = tuple[tuple[str, tuple[int, ...]], ...]


def read_load_splits(hf_model: Any, saved: Names) -> tuple[WeightSplit, ...]:
    """The Chunk-only converters of ``hf_model``'s conversion mapping that fire on a saved
    name, each proved on the tiny model's saved tensors; empty when none fires."""
    renamings, converters = _conversions(hf_model)
    names = [n for n, _ in saved]
    found = []
    for converter in converters:
        split = _chunk_split(converter, _where(converter, hf_model))
        if split is not None and any(split.fused in n for n in names):
            found.append(split)
    if not found:
        return ()
    checkpoint = _saved_tensors(hf_model)
    memory = hf_model.state_dict()
    for split in found:
        _prove(split, checkpoint, memory, renamings)
    return tuple(found)


def _chunk_split(converter: Any, where: str) -> WeightSplit | None:
    """``converter`` as a split by plain names, or None when it does more than chunk one
    tensor (transposes, stacks, concatenates, or matches by a real regex)."""
    from transformers.core_model_loading import Chunk

    operations = list(converter.operations)
    if len(operations) != 1 or type(operations[0]) is not Chunk:
        return None
    if len(converter.source_patterns) != 1 or len(converter.target_patterns) < 2:
        return None
    fused = plain_pattern(converter.source_patterns[0])
    parts = tuple(plain_pattern(p) for p in converter.target_patterns)
    if fused is None or None in parts:
        return None
    dim = operations[0].dim
    return WeightSplit(fused=fused, parts=parts, dim=dim, where=where)  # type: ignore[arg-type]


def _saved_tensors(hf_model: Any) -> dict[str, Any]:
    from onboard.checkpoint import tensors

    return tensors(hf_model)


def _prove(
    split: WeightSplit,
    checkpoint: Mapping[str, Any],
    memory: Mapping[str, Any],
    renamings: list[Any],
) -> None:
    """Every saved tensor ``split`` cuts gives, chunk by chunk, the parameters transformers
    names for them, or the model is refused with the converter's line."""
    import torch

    for name, tensor in checkpoint.items():
        if split.fused not in name:
            continue
        chunks = torch.chunk(tensor, len(split.parts), dim=split.dim)
        for part, chunk in zip(split.parts, chunks, strict=True):
            target = _rename_key(split_name(name, split, part), renamings, [])
            if target not in memory or not torch.equal(memory[target], chunk):
                raise UnsupportedFeatureError(
                    f"checkpoint tensor {name} is cut on load ({split.fused} -> "
                    f"{', '.join(split.parts)} by Chunk at {split.where}), but its chunks are not "
                    f"the parameters transformers names ({target}) ({_SUPPORTED})"
                )


def split_name(name: str, split: WeightSplit, part: str) -> str:
    """The name of ``part`` of the saved tensor ``name`` (its fused substring replaced once)."""
    return name.replace(split.fused, part, 1)


def split_shapes(saved: Names, splits: tuple[WeightSplit, ...]) -> Names:
    """The saved names and shapes as transformers reads them: each fused tensor replaced by
    its parts, in order, each an equal chunk of it."""
    out = []
    for name, shape in saved:
        split = next((s for s in splits if s.fused in name), None)
        if split is None:
            out.append((name, shape))
            continue
        cut = list(shape)
        cut[split.dim] //= len(split.parts)
        out.extend((split_name(name, split, part), tuple(cut)) for part in split.parts)
    return tuple(sorted(out))


def split_tensors(checkpoint: Mapping[str, Any], splits: tuple[WeightSplit, ...]) -> dict[str, Any]:
    """The saved tensors themselves as transformers reads them (see ``split_shapes``)."""
    import torch

    out = {}
    for name, tensor in checkpoint.items():
        split = next((s for s in splits if s.fused in name), None)
        if split is None:
            out[name] = tensor
            continue
        chunks = torch.chunk(tensor, len(split.parts), dim=split.dim)
        out.update(
            (split_name(name, split, p), c) for p, c in zip(split.parts, chunks, strict=True)
        )
    return out
