"""Prove a weight conversion before any parity run: every tensor lands once, where it belongs.

Each checkpoint tensor is replaced by a tensor of its own shape filled with a unique value (its
fingerprint) and run through the target's conversion (mobius ``preprocess_weights``, an
AutoModel state-dict adapter). Reading the fingerprints back out of the converted tensors tells,
for every target parameter, which checkpoint tensors filled it, even through renames, splits,
transposes and stacks. That is enough to catch a dropped expert, two swapped experts or a
forgotten shared expert with names, from the checkpoint's names and shapes alone.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

Shape = tuple[int, ...]
# A layer's index: the name's first numeric part (model.layers.3., GPT-2's transformer.h.3.)
_LAYER = re.compile(r"\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")
# Where VLM checkpoints keep the vision side (LLaVA's layout)
_TOWERS = ("vision_tower.", "vision_model.")
_PROJECTORS = ("multi_modal_projector.",)


@dataclass(frozen=True)
class ProofRow:
    group: str  # "embeddings and head", "layer 1 attention", "layer 1 experts" ...
    checkpoint: int  # checkpoint tensors in the group
    placed: int  # of those, placed exactly once where expected
    detail: str = ""


@dataclass(frozen=True)
class WeightMapProof:
    checkpoint_tensors: int
    parameters: int
    rows: tuple[ProofRow, ...]
    problems: tuple[str, ...]  # each names the keys involved
    # Parameters the conversion fills with zeros, from no checkpoint tensor (the o_proj biases of
    # layers HF gives none): they hold no weight, so nothing can be dropped into them
    zeros: tuple[str, ...] = ()
    # Checkpoint tensors the HF model computes with but never reads the result of (a VLM
    # tower's layers past the selected state), which the target leaves out, by name
    unread: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        zeros = f" ({len(self.zeros)} set to zero)" if self.zeros else ""
        unread = (
            f"; {len(self.unread)} left out that HF's image-to-text path does not read either"
            if self.unread
            else ""
        )
        return (
            f"{self.checkpoint_tensors} checkpoint tensors -> {self.parameters} parameters"
            f"{zeros}{unread}"
        )


_FLOAT32_EXACT = 2**24  # every integer below it is a float32


def prove(
    checkpoint: Mapping[str, Shape],
    convert: Callable[[dict[str, Any]], Mapping[str, Any]],
    parameters: Mapping[str, Shape],
    *,
    expected_name: Callable[[str], str | Collection[str]] | None = None,
    derived_ok: Collection[str] = (),
    unread: Collection[str] = (),
) -> WeightMapProof:
    """Run ``convert`` on fingerprinted tensors shaped like ``checkpoint`` and check the result.

    ``expected_name`` maps a checkpoint key to the parameter it should fill, or the parameters a
    split fills (when the target knows its own renames); ``derived_ok`` lists converted names
    that may be left over because the conversion derives them (a tied ``lm_head.weight``);
    ``unread`` lists checkpoint keys the HF model never reads the result of, which may go unused
    (any other unused key is a problem).
    """
    import torch

    keys = sorted(checkpoint)
    sizes = [math.prod(checkpoint[k]) for k in keys]
    # Every value of every tensor is distinct, and none is 0, which belongs to no checkpoint
    # tensor. float32 counts exactly to 2**24: a larger checkpoint is fingerprinted in float64,
    # or neighbouring tensors would share values and seem to land in each other's place.
    starts = torch.tensor(list(itertools.accumulate(sizes, initial=1)), dtype=torch.float64)
    dtype = torch.float32 if sum(sizes) < _FLOAT32_EXACT else torch.float64
    tensors = {
        key: (torch.arange(size, dtype=dtype) + float(starts[i])).reshape(checkpoint[key])
        for i, (key, size) in enumerate(zip(keys, sizes, strict=True))
    }
    converted = dict(convert(dict(tensors)))

    problems: list[str] = []
    zeros: list[str] = []
    placements: dict[str, list[str]] = defaultdict(list)  # checkpoint key -> parameters it fills
    seen: dict[int, list[Any]] = defaultdict(list)  # key index -> element ids found
    orphans: dict[str, list[str]] = {}  # converted names no parameter takes -> their sources
    for name, tensor in converted.items():
        ids = tensor.detach().reshape(-1).to(torch.float64)
        owners = torch.searchsorted(starts, ids, right=True) - 1
        known = sorted({int(o) for o in owners.unique() if 0 <= int(o) < len(keys)})
        if name not in parameters:
            if name not in derived_ok:
                orphans[name] = [keys[o] for o in known]
            continue
        if tuple(tensor.shape) != tuple(parameters[name]):
            problems.append(
                f"{name}: shape {tuple(tensor.shape)} != parameter {tuple(parameters[name])}"
            )
        if not known and not ids.any():
            zeros.append(name)
        elif not known:
            problems.append(f"{name} holds values from no checkpoint tensor")
        for owner in known:
            key = keys[owner]
            placements[key].append(name)
            if name not in derived_ok:  # a tied lm_head may repeat the embedding
                seen[owner].append(ids[owners == owner])
            wanted = expected_name(key) if expected_name else None
            allowed = {wanted} if isinstance(wanted, str) else set(wanted or ())
            if allowed and name not in allowed and name not in derived_ok:
                problems.append(f"{key} landed in {name}, expected {' or '.join(sorted(allowed))}")
    # A converted copy no parameter takes is harmless when its source is placed elsewhere or
    # is one HF never reads either (a library dropping a pooling head late); else it is lost
    for name, sources in orphans.items():
        if not sources or any(k not in placements and k not in unread for k in sources):
            shown = ", ".join(sources) or "no checkpoint tensor"
            problems.append(f"{name} (from {shown}) fills no parameter")
    for name in sorted(set(parameters) - set(converted)):
        problems.append(f"{name} is filled by no checkpoint tensor")
    for index, key in enumerate(keys):
        found = torch.cat(seen[index]) if seen[index] else torch.empty(0, dtype=torch.float64)
        distinct = int(found.unique().numel())
        if distinct == 0:
            if key not in unread:
                problems.append(f"{key} is not used")
        elif distinct < sizes[index]:
            problems.append(
                f"{key}: only {distinct} of its {sizes[index]} values reach a parameter"
            )
        if found.numel() > distinct:
            problems.append(f"{key}: some values are copied into {', '.join(placements[key])}")
    problems += _missing_experts(parameters)
    return WeightMapProof(
        checkpoint_tensors=len(keys),
        parameters=len(parameters),
        rows=_rows(keys, placements, problems),
        zeros=tuple(zeros),
        problems=tuple(dict.fromkeys(problems)),
        unread=tuple(k for i, k in enumerate(keys) if k in unread and not seen[i]),
    )


def _missing_experts(parameters: Mapping[str, Shape]) -> list[str]:
    """Every layer with experts must have every index 0..E-1 (a gap means a dropped expert)."""
    experts: dict[int, set[int]] = defaultdict(set)
    for name in parameters:
        layer, expert = _LAYER.search(name), _EXPERT.search(name)
        if layer and expert:
            experts[int(layer.group(1))].add(int(expert.group(1)))
    problems = []
    for layer, found in sorted(experts.items()):
        missing = sorted(set(range(max(found) + 1)) - found)
        if missing:
            problems.append(f"layer {layer} has no parameters for experts {missing}")
    return problems


def _group(key: str, placed: Collection[str] = ()) -> str:
    """``placed``: the parameters ``key`` fills (fused experts saved 3-D fill every expert's)."""
    tower = key.startswith(_TOWERS)  # a VLM's vision tower: its layers are not the text's
    layer = _LAYER.search(key)
    if not layer:
        return (
            "vision tower and projector"
            if tower or key.startswith(_PROJECTORS)
            else ("embeddings, final norm and head")
        )
    parts = key.split(layer.group(0), 1)[1].split(".")
    if _EXPERT.search(key) or any(_EXPERT.search(name) for name in placed):
        part = "experts"
    elif "shared" in parts[1] if len(parts) > 1 else False:
        part = "shared experts"
    elif parts[0] in ("mlp", "block_sparse_moe") and parts[1] in ("gate", "router"):
        part = "router"
    elif "norm" in parts[0] or parts[0].startswith("ln_"):  # GPT-2: ln_1, ln_2
        part = "norms"
    else:
        part = parts[0]
    return f"{'tower ' if tower else ''}layer {layer.group(1)} {part}"


def _rows(
    keys: list[str], placements: Mapping[str, list[str]], problems: list[str]
) -> tuple[ProofRow, ...]:
    blamed = Counter(k for k in keys for p in problems if k in p)
    groups: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        groups[_group(key, placements.get(key, ()))].append(key)
    rows = []
    for group, members in groups.items():
        placed = sum(1 for k in members if len(placements.get(k, ())) >= 1 and not blamed[k])
        names = [*members, *(p for k in members for p in placements.get(k, ()))]
        experts = {int(m.group(1)) for k in names if (m := _EXPERT.search(k))}
        detail = f"experts 0..{max(experts)}" if experts else ""
        rows.append(ProofRow(group, len(members), placed, detail))
    return tuple(rows)
