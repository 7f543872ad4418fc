"""See a decoder with other top-level names (GPT-NeoX, Falcon) through the Llama layout.

The analysis reads ``model.embed_tokens``, ``model.layers.N.self_attn`` and ``model.norm``. A
model that keeps the same parts under other names (``gpt_neox.embed_in``, ``transformer.h``,
``ln_f``, ``self_attention``) is wrapped in a view that names the same module objects the Llama
way, so hooks and parameters are shared with the HF model, which still runs its own forward. The
view also says how checkpoint names map to the Llama names, for the generated weight renames.
Position embeddings become ``model.embed_positions``, a norm of the embeddings (BLOOM)
``model.embed_norm``; parts the Llama layout has no place for are refused by name. BERT's tree
(layers under ``encoder.layer``, blocks split across sub-modules, a head wrapping its vocabulary
linear) is read the same way, its layers through the table of ``split_layers``.

Layers that are one residual block each (NemotronH: ``norm`` and ``mixer``) are seen as Llama
layers with one half: an attention block as ``input_layernorm`` and ``self_attn``, an MLP or
experts as ``post_attention_layernorm`` and ``mlp``, a recurrent mixer under its own name. Their
checkpoint names stay HF's (``LayoutView.blocks``): the generated layers keep them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from onboard.analysis.split_layers import spanning, split_layer_view, split_renames, split_tree
from onboard.block_specs import BlockLayout
from onboard.errors import UnsupportedFeatureError

# What a layer may call its attention (the decoder's other names are found by type).
ATTENTION_NAMES = ("self_attn", "attention", "self_attention", "attn", "multi_head_attention")
# Other names of a layer's feed-forward block (MPT, LFM2).
FFN_NAMES = ("ffn", "feed_forward")
# A feed-forward written in the layer's own forward: fc1, the activation, fc2 (OPT, BioGPT).
INLINE_MLP = ("fc1", "fc2")
# Children that make a block an attention (a one-block layer's block is told by what it holds).
_ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value")
# The view's names for a one-block layer's norm, by the block's view name.
_BLOCK_NORMS = {"self_attn": "input_layernorm", "mlp": "post_attention_layernorm"}


@dataclass(frozen=True)
class LayoutView:
    model: Any  # the view (torch modules shared with the HF model)
    renames: tuple[tuple[str, str], ...]  # checkpoint-name substring -> Llama-layout name
    # HF's base_model_prefix when the decoder sits under it (GPT-2: transformer): checkpoints
    # saved from the base model (GPT2Model, OPTModel) have names without it
    base_prefix: str = ""
    top_level: tuple[str, ...] = ()  # the causal LM's own modules (the base, the head)
    blocks: BlockLayout | None = None  # one residual block a layer, under these HF names


def llama_view(model: Any) -> LayoutView | None:
    """None when ``model`` already has the Llama layout; else the view, or a refusal."""
    import torch

    if _llama_layout(model):
        return None
    decoder_name, decoder = _decoder(model)
    if decoder is None:
        return None  # the probe names what is missing
    parts = _decoder_parts(model, decoder_name, decoder)
    head_name = _head(model)
    if head_name is None:
        return None
    transform = _head_transform(model, decoder_name.split(".")[0], head_name.split(".")[0])
    blocks = _block_layout(decoder.get_submodule(parts["layers"]))
    layers, layer_renames = _layers(decoder, parts["layers"], blocks)
    view = _view_of(model)
    view.model = torch.nn.Module()
    object.__setattr__(view.model, "hf", decoder)
    view.model.embed_tokens = decoder.get_submodule(parts["embed"])
    view.model.layers = layers
    if parts.get("norm"):  # OpenAI GPT has none
        view.model.norm = getattr(decoder, parts["norm"])
    if parts.get("embed_positions"):
        view.model.embed_positions = decoder.get_submodule(parts["embed_positions"])
    elif (table := _position_buffer(decoder)) is not None:  # CTRL's pos_encoding
        view.model.embed_positions = _table_module(table)
    if parts.get("embed_norm"):
        view.model.embed_norm = decoder.get_submodule(parts["embed_norm"])
    if parts.get("rotary"):
        view.model.rotary_emb = getattr(decoder, parts["rotary"])
    view.lm_head = model.get_submodule(head_name)
    renames = [
        (f"{decoder_name}.{parts['embed']}.", "model.embed_tokens."),
        (f"{decoder_name}.{parts['layers']}.", "model.layers."),
        *(
            (f"{decoder_name}.{parts[part]}.", f"model.{part}.")
            for part in ("norm", "embed_positions", "embed_norm")
            if parts.get(part)
        ),
        *layer_renames,
    ]
    if transform is not None:  # before the head's rename: it may take the name lm_head
        view.model.head_transform = getattr(model, transform)
        renames.append((f"{transform}.", "model.head_transform."))
    if head_name != "lm_head":
        renames.append((f"{head_name}.", "lm_head."))
    base = getattr(model, "base_model_prefix", "") or ""
    base = base if decoder_name.split(".")[0] == base else ""
    top_level = tuple(name for name, _ in model.named_children())
    renames = tuple(r for r in renames if r[0] != r[1])
    return LayoutView(view, renames, base, top_level, blocks)


def _head(model: Any) -> str | None:
    """The linear to the vocabulary: a top-level module, or the one learned part of one whose
    own parameter is that linear's bias, tied (BERT-style heads: ``lm_head.decoder`` and
    ``lm_head.bias``)."""
    import torch

    vocab = model.config.vocab_size

    def to_vocab(module: Any) -> bool:
        return isinstance(module, torch.nn.Linear) and module.out_features == vocab

    for name, child in model.named_children():
        if to_vocab(child):
            return name
        inner = [(n, c) for n, c in child.named_children() if learns(c)]
        own = list(child.parameters(recurse=False))
        if len(inner) == 1 and to_vocab(inner[0][1]):
            bias = inner[0][1].bias
            if all(p is bias for p in own):
                return f"{name}.{inner[0][0]}"
    return None


def _head_transform(model: Any, decoder_root: str, head_name: str) -> str | None:
    """The causal LM's one other learned module, a transform of the last hidden states before
    the head (ModernBERT's prediction head: dense, activation, norm); others are refused."""
    import torch

    from onboard.analysis.probe import is_norm

    others = [
        (name, child)
        for name, child in model.named_children()
        if name not in (decoder_root, head_name) and learns(child)
    ]
    if not others:
        return None
    name, child = others[0]
    kinds = [
        "linear" if isinstance(c, torch.nn.Linear) else "norm" if is_norm(c) else "other"
        for c in child.children()
        if learns(c)
    ]
    if len(others) > 1 or sorted(kinds) != ["linear", "norm"]:
        unknown = ", ".join(f"{n} ({type(c).__name__})" for n, c in others)
        raise UnsupportedFeatureError(
            f"{type(model).__name__} has parts the Llama layout has no place for: {unknown}"
        )
    return name


def _position_buffer(decoder: Any) -> Any:
    """A fixed table of positions the decoder keeps as a buffer, not a module (CTRL)."""
    found = [
        b
        for name, b in decoder.named_buffers(recurse=False)
        if "pos" in name and b.dim() == 2 and b.shape[1] == decoder.config.hidden_size
    ]
    return found[0] if len(found) == 1 else None


def _table_module(table: Any) -> Any:
    """A module holding ``table`` as ``weights``, as XGLM's sinusoidal positions module does."""
    import torch

    module = torch.nn.Module()
    object.__setattr__(module, "weights", table)  # not a buffer of the view: HF owns it
    return module


def _llama_layout(model: Any) -> bool:
    """Llama's names throughout: nothing to view differently (XGLM has model.layers, but its
    final norm is layer_norm, its MLP inline and its positions a module)."""
    import torch

    from onboard.analysis.probe import FINAL_NORM_NAMES

    decoder = getattr(model, "model", None)
    if not isinstance(decoder, torch.nn.Module) or not hasattr(decoder, "layers"):
        return False
    first = decoder.layers[0] if len(decoder.layers) else None
    return (
        any(hasattr(decoder, n) for n in FINAL_NORM_NAMES)
        and not hasattr(decoder, "embed_positions")
        and not (first is not None and _inline_mlp(first))
        and not (first is not None and _ffn_elsewhere(first))
        and _block_layout(decoder.layers) is None
    )


def _ffn_elsewhere(layer: Any) -> bool:
    """The layer keeps its feed-forward under another name than ``mlp`` (Bamba's feed_forward)."""
    return not hasattr(layer, "mlp") and any(hasattr(layer, n) for n in FFN_NAMES)


def checkpoint_renames(
    disk: tuple[tuple[str, tuple[int, ...]], ...], memory: tuple[tuple[str, tuple[int, ...]], ...]
) -> tuple[tuple[str, str], ...]:
    """Top-level modules saved under another name than they have in memory (GPT-NeoX saves its
    ``lm_head`` as ``embed_out``; NemotronH its ``model`` as ``backbone``): paired by shape,
    only when the pairing is unambiguous. The prefix renames (``prefix_renames``) are applied
    first and not returned: they come before the layout's renames."""
    for old, new in prefix_renames(disk, memory):
        disk = tuple((n.replace(old, new, 1) if n.startswith(old) else n, s) for n, s in disk)
    memory_names = {n for n, _ in memory}
    disk_names = {n for n, _ in disk}
    unmatched = [(n, s) for n, s in disk if n not in memory_names and "." in n]
    renames = []
    for name, shape in unmatched:
        module, _, leaf = name.rpartition(".")
        if "." in module:
            continue
        candidates = [
            m
            for m, s in memory
            if s == shape and m.endswith(f".{leaf}") and m.count(".") == 1 and m not in disk_names
        ]
        if len(candidates) == 1:
            renames.append((f"{module}.", f"{candidates[0].rpartition('.')[0]}."))
    return tuple(dict.fromkeys(renames))


def prefix_renames(
    disk: tuple[tuple[str, tuple[int, ...]], ...], memory: tuple[tuple[str, tuple[int, ...]], ...]
) -> tuple[tuple[str, str], ...]:
    """A first name component saved as another (``backbone.`` for ``model.``): the saved names
    under it, the prefix swapped, are names in memory of the same shape, for one prefix only.
    Names memory lacks under either prefix (experts saved one by one) do not count against it."""
    shapes = dict(memory)
    by_prefix: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for name, shape in disk:
        if name not in shapes and "." in name:
            first, _, rest = name.partition(".")
            by_prefix.setdefault(first, []).append((rest, shape))
    tops = {name.split(".")[0] for name in shapes}
    renames: list[tuple[str, str]] = []
    for first, rests in by_prefix.items():
        fits = [t for t in tops - {first} if _fitting(t, rests, shapes) >= 2]
        if len(fits) == 1:
            renames.append((f"{first}.", f"{fits[0]}."))
    return tuple(renames)


def _fitting(
    top: str, rests: list[tuple[str, tuple[int, ...]]], shapes: dict[str, tuple[int, ...]]
) -> int:
    """How many saved names, under ``top``, are names in memory of the same shape; 0 when one
    is a name in memory of another shape."""
    found = [shapes.get(f"{top}.{rest}") for rest, _ in rests]
    if any(s is not None and s != shape for s, (_, shape) in zip(found, rests, strict=True)):
        return 0
    return sum(s is not None for s in found)


def _view_of(model: Any) -> Any:
    """A module whose calls and config are the HF model's; the Llama-named parts go on it."""
    return _view_class()(model)


@functools.cache
def _view_class() -> type:
    import torch

    class LlamaLayoutView(torch.nn.Module):
        def __init__(self, hf: Any) -> None:
            super().__init__()
            object.__setattr__(self, "hf", hf)  # not a sub-module: its own names stay out
            self.config = hf.config

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self.hf(*args, **kwargs)

    return LlamaLayoutView


def learns(module: Any) -> bool:
    """The module (or one inside it) has parameters."""
    return next(module.parameters(), None) is not None


def hf_module(module: Any) -> Any:
    """The HF module a view stands for (the module itself when it is not a view)."""
    return getattr(module, "hf", module)


def _decoder(model: Any) -> tuple[str, Any]:
    """The module that holds the layers, by dotted name (OPT nests it: ``model.decoder``)."""
    for name, child in model.named_children():
        if any(_layer_list(c) is not None for c in child.children()):
            return name, child
        grandchildren = list(child.named_children())
        if len(grandchildren) == 1 and learns(child):
            inner, decoder = _decoder(child)
            if decoder is not None:
                return f"{name}.{inner}", decoder
    return "", None


def _layer_list(module: Any) -> str | None:
    """The layers' name when ``module`` is them (a ModuleList) or only holds them (BERT's
    encoder.layer): "" or the name inside, else None."""
    import torch

    if isinstance(module, torch.nn.ModuleList):
        return ""
    learned = [(n, c) for n, c in module.named_children() if learns(c)]
    if len(learned) == 1 and isinstance(learned[0][1], torch.nn.ModuleList):
        return learned[0][0]
    return None


@dataclass(frozen=True)
class _EmbeddingBlock:
    embed: str
    norm: str | None
    positions: str | None


def _embedding_block(module: Any, vocab: int) -> _EmbeddingBlock | None:
    """The parts of a module that only embeds tokens, may add learned positions and normalise
    them (ModernBERT's embeddings: tok_embeddings, norm, dropout; BERT's word_embeddings,
    position_embeddings, LayerNorm), else None."""
    import torch

    from onboard.analysis.probe import is_norm

    learned = [(n, c) for n, c in module.named_children() if learns(c)]
    embeds = [n for n, c in learned if isinstance(c, torch.nn.Embedding)]
    tokens = [n for n in embeds if getattr(module, n).num_embeddings == vocab]
    positions = [n for n in embeds if n not in tokens and "position" in n]
    norms = [n for n, c in learned if is_norm(c)]
    if len(tokens) != 1 or len(norms) > 1 or len(positions) > 1:
        return None
    if len(learned) != len(tokens) + len(positions) + len(norms):
        return None  # BERT's token_type_embeddings: a part the Llama layout has no place for
    return _EmbeddingBlock(tokens[0], norms[0] if norms else None, next(iter(positions), None))


def _decoder_parts(model: Any, decoder_name: str, decoder: Any) -> dict[str, str]:
    import torch

    from onboard.analysis.probe import is_norm

    parts: dict[str, str] = {}
    unknown = []
    norms: list[str] = []
    vocab = model.config.vocab_size
    for name, child in decoder.named_children():
        if (inner := _layer_list(child)) is not None:
            parts.setdefault("layers", f"{name}.{inner}" if inner else name)
        elif isinstance(child, torch.nn.Embedding) and child.num_embeddings == vocab:
            parts.setdefault("embed", name)
        elif isinstance(child, torch.nn.Embedding) and "embed_positions" not in parts:
            parts["embed_positions"] = name  # GPT-2's wpe, OPT's embed_positions
        elif "position" in name and "embed_positions" not in parts:
            parts["embed_positions"] = name  # XGLM's sinusoidal table (a buffer, nothing learned)
        elif is_norm(child):
            norms.append(name)
        elif "rotary" in name:
            parts["rotary"] = name
        elif (block := _embedding_block(child, vocab)) is not None and "embed" not in parts:
            parts["embed"] = f"{name}.{block.embed}"  # ModernBERT's embeddings.tok_embeddings
            if block.norm:
                parts["embed_norm"] = f"{name}.{block.norm}"
            if block.positions and "embed_positions" not in parts:
                parts["embed_positions"] = f"{name}.{block.positions}"
        elif learns(child):
            unknown.append(f"{decoder_name}.{name} ({type(child).__name__})")
    # One norm is the final norm; a second one named for the embeddings normalises them (BLOOM).
    embedding = [n for n in norms if "emb" in n] if len(norms) == 2 else []
    if len(embedding) == 1:
        parts["embed_norm"] = embedding[0]
    final = [n for n in norms if n not in embedding]
    if final:
        parts["norm"] = final[-1]
    unknown += [f"{decoder_name}.{n} ({type(getattr(decoder, n)).__name__})" for n in final[:-1]]
    if unknown:
        raise UnsupportedFeatureError(
            f"{type(model).__name__} has parts the Llama layout has no place for: "
            f"{', '.join(unknown)}"
        )
    missing = [p for p in ("embed", "layers") if p not in parts]
    if missing:
        raise UnsupportedFeatureError(
            f"{type(model).__name__}.{decoder_name} has no {', '.join(missing)} onboard recognises "
            f"(its modules: {', '.join(n for n, _ in decoder.named_children())})"
        )
    return parts


def _block_layout(layers: Any) -> BlockLayout | None:
    """The names of every layer's one norm and one block, when each layer is one residual block
    under the same names (NemotronH); None otherwise."""
    from onboard.analysis.probe import is_norm

    found = set()
    for layer in layers:
        learned = [(name, child) for name, child in layer.named_children() if learns(child)]
        norms = [name for name, child in learned if is_norm(child)]
        blocks = [name for name, child in learned if not is_norm(child)]
        if len(norms) != 1 or len(blocks) != 1 or next(layer.parameters(False), None) is not None:
            return None
        found.add(BlockLayout(norms[0], blocks[0]))
    return found.pop() if len(found) == 1 else None


def block_role(block: Any) -> str | None:
    """The Llama layout's name for a one-block layer's block: ``self_attn`` for an attention,
    ``mlp`` for an MLP (linear layers only) or experts; None for a recurrent mixer."""
    import torch

    children = dict(block.named_children())
    if any(name in children for name in _ATTENTION_PROJECTIONS):
        return "self_attn"
    if hasattr(block, "experts"):
        return "mlp"
    learned = [child for child in children.values() if learns(child)]
    own = next(block.parameters(recurse=False), None)
    if own is None and learned and all(isinstance(c, torch.nn.Linear) for c in learned):
        return "mlp"
    return None


def _block_view(layer: Any, blocks: BlockLayout) -> Any:
    """A one-block layer seen as half a Llama layer (see the module docstring)."""
    import torch

    view = torch.nn.Module()
    block = getattr(layer, blocks.block)
    role = block_role(block)
    setattr(view, _BLOCK_NORMS.get(role or "self_attn"), getattr(layer, blocks.norm))
    setattr(view, role or blocks.block, block)
    object.__setattr__(view, "hf", layer)
    return view


def analysed_layer(layers: Any) -> Any:
    """The layer whose norms and blocks the probe reads: layer 0, joined in a block layout by
    the first layer that mixes channels (its norm and MLP), as Llama's layer 0 holds both."""
    import torch

    first = layers[0]
    if not isinstance(getattr(first, "hf", None), torch.nn.Module) or hasattr(first, "mlp"):
        return first
    feed_forward = next((layer for layer in layers if hasattr(layer, "mlp")), None)
    if feed_forward is None or len(list(first.children())) != 2:
        return first
    joined = torch.nn.Module()
    for source in (first, feed_forward):
        for name, child in source.named_children():
            setattr(joined, name, child)
    return joined


def _layers(
    decoder: Any, layers_name: str, blocks: BlockLayout | None = None
) -> tuple[Any, list[tuple[str, str]]]:
    """The layers as views whose attention is ``self_attn``; other children keep their names,
    except an MLP written inline (OPT's ``fc1``, ``fc2``), which becomes ``mlp``. One-block
    layers keep their checkpoint names (no renames); layers whose blocks are split across
    sub-modules (BERT's) get them from their table, in the order they apply."""
    import torch

    layers = decoder.get_submodule(layers_name)
    trees = {split_tree(layer) for layer in layers}
    if blocks is None and len(trees) == 1 and None not in trees:
        tree = trees.pop()
        views = torch.nn.ModuleList(split_layer_view(layer, tree) for layer in layers)
        return views, list(split_renames(tree))
    renames: list[tuple[str, str]] = []
    views = torch.nn.ModuleList()
    for layer in layers:
        if blocks is not None:
            views.append(_block_view(layer, blocks))
            continue
        view = torch.nn.Module()
        inline = _inline_mlp(layer)
        for name, child in layer.named_children():
            if name in ATTENTION_NAMES and "self_attn" not in dict(view.named_children()):
                inner = _wrapped_attention(child)
                if inner is not None:  # GPT-Neo: attn.attention holds the projections
                    renames.append((f".{name}.{inner}.", ".self_attn."))
                    child = getattr(child, inner)
                elif name != "self_attn":
                    renames.append((f".{name}.", ".self_attn."))
                name = "self_attn"
            if name in INLINE_MLP:
                continue
            if name in FFN_NAMES and not hasattr(layer, "mlp"):  # MPT's ffn
                renames.append((f".{name}.", ".mlp."))
                name = "mlp"
            setattr(view, name, child)
        if inline is not None:
            view.mlp = inline
            renames.extend((f".{name}.", f".mlp.{name}.") for name in INLINE_MLP)
        object.__setattr__(view, "hf", layer)
        views.append(view)
    return views, sorted(set(renames))


def _wrapped_attention(attention: Any) -> str | None:
    """The one child of an attention that only wraps it (no parameters of its own), if any."""
    children = list(attention.named_children())
    if len(children) != 1 or next(attention.parameters(recurse=False), None) is not None:
        return None
    name, inner = children[0]
    return name if learns(inner) else None


def _inline_mlp(layer: Any) -> Any:
    """``fc1`` and ``fc2`` as one module whose hooks see fc1's input and fc2's output."""
    import torch

    if hasattr(layer, "mlp") or not all(
        isinstance(getattr(layer, n, None), torch.nn.Linear) for n in INLINE_MLP
    ):
        return None
    block = spanning(layer.fc1, layer.fc2)
    block.fc1, block.fc2 = layer.fc1, layer.fc2
    activation = getattr(layer, "activation_fn", None)
    if isinstance(activation, torch.nn.Module):
        object.__setattr__(block, "act_fn", activation)
    return block
