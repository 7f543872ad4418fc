"""See BERT-style layers, whose blocks are split across sub-modules, as Llama layers.

A BERT layer (BERT, RoBERTa, BertGeneration ...) keeps its attention's projections in
``attention.self`` (query, key, value) and its output projection beside the norm of the residual
sum in ``attention.output`` (dense, LayerNorm), and its MLP in ``intermediate`` (dense) and
``output`` (dense, LayerNorm). Each such module adds the residual itself, so no HF module is "the
attention" or "the MLP" of a Llama layer. The view joins the parts of each block into one module
(``self_attn``, ``mlp``) whose forward hooks fire with the block's input and the output of its
last projection, before the residual add, and keeps the norms as layer norms; the table below
says which HF part fills which role, and gives the checkpoint renames in the order they apply
(``attention.output.dense`` before ``output.dense``, which it contains).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SplitBlock:
    """One Llama block made of HF parts: ``entry`` sees the block's input, ``exit`` gives its
    output; ``parts`` are HF module paths whose learned children join the view's block, or
    (path, name) pairs for one linear each."""

    view: str  # self_attn or mlp
    entry: str
    exit: str
    parts: tuple[tuple[str, str], ...]  # HF path -> name in the view's block ("" keeps children)


@dataclass(frozen=True)
class SplitTree:
    blocks: tuple[SplitBlock, ...]
    norms: tuple[tuple[str, str], ...]  # HF path -> the view layer's name

    def paths(self) -> tuple[str, ...]:
        own = (p for b in self.blocks for p, _ in b.parts)
        return (*own, *(p for p, _ in self.norms))


# BERT's layer (transformers' BertLayer, copied by BertGeneration, RoBERTa, XLM-RoBERTa ...).
BERT_TREE = SplitTree(
    blocks=(
        SplitBlock(
            "self_attn",
            entry="attention.self",
            exit="attention.output.dense",
            parts=(("attention.self", ""), ("attention.output.dense", "dense")),
        ),
        SplitBlock(
            "mlp",
            entry="intermediate",
            exit="output.dense",
            parts=(("intermediate.dense", "up_proj"), ("output.dense", "down_proj")),
        ),
    ),
    norms=(("attention.output.LayerNorm", "attn_norm"), ("output.LayerNorm", "mlp_norm")),
)
SPLIT_TREES = (BERT_TREE,)


def split_tree(layer: Any) -> SplitTree | None:
    """The table that covers every learned part of ``layer``, if any."""
    for tree in SPLIT_TREES:
        if _covers(tree, layer):
            return tree
    return None


def _covers(tree: SplitTree, layer: Any) -> bool:
    try:
        parts = [layer.get_submodule(path) for path in tree.paths()]
    except AttributeError:
        return False
    covered = {id(p) for part in parts for p in part.parameters()}
    return {id(p) for p in layer.parameters()} == covered


def split_layer_view(layer: Any, tree: SplitTree) -> Any:
    """``layer`` as a Llama layer: ``self_attn`` and ``mlp`` joined from their parts, the norms
    under the table's names; the HF layer stays ``hf`` (not a sub-module)."""
    import torch

    view = torch.nn.Module()
    for block in tree.blocks:
        joined = spanning(layer.get_submodule(block.entry), layer.get_submodule(block.exit))
        for path, name in block.parts:
            part = layer.get_submodule(path)
            children = part.named_children() if not name else ((name, part),)
            for child_name, child in children:
                if next(child.parameters(), None) is not None:
                    setattr(joined, child_name, child)
        setattr(view, block.view, joined)
    for path, name in tree.norms:
        setattr(view, name, layer.get_submodule(path))
    object.__setattr__(view, "hf", layer)
    return view


def split_renames(tree: SplitTree) -> tuple[tuple[str, str], ...]:
    """Layer-relative checkpoint names -> the view's, longest HF path first, since one HF path
    may end another (``output.dense`` ends ``attention.output.dense``)."""
    pairs = [
        (path, f"{block.view}.{name}" if name else block.view)
        for block in tree.blocks
        for path, name in block.parts
    ]
    pairs += list(tree.norms)
    pairs.sort(key=lambda pair: -pair[0].count("."))
    return tuple((f".{old}.", f".{new}.") for old, new in pairs if old != new)


def spanning(first: Any, last: Any) -> Any:
    """A module standing for HF parts computed inline, ``first`` to ``last``: its forward hooks
    fire when ``last`` returns, with the arguments ``first`` was called with."""
    view = _span_class()()
    object.__setattr__(view, "entry", first)
    object.__setattr__(view, "exit", last)
    return view


@functools.cache
def _span_class() -> type:
    import torch

    class SplitBlockView(torch.nn.Module):
        """Never called itself: a forward hook on it fires when ``exit`` returns, with the
        arguments ``entry`` was called with."""

        def register_forward_hook(self, hook: Any, *, with_kwargs: bool = False, **_: Any) -> Any:
            seen: dict[str, Any] = {}

            def enter(_module: Any, args: tuple, kwargs: dict) -> None:
                seen["args"], seen["kwargs"] = args, kwargs

            def leave(_module: Any, _args: tuple, _kwargs: dict, output: Any) -> None:
                if with_kwargs:
                    hook(self, seen["args"], seen["kwargs"], output)
                else:
                    hook(self, seen["args"], output)

            return _Handles(
                (
                    self.entry.register_forward_pre_hook(enter, with_kwargs=True),
                    self.exit.register_forward_hook(leave, with_kwargs=True),
                )
            )

    return SplitBlockView


@dataclass(frozen=True)
class _Handles:
    handles: tuple[Any, ...]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
