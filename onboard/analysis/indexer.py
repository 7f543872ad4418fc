"""DeepSeek Sparse Attention's lightning indexer (DeepSeek V3.2, GLM-MoE-DSA), read from the
tiny HF model's attention modules (``AttentionSpec.indexer``).

The indexer is a child of the latent attention with four learned parts, under HF's names:
``wq_b`` (the low-rank query to its heads' queries), ``wk`` (the hidden states to one key),
``k_norm`` (a LayerNorm with bias over that key) and ``weights_proj`` (the hidden states to one
weight per head). Its sizes come from those shapes, the config keys behind them from the
assignments in the indexer's ``__init__``, and which layers run one (GLM-MoE-DSA's ``shared``
layers reuse the last selection) from a per-layer config list that says so layer by layer. What
the indexer computes with them (scores, RoPE on part of each head, the top-k cut) is the spec
check's to prove: the tiny config keeps fewer keys than its prompts have, so a wrong reading
selects other keys and the attention no longer matches.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from onboard.analysis.source_lines import class_init, init_assignment
from onboard.analysis.variants import Reading
from onboard.block_specs import IndexerSpec
from onboard.source import SourceFile
from onboard.spec import Evidence

# The indexer's parameters, relative to it
PARTS = ("wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias", "weights_proj.weight")
# HF's default: the attribute names the sizes are read into when the source says nothing
_DEFAULT_KEYS = {"heads": "index_n_heads", "head_dim": "index_head_dim", "topk": "index_topk"}


def indexer(
    attentions: Sequence[Any],
    tiny: Any,
    config: Any,
    files: Sequence[SourceFile],
    layer: str = "model.layers",
) -> Reading | None:
    """The indexer of the tiny model's ``attentions`` that have one (``None`` when none does,
    or its parts are not the four of DeepSeek V3.2's), sized as the real ``config`` says, with
    the layers that run one named by a config list."""
    import torch

    found: dict[int, str] = {}
    for index, attention in enumerate(attentions):
        for name, child in attention.named_children():
            if tuple(sorted(n for n, _ in child.named_parameters())) == tuple(sorted(PARTS)):
                found[index] = name
    if not found or len({*found.values()}) != 1:
        return None
    first = min(found)
    attribute = found[first]
    module = getattr(attentions[first], attribute)
    if not isinstance(module.k_norm, torch.nn.LayerNorm):
        return None
    heads, head_dim = module.weights_proj.out_features, module.wk.out_features
    shapes = {
        "wq_b": (heads * head_dim, getattr(tiny, "q_lora_rank", None)),
        "wk": (head_dim, tiny.hidden_size),
        "weights_proj": (heads, tiny.hidden_size),
    }
    if any(tuple(getattr(module, n).weight.shape) != s for n, s in shapes.items()):
        return None
    if head_dim <= getattr(tiny, "qk_rope_head_dim", head_dim):
        return None  # RoPE turns the first qk_rope_head_dim channels and leaves the rest
    cls = type(module).__name__
    where = f"{layer}.{first}.self_attn.{attribute}"
    evidence = [
        Evidence(
            "probe",
            where,
            f"{cls}: {heads} heads of {head_dim} (wq_b, weights_proj), one key (wk, k_norm)",
        )
    ]
    evidence += [
        f.evidence
        for part in ("wq_b", "wk", "k_norm", "weights_proj")
        if (f := init_assignment(files, cls, part))
    ]
    keys = _size_keys(files, cls, tiny, {"heads": heads, "head_dim": head_dim})
    real = {what: getattr(config, key, None) for what, key in keys.items()}
    if not all(isinstance(v, int) and v > 0 for v in real.values()):
        return None
    evidence += [Evidence("config", f"config.json:{keys[k]}", repr(v)) for k, v in real.items()]
    layers_key, own = None, "full"
    if len(found) < len(attentions):
        listed = _layers_key(tiny, set(found), len(attentions))
        if listed is None or first != 0:
            return None  # layers without an indexer no config list explains
        layers_key, own = listed
        evidence.append(
            Evidence(
                "config",
                f"config.json:{layers_key}",
                f"layers {sorted(found)} run an indexer ({own!r}); the others reuse the last "
                "one's selection",
            )
        )
    spec = IndexerSpec(
        attribute=attribute,
        heads=real["heads"],
        head_dim=real["head_dim"],
        topk=real["topk"],
        norm_eps=float(module.k_norm.eps),
        heads_key=keys["heads"],
        head_dim_key=keys["head_dim"],
        topk_key=keys["topk"],
        layers_key=layers_key,
        own=own,
    )
    return Reading(spec, tuple(evidence), tuple(f"{attribute}.{p}" for p in PARTS))


def _size_keys(
    files: Sequence[SourceFile], cls: str, tiny: Any, sizes: dict[str, int]
) -> dict[str, str]:
    """The config keys behind the heads, the head size and top-k: the ``self.x = config.<key>``
    assignments of the indexer's ``__init__`` whose tiny value is the measured size (top-k: the
    one that says topk); HF's names when the source says nothing."""
    keys = dict(_DEFAULT_KEYS)
    found = class_init(files, cls)
    if found is None:
        return keys
    _, init = found
    read: dict[str, str] = {}  # attribute -> config key
    for node in ast.walk(init):
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        target = (
            (node.targets[0] if isinstance(node, ast.Assign) else node.target) if value else None
        )
        if (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "config"
            and isinstance(target, ast.Attribute)
        ):
            read[target.attr] = value.attr
    for what, size in sizes.items():
        matching = [k for k in read.values() if getattr(tiny, k, None) == size]
        if len(matching) == 1:
            keys[what] = matching[0]
    topk = [k for a, k in read.items() if "topk" in a or "topk" in k]
    if len(set(topk)) == 1:
        keys["topk"] = topk[0]
    return keys


def _layers_key(tiny: Any, own: set[int], count: int) -> tuple[str, str] | None:
    """(key, value): the per-layer config list whose entries are ``value`` exactly at the
    layers that run an indexer."""
    for key, values in vars(tiny).items():
        if not isinstance(values, list | tuple) or len(values) != count:
            continue
        at = {values[i] for i in own}
        if len(at) != 1:
            continue
        (value,) = at
        if isinstance(value, str) and all((v == value) == (i in own) for i, v in enumerate(values)):
            return key, value
    return None
