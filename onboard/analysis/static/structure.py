"""Structure: the decoder, the model's parts, the layer's roles, the head, renames, children."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING

from onboard.analysis import static_graph as graph
from onboard.analysis.static.norms import is_norm
from onboard.analysis.static.source_model import called_class, mentions, name_of
from onboard.spec import Evidence

if TYPE_CHECKING:
    from onboard.analysis.static.reader import StaticReader


# The roles are found by structure: the decoder is the child holding an nn.ModuleList of a
# class of the file, the embedding an nn.Embedding, the final norm a norm; in a layer the
# attention is the child whose class takes a softmax over its projections, the MLP the one
# made of linear projections only. Names are kept as the checkpoint writes them (renames).


def read_decoder(
    reader: StaticReader, top: Mapping[str, graph.Child]
) -> tuple[graph.Child, graph.Child] | None:
    for candidate in top.values():
        if candidate.cls not in reader.src.classes or candidate.in_list:
            continue
        for part in graph.children(reader.src, candidate.cls).values():
            if part.in_list and part.cls in reader.src.classes:
                reader.cite("text.layout.decoder", candidate.node)
                reader.cite("text.layout.layers", part.node)
                return candidate, part
    found = ", ".join(c.describe() for c in top.values()) or "none"
    nested = [
        f"{c.attr}.{inner.attr}.{part.attr}"
        for c in top.values()
        if c.cls in reader.src.classes
        for inner in graph.children(reader.src, c.cls).values()
        if inner.cls in reader.src.classes and inner.cls != c.cls
        for part in graph.children(reader.src, inner.cls).values()
        if part.in_list
    ]
    where = f"; the layers sit deeper ({', '.join(nested)}), which onboard does not read" * (
        bool(nested)
    )
    reader.delta(
        f"causal LM {reader.causal_lm}: no child holds an nn.ModuleList of decoder layers "
        f"(found children {found}){where}",
        reader.src.classes.get(reader.causal_lm),
    )
    return None


def model_parts(
    reader: StaticReader, model_class: str, parts: Mapping[str, graph.Child], layers: graph.Child
) -> tuple[graph.Child | None, graph.Child | None]:
    """(the token embedding, the final norm); other learned parts are deltas."""
    embeddings = [c for c in parts.values() if graph.torch_base(reader.src, c.cls) == "Embedding"]
    vocab = [c for c in embeddings if mentions(c.node, "vocab")]
    embed = vocab[0] if vocab else (embeddings[0] if len(embeddings) == 1 else None)
    norms = [c for c in parts.values() if is_norm(reader, c.cls)]
    final = norms[-1] if len(norms) == 1 else None
    known = {layers.attr, *(c.attr for c in (embed, final) if c is not None)}
    for c in parts.values():
        if c.attr in known or "rotary" in c.attr:
            continue
        reader.delta(
            f"{model_class}.{c.attr} has no role in the spec ({c.describe()})",
            c.node,
            reader.src.cite(c.node).detail,
        )
    if embed is None:
        found = ", ".join(c.describe() for c in parts.values())
        reader.delta(
            f"{model_class}: no token embedding (an nn.Embedding over the vocabulary) among "
            f"its children {found}",
            reader.src.classes[model_class],
        )
    else:
        reader.cite("text.layout.embedding", embed.node)
    if final is not None:
        reader.cite("text.final_norm", final.node)
    return embed, final


def layer_roles(
    reader: StaticReader, layer_class: str, layer: Mapping[str, graph.Child]
) -> tuple[graph.Child, graph.Child, dict[str, ast.Assign]] | None:
    """(attention, MLP, norms) of the decoder layer, told apart by what their classes do."""
    norms = {c.attr: c.node for c in layer.values() if is_norm(reader, c.cls)}
    attention, mlp, why = [], [], []
    for c in layer.values():
        if c.attr in norms:
            continue
        if c.refused:
            why.append(c.refused)
            continue
        if c.cls not in reader.src.classes:
            continue
        if graph.does_attention(reader.src, c.cls) is not None:
            attention.append(c)
        elif _linears_only(reader, c.cls):
            mlp.append(c)
    if len(attention) == 1 and len(mlp) == 1:
        for c in (attention[0], mlp[0]):
            reader.cite(f"text.layout.{'attention' if c is attention[0] else 'mlp'}", c.node)
            if c.table is not None:
                _cite_table(reader, c)
        unknown_children(
            reader,
            layer_class,
            {a: c.node for a, c in layer.items()},
            {attention[0].attr, mlp[0].attr, *norms},
        )
        return attention[0], mlp[0], norms
    found = ", ".join(c.describe() for c in layer.values()) or "none"
    expected = []
    if len(attention) != 1:
        expected.append(
            f"{len(attention)} attentions (classes taking a softmax over their projections: "
            f"{', '.join(c.attr for c in attention) or 'none'})"
        )
    if len(mlp) != 1:
        expected.append(
            f"{len(mlp)} MLPs (classes of two or more linears and no softmax: "
            f"{', '.join(c.attr for c in mlp) or 'none'})"
        )
    reader.delta(
        f"decoder layer {layer_class}: found children {found}; expected one attention and "
        f"one MLP, found {' and '.join(expected)}" + (f"; {'; '.join(why)}" if why else ""),
        reader.src.classes[layer_class],
    )
    return None


def _linears_only(reader: StaticReader, class_name: str) -> bool:
    """At least two linear projections (what else it holds is reported by the MLP reader)."""
    parts = graph.children(reader.src, class_name)
    return sum(c.cls == "Linear" for c in parts.values()) >= 2


def _cite_table(reader: StaticReader, c: graph.Child) -> None:
    """The dispatch and the table it reads."""
    table = next(
        (
            n
            for n in reader.src.tree.body
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == c.table for t in n.targets)
        ),
        None,
    )
    reader.cite("text.layout.dispatch", c.node)
    if table is not None:
        reader.log.add("text.layout.dispatch", reader.src.cite(table))


def read_head(
    reader: StaticReader, top: Mapping[str, graph.Child], decoder: graph.Child
) -> graph.Child | None:
    linears = [c for c in top.values() if c.cls == "Linear"]
    vocab = [c for c in linears if mentions(c.node, "vocab")]
    head = top.get("lm_head") or (vocab[0] if vocab else None)
    if head is not None and head.cls != "Linear":
        reader.delta(
            f"the head {head.describe()} is not an nn.Linear: onboard does not read it",
            head.node,
        )
    for c in top.values():
        if c is not head and c is not decoder:
            reader.delta(
                f"{reader.causal_lm}.{c.attr} has no role in the spec ({c.describe()})", c.node
            )
    return head


def read_renames(
    reader: StaticReader,
    decoder: graph.Child,
    embed: graph.Child,
    layers: graph.Child,
    final: graph.Child | None,
    head: graph.Child | None,
) -> None:
    """Checkpoint-name substrings -> the Llama layout's, as transformers-side layouts
    (GPT-2's transformer.h) are written; the checkpoint keeps its own names."""
    d = decoder.attr
    pairs = [
        (f"{d}.{embed.attr}.", "model.embed_tokens."),
        (f"{d}.{layers.attr}.", "model.layers."),
    ]
    if final is not None:
        pairs.append((f"{d}.{final.attr}.", "model.norm."))
    if reader.attn_attr != "self_attn":
        pairs.append((f".{reader.attn_attr}.", ".self_attn."))
    if reader.mlp_attr != "mlp":
        pairs.append((f".{reader.mlp_attr}.", ".mlp."))
    if head is not None and head.attr != "lm_head":
        pairs.append((f"{head.attr}.", "lm_head."))
    reader.renames = tuple((old, new) for old, new in pairs if old != new)
    if reader.renames:
        reader.log.add(
            "weights.renames",
            Evidence(
                "source",
                f"{reader.src.file.name}:{decoder.node.lineno}",
                "; ".join(f"{old} -> {new}" for old, new in reader.renames),
            ),
        )


def _built_class(reader: StaticReader, node: ast.Assign | None) -> str | None:
    """The file's own class an assignment constructs (looking inside ``nn.ModuleList``)."""
    if node is None:
        return None
    for call in ast.walk(node.value):
        if isinstance(call, ast.Call):
            name = name_of(call.func)
            if name in reader.src.classes:
                return name
    return called_class(node.value)


def unknown_children(
    reader: StaticReader, class_name: str, children: Mapping[str, ast.Assign], known: set[str]
) -> None:
    for attr, node in children.items():
        if attr in known or not _is_module(reader, node.value):
            continue
        reader.delta(
            f"{class_name}.{attr} has no role in the spec", node, reader.src.cite(node).detail
        )


def _is_module(reader: StaticReader, value: ast.expr) -> bool:
    """Whether an assignment builds a sub-module or parameter (not a plain value)."""
    for node in ast.walk(value):
        if not isinstance(node, ast.Call):
            continue
        name = name_of(node.func)
        if name in reader.src.classes or name == "Parameter":
            return True
        if isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) in (
            "nn",
            "torch.nn",
        ):
            return name not in ("Dropout", "Identity")
    return False
