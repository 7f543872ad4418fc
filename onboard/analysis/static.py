"""Describe a decoder from its modeling source alone, without running it.

Hub remote code may not be executed before the user says ``--trust-remote-code``, so the
analysis then reads the source with ``ast``: it follows the construction graph (causal LM ->
model -> decoder layer -> attention / MLP / norms), reads constructor arguments (biases, norm
widths, activation keys), follows the decoder layer's forward to place the norms, and looks for
the operations that change numerics (``1 + weight``, ``tanh`` soft-capping, embedding scaling).
The roles are found by structure, not by Llama's names (``static_graph``): ``transformer.h``,
``attention`` / ``feed_forward``, ``wqkv`` / ``wo``, ``w1`` / ``w3`` / ``w2`` and classes picked
from ``ATTENTION_CLASSES[config._attn_implementation]`` are read, and the checkpoint keeps its
names (weight renames onto the Llama layout). A fused q/k/v projection is read with the layout
its forward shows, ALiBi from its slopes; neither is ever read as something else silently.
Every value cites its line. What it cannot read becomes an unresolved delta with that line,
saying what was expected and what was found.
Values come with confidence 0.8: read, not measured (a trusted run measures them).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onboard.analysis import static_graph as graph
from onboard.analysis.norm_reader import placement_of
from onboard.block_specs import AttentionSpec, MLPSpec, NormSpec
from onboard.source import SourceFile
from onboard.spec import Delta, Evidence, EvidenceLog, RopeSpec, ScaleSpec, TextDecoderSpec
from onboard.tiny import MULTIPLIER_KEYS

NORM_BASES = ("LayerNorm", "RMSNorm")
# transformers ACT2FN entries without parameters whose formula the targets know.
PLAIN_ACTIVATIONS = frozenset(
    {
        "silu",
        "swish",
        "gelu",
        "gelu_new",
        "gelu_fast",
        "gelu_pytorch_tanh",
        "quick_gelu",
        "relu",
        "relu2",
        "sigmoid",
        "tanh",
    }
)


@dataclass
class SourceModel:
    """The parsed modeling file: classes by name, and the file for citations."""

    file: SourceFile
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)

    @classmethod
    def parse(cls, file: SourceFile) -> SourceModel:
        tree = ast.parse(file.text)
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        return cls(file, tree, classes)

    def cite(self, node: ast.AST) -> Evidence:
        line = ast.get_source_segment(self.file.text, node) or ""
        return Evidence("source", f"{self.file.name}:{node.lineno}", " ".join(line.split())[:120])

    def method(self, class_name: str, name: str) -> ast.FunctionDef | None:
        """The class's method, or the one it inherits from a class of the file."""
        for owner in (class_name, *self.bases(class_name)):
            cls = self.classes.get(owner)
            found = next(
                (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
                if cls is not None
                else (),
                None,
            )
            if found is not None:
                return found
        return None

    def bases(self, class_name: str) -> tuple[str, ...]:
        """The file's classes ``class_name`` derives from, nearest first."""
        found: list[str] = []
        todo = [class_name]
        while todo:
            cls = self.classes.get(todo.pop(0))
            for base in cls.bases if cls is not None else ():
                name = base.id if isinstance(base, ast.Name) else None
                if name in self.classes and name not in found and name != class_name:
                    found.append(name)
                    todo.append(name)
        return tuple(found)

    def assignments(self, class_name: str) -> dict[str, ast.Assign]:
        """``self.<attr> = ...`` in ``__init__`` (first assignment of each attribute)."""
        return {attr: node for attr, (node, _) in self.guarded_assignments(class_name).items()}

    def guarded_assignments(
        self, class_name: str
    ) -> dict[str, tuple[ast.Assign, tuple[ast.expr, ...]]]:
        """Each ``self.<attr> = ...`` of ``__init__`` with the ``if`` tests it sits under."""
        init = self.method(class_name, "__init__")
        found: dict[str, tuple[ast.Assign, tuple[ast.expr, ...]]] = {}

        def visit(statements: list[ast.stmt], guards: tuple[ast.expr, ...]) -> None:
            for statement in statements:
                if isinstance(statement, ast.Assign):
                    for target in statement.targets:
                        if _self_attr(target):
                            found.setdefault(target.attr, (statement, guards))
                elif isinstance(statement, ast.If):
                    visit(statement.body, (*guards, statement.test))
                    negated = ast.UnaryOp(op=ast.Not(), operand=statement.test)
                    visit(statement.orelse, (*guards, negated))
                elif isinstance(statement, ast.With | ast.For | ast.Try):
                    visit(statement.body, guards)

        if init is not None:
            visit(init.body, ())
        return found


def _self_attr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _called_class(value: ast.AST) -> str | None:
    """``X(...)`` or ``nn.X(...)`` -> ``X`` (the first call found, e.g. inside a conditional)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                return func.id
            if isinstance(func, ast.Attribute):
                return func.attr
    return None


def _name_of(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _call(value: ast.AST) -> ast.Call | None:
    return next((n for n in ast.walk(value) if isinstance(n, ast.Call)), None)


def _keyword(call: ast.Call | None, name: str) -> ast.AST | None:
    if call is None:
        return None
    return next((k.value for k in call.keywords if k.arg == name), None)


def _config_key(node: ast.AST | None) -> str | None:
    """``config.x`` or ``self.config.x`` -> ``x``."""
    if isinstance(node, ast.Attribute):
        base = node.value
        if isinstance(base, ast.Name) and base.id == "config":
            return node.attr
        if isinstance(base, ast.Attribute) and base.attr == "config":
            return node.attr
    return None


class ConfigValues:
    """config.json values, falling back to the remote config class's ``__init__`` defaults."""

    def __init__(self, config: Mapping[str, Any], files: Sequence[SourceFile]) -> None:
        self.config = config
        self.defaults = _config_defaults(files)

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.config:
            return self.config[key]
        return self.defaults.get(key, default)

    def has(self, key: str) -> bool:
        return key in self.config or key in self.defaults


def _config_defaults(files: Sequence[SourceFile]) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for file in files:
        if not file.name.startswith("configuration_"):
            continue
        tree = ast.parse(file.text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                args = node.args.args[-len(node.args.defaults) :] if node.args.defaults else []
                for arg, value in zip(args, node.args.defaults, strict=True):
                    try:
                        defaults[arg.arg] = ast.literal_eval(value)
                    except ValueError:
                        continue
                for arg, value in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True):
                    if value is not None:
                        try:
                            defaults[arg.arg] = ast.literal_eval(value)
                        except ValueError:
                            continue
    return defaults


@dataclass(frozen=True)
class StaticResult:
    text: TextDecoderSpec | None
    evidence: tuple[tuple[str, tuple[Evidence, ...]], ...]
    deltas: tuple[Delta, ...]
    roles: tuple[tuple[str, str], ...]  # role (attention, mlp, ...) -> the file's class
    explained_lines: frozenset[int]  # lines of the modeling file some detected value cites
    # Checkpoint-name substrings -> the Llama layout's (transformer.h. -> model.layers.)
    renames: tuple[tuple[str, str], ...] = ()


class StaticReader:
    """Reads one remote modeling file into a ``TextDecoderSpec``."""

    def __init__(
        self, files: Sequence[SourceFile], config: Mapping[str, Any], causal_lm: str
    ) -> None:
        modeling = next((f for f in files if f.name.startswith("modeling_")), None)
        if modeling is None:
            raise ValueError("no modeling_*.py among the remote files")
        self.src = SourceModel.parse(modeling)
        self.cfg = ConfigValues(config, files)
        self.causal_lm = causal_lm
        self.log = EvidenceLog()
        self.deltas: list[Delta] = []
        self.roles: dict[str, str] = {"causal_lm": causal_lm}
        self.explained: set[int] = set()
        self.parallel = False  # set while reading the layer: the MLP reads attention's input
        self.attn_attr, self.mlp_attr = "self_attn", "mlp"  # the layer's names for them
        self.names: dict[str, str] = {}  # spec role -> the file's attribute, where they differ
        self.renames: tuple[tuple[str, str], ...] = ()

    def _cite(self, path: str, node: ast.AST) -> None:
        self.log.add(path, self.src.cite(node))
        if not isinstance(node, ast.ClassDef | ast.FunctionDef):
            self.explained.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))

    def _delta(self, what: str, node: ast.AST | None, detail: str = "") -> None:
        where = f"{self.src.file.name}:{node.lineno}" if node is not None else self.src.file.name
        self.deltas.append(Delta(what, where, detail))

    def read(self) -> StaticResult:
        text = self._read()
        return StaticResult(
            text,
            self.log.freeze(),
            tuple(self.deltas),
            tuple(self.roles.items()),
            frozenset(self.explained),
            self.renames,
        )

    # -- construction graph ---------------------------------------------------------------

    def _read(self) -> TextDecoderSpec | None:
        top = graph.children(self.src, self.causal_lm)
        found = self._decoder(top)
        if found is None:
            return None
        decoder, layers = found
        model_class = str(decoder.cls)
        layer_class = str(layers.cls)
        parts = graph.children(self.src, model_class)
        embed, final = self._model_parts(model_class, parts, layers)
        if embed is None:
            return None
        built = self._present(layer_class)  # `if config.add_cross_attention:` evaluated
        layer = {a: c for a, c in graph.children(self.src, layer_class).items() if a in built}
        blocks = self._layer_roles(layer_class, layer)
        if blocks is None:
            return None
        attention_child, mlp_child, norms = blocks
        self.attn_attr, self.mlp_attr = attention_child.attr, mlp_child.attr
        attention_class, mlp_class = str(attention_child.cls), str(mlp_child.cls)
        self.roles.update(
            model=model_class,
            decoder_layer=layer_class,
            attention=attention_class,
            mlp=mlp_class,
        )
        head = self._head(top, decoder)
        self._renames(decoder, embed, layers, final, head)
        norm = self._norm(layer_class, norms, final.node if final else None)
        if final is None:
            self._delta(f"{model_class} has no final norm", self.src.classes[model_class])
        attention = self._attention(attention_class)
        self._check_attention_forward(attention_class, attention)
        kinds, window, kinds_key = self._layer_types(attention_class, model_class)
        rotary = next((c.cls for c in parts.values() if "rotary" in c.attr), None)
        if rotary in self.src.classes:
            self.roles["rotary"] = rotary
        self._unread_config_math((self.causal_lm, model_class, layer_class))
        return TextDecoderSpec(
            vocab_size=int(self.cfg.get("vocab_size", 0)),
            hidden_size=int(self.cfg.get("hidden_size", 0)),
            num_layers=int(self.cfg.get("num_hidden_layers", 0)),
            max_position_embeddings=int(self.cfg.get("max_position_embeddings", 2048)),
            layer_types=kinds,
            sliding_window=window,
            layer_types_key=kinds_key,
            attention=attention,
            mlp=self._mlp(mlp_class),
            norm=norm,
            rope=self._rope(kinds, attention),
            tie_word_embeddings=self._tied(),
            embedding_scale=self._embedding_scale(model_class, embed.node),
            final_logit_softcap=self._final_softcap(),
            lm_head_bias=self._lm_head_bias(head.node if head else None),
            scales=self._scales(
                {
                    "embedding": [model_class, embed.cls],
                    "residual": [layer_class],
                    "logits": [self.causal_lm],
                },
                skip={attention.scale_key},
            ),
            names=tuple(self.names.items()),
        )

    # The roles are found by structure: the decoder is the child holding an nn.ModuleList of a
    # class of the file, the embedding an nn.Embedding, the final norm a norm; in a layer the
    # attention is the child whose class takes a softmax over its projections, the MLP the one
    # made of linear projections only. Names are kept as the checkpoint writes them (renames).

    def _decoder(self, top: Mapping[str, graph.Child]) -> tuple[graph.Child, graph.Child] | None:
        for candidate in top.values():
            if candidate.cls not in self.src.classes or candidate.in_list:
                continue
            for part in graph.children(self.src, candidate.cls).values():
                if part.in_list and part.cls in self.src.classes:
                    self._cite("text.layout.decoder", candidate.node)
                    self._cite("text.layout.layers", part.node)
                    return candidate, part
        found = ", ".join(c.describe() for c in top.values()) or "none"
        nested = [
            f"{c.attr}.{inner.attr}.{part.attr}"
            for c in top.values()
            if c.cls in self.src.classes
            for inner in graph.children(self.src, c.cls).values()
            if inner.cls in self.src.classes and inner.cls != c.cls
            for part in graph.children(self.src, inner.cls).values()
            if part.in_list
        ]
        where = f"; the layers sit deeper ({', '.join(nested)}), which onboard does not read" * (
            bool(nested)
        )
        self._delta(
            f"causal LM {self.causal_lm}: no child holds an nn.ModuleList of decoder layers "
            f"(found children {found}){where}",
            self.src.classes.get(self.causal_lm),
        )
        return None

    def _model_parts(
        self, model_class: str, parts: Mapping[str, graph.Child], layers: graph.Child
    ) -> tuple[graph.Child | None, graph.Child | None]:
        """(the token embedding, the final norm); other learned parts are deltas."""
        embeddings = [c for c in parts.values() if graph.torch_base(self.src, c.cls) == "Embedding"]
        vocab = [c for c in embeddings if _mentions(c.node, "vocab")]
        embed = vocab[0] if vocab else (embeddings[0] if len(embeddings) == 1 else None)
        norms = [c for c in parts.values() if self._is_norm(c.cls)]
        final = norms[-1] if len(norms) == 1 else None
        known = {layers.attr, *(c.attr for c in (embed, final) if c is not None)}
        for c in parts.values():
            if c.attr in known or "rotary" in c.attr:
                continue
            self._delta(
                f"{model_class}.{c.attr} has no role in the spec ({c.describe()})",
                c.node,
                self.src.cite(c.node).detail,
            )
        if embed is None:
            found = ", ".join(c.describe() for c in parts.values())
            self._delta(
                f"{model_class}: no token embedding (an nn.Embedding over the vocabulary) among "
                f"its children {found}",
                self.src.classes[model_class],
            )
        else:
            self._cite("text.layout.embedding", embed.node)
        if final is not None:
            self._cite("text.final_norm", final.node)
        return embed, final

    def _layer_roles(
        self, layer_class: str, layer: Mapping[str, graph.Child]
    ) -> tuple[graph.Child, graph.Child, dict[str, ast.Assign]] | None:
        """(attention, MLP, norms) of the decoder layer, told apart by what their classes do."""
        norms = {c.attr: c.node for c in layer.values() if self._is_norm(c.cls)}
        attention, mlp, why = [], [], []
        for c in layer.values():
            if c.attr in norms:
                continue
            if c.refused:
                why.append(c.refused)
                continue
            if c.cls not in self.src.classes:
                continue
            if graph.does_attention(self.src, c.cls) is not None:
                attention.append(c)
            elif self._linears_only(c.cls):
                mlp.append(c)
        if len(attention) == 1 and len(mlp) == 1:
            for c in (attention[0], mlp[0]):
                self._cite(f"text.layout.{'attention' if c is attention[0] else 'mlp'}", c.node)
                if c.table is not None:
                    self._cite_table(c)
            self._unknown_children(
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
        self._delta(
            f"decoder layer {layer_class}: found children {found}; expected one attention and "
            f"one MLP, found {' and '.join(expected)}" + (f"; {'; '.join(why)}" if why else ""),
            self.src.classes[layer_class],
        )
        return None

    def _linears_only(self, class_name: str) -> bool:
        """At least two linear projections (what else it holds is reported by the MLP reader)."""
        parts = graph.children(self.src, class_name)
        return sum(c.cls == "Linear" for c in parts.values()) >= 2

    def _cite_table(self, c: graph.Child) -> None:
        """The dispatch and the table it reads."""
        table = next(
            (
                n
                for n in self.src.tree.body
                if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == c.table for t in n.targets)
            ),
            None,
        )
        self._cite("text.layout.dispatch", c.node)
        if table is not None:
            self.log.add("text.layout.dispatch", self.src.cite(table))

    def _head(self, top: Mapping[str, graph.Child], decoder: graph.Child) -> graph.Child | None:
        linears = [c for c in top.values() if c.cls == "Linear"]
        vocab = [c for c in linears if _mentions(c.node, "vocab")]
        head = top.get("lm_head") or (vocab[0] if vocab else None)
        if head is not None and head.cls != "Linear":
            self._delta(
                f"the head {head.describe()} is not an nn.Linear: onboard does not read it",
                head.node,
            )
        for c in top.values():
            if c is not head and c is not decoder:
                self._delta(
                    f"{self.causal_lm}.{c.attr} has no role in the spec ({c.describe()})", c.node
                )
        return head

    def _renames(
        self,
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
        if self.attn_attr != "self_attn":
            pairs.append((f".{self.attn_attr}.", ".self_attn."))
        if self.mlp_attr != "mlp":
            pairs.append((f".{self.mlp_attr}.", ".mlp."))
        if head is not None and head.attr != "lm_head":
            pairs.append((f"{head.attr}.", "lm_head."))
        self.renames = tuple((old, new) for old, new in pairs if old != new)
        if self.renames:
            self.log.add(
                "weights.renames",
                Evidence(
                    "source",
                    f"{self.src.file.name}:{decoder.node.lineno}",
                    "; ".join(f"{old} -> {new}" for old, new in self.renames),
                ),
            )

    def _built_class(self, node: ast.Assign | None) -> str | None:
        """The file's own class an assignment constructs (looking inside ``nn.ModuleList``)."""
        if node is None:
            return None
        for call in ast.walk(node.value):
            if isinstance(call, ast.Call):
                name = _name_of(call.func)
                if name in self.src.classes:
                    return name
        return _called_class(node.value)

    def _unknown_children(
        self, class_name: str, children: Mapping[str, ast.Assign], known: set[str]
    ) -> None:
        for attr, node in children.items():
            if attr in known or not self._is_module(node.value):
                continue
            self._delta(
                f"{class_name}.{attr} has no role in the spec", node, self.src.cite(node).detail
            )

    def _is_module(self, value: ast.expr) -> bool:
        """Whether an assignment builds a sub-module or parameter (not a plain value)."""
        for node in ast.walk(value):
            if not isinstance(node, ast.Call):
                continue
            name = _name_of(node.func)
            if name in self.src.classes or name == "Parameter":
                return True
            if isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) in (
                "nn",
                "torch.nn",
            ):
                return name not in ("Dropout", "Identity")
        return False

    def _is_norm(self, class_name: str | None) -> bool:
        if class_name is None:
            return False
        if class_name in NORM_BASES:
            return True
        cls = self.src.classes.get(class_name)
        return cls is not None and "norm" in class_name.lower()

    # -- norms ------------------------------------------------------------------------------

    def _norm(
        self, layer_class: str, norms: Mapping[str, ast.Assign], final: ast.Assign | None
    ) -> NormSpec:
        roles = self._norm_roles(layer_class, set(norms))
        for attr in norms:
            if attr not in roles.values():
                self._delta(f"norm {attr} with no place in the layer", norms[attr])
            self._cite("text.norm.names", norms[attr])
        placement = placement_of(roles)
        if self.parallel:
            placement = "parallel" if placement == "pre" else None
        if placement is None:
            self._delta(
                "unrecognised norm placement", self.src.method(layer_class, "forward"), repr(roles)
            )
            placement = "pre"
        reference = final or next(iter(norms.values()), None)
        class_name = _called_class(reference.value) if reference else None
        if class_name in self.src.classes:
            self.roles["norm"] = class_name
        kind, offset = self._norm_class(class_name)
        eps_key = _config_key(_keyword(_call(reference.value), "eps")) if reference else None
        eps = float(self.cfg.get(eps_key, 1e-6)) if eps_key else 1e-6
        if reference is not None:
            self._cite("text.norm.kind", reference)
            self._cite("text.norm.eps", reference)
        layer_node = self.src.classes[layer_class]
        self.log.add(
            "text.norm.placement",
            Evidence(
                "source", f"{self.src.file.name}:{layer_node.lineno}", f"{placement}: {roles}"
            ),
        )
        weight = self._norm_has(class_name, reference, "weight", "elementwise_affine")
        bias = kind == "layer" and weight and self._norm_has(class_name, reference, "bias", "bias")
        return NormSpec(kind, eps, offset, placement, tuple(roles.items()), eps_key, bias, weight)

    def _norm_has(
        self, class_name: str | None, reference: ast.Assign | None, attr: str, switch: str
    ) -> bool:
        """torch's norms have ``weight`` / ``bias`` unless built with ``<switch>=False``; the
        file's own norm class has one when its ``__init__`` sets ``self.<attr>``."""
        cls = self.src.classes.get(class_name) if class_name else None
        torch_norm = cls is None or any(
            (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")) in NORM_BASES
            for b in cls.bases
        )
        if not torch_norm:
            return attr in self.src.assignments(class_name)
        # the subclass's own default (Nemotron: bias=True), else torch's (True)
        default = _default(self.src.method(class_name, "__init__"), switch) if cls else None
        fallback = not (isinstance(default, ast.Constant) and default.value is False)
        if reference is None:
            return fallback
        return self._bool_keyword(reference, switch, default=fallback)[0]

    def _norm_class(self, class_name: str | None) -> tuple[str, float]:
        if class_name == "LayerNorm":
            self.log.add(
                "text.norm.weight_offset",
                Evidence("source", self.src.file.name, "torch.nn.LayerNorm: weight, bias"),
            )
            return "layer", 0.0
        if class_name == "RMSNorm" or class_name is None:
            return "rms", 0.0
        cls = self.src.classes.get(class_name)
        if cls is None:
            return "rms", 0.0
        text = ast.get_source_segment(self.src.file.text, cls) or ""
        offset = 1.0 if _matches(cls, _one_plus_weight) else 0.0
        if offset:
            self._cite(
                "text.norm.weight_offset", next(n for n in ast.walk(cls) if _one_plus_weight(n))
            )
        else:
            self._absent("text.norm.weight_offset", class_name, "scaled by weight, not 1 + weight")
        centred = (".mean(" in text and ("- " in text or "x - " in text)) or "layer_norm(" in text
        base_layer = any(isinstance(b, ast.Attribute) and b.attr == "LayerNorm" for b in cls.bases)
        return ("layer" if centred or base_layer else "rms"), offset

    def _norm_roles(self, layer_class: str, norms: set[str]) -> dict[str, str]:
        """Follow the forward's assignments: which norm feeds or follows attention and the MLP."""
        forward = self.src.method(layer_class, "forward")
        if forward is None:
            return {}
        origin: dict[str, str] = {}  # variable -> what produced it ("norm:x", "attn", "mlp", ...)
        roles: dict[str, str] = {}
        for stmt in forward.body:
            targets, value = _assignment(stmt)
            if value is None:
                continue
            produced = self._producer(value, norms, origin, roles)
            for target in targets:
                origin[target] = produced
            if produced.startswith("norm:"):
                self._cite("text.norm.placement", stmt)
        return dict(
            sorted(
                roles.items(),
                key=lambda item: ("attn_in", "attn_out", "mlp_in", "mlp_out").index(item[0]),
            )
        )

    def _producer(
        self, value: ast.AST, norms: set[str], origin: dict[str, str], roles: dict[str, str]
    ) -> str:
        call = value if isinstance(value, ast.Call) else None
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call):
            call = value.value
        if isinstance(value, ast.Tuple) or call is None:
            return "other"
        func = call.func
        if not (_self_attr(func)):
            return "other"
        name = func.attr
        arg = call.args[0] if call.args else _keyword(call, "hidden_states")
        source = origin.get(arg.id, "") if isinstance(arg, ast.Name) else ""
        if name in norms:
            if source == "attn":
                roles.setdefault("attn_out", name)
            elif source == "mlp":
                roles.setdefault("mlp_out", name)
            return f"norm:{name}"
        if name == self.attn_attr:
            if source.startswith("norm:"):
                roles.setdefault("attn_in", source[5:])
            return "attn"
        if name == self.mlp_attr:
            if source.startswith("norm:"):
                if roles.get("attn_in") == source[5:] and "attn_out" not in roles:
                    self.parallel = True  # the MLP reads the attention's own input (Cohere)
                    self._cite("text.norm.placement", call)
                roles.setdefault("mlp_in", source[5:])
            return "mlp"
        return "other"

    # -- attention ------------------------------------------------------------------------

    def _present(self, class_name: str) -> dict[str, ast.Assign]:
        """The class's sub-modules that this config builds (``if config.flag:`` evaluated)."""
        built = {}
        for attr, (node, guards) in self.src.guarded_assignments(class_name).items():
            verdicts = [self._truth(class_name, guard) for guard in guards]
            if None in verdicts:
                self._delta(
                    f"{class_name}.{attr} is built under a condition onboard cannot evaluate",
                    node,
                    " and ".join(ast.unparse(g) for g in guards),
                )
            elif all(verdicts):
                built[attr] = node
        return built

    def _truth(self, class_name: str, test: ast.expr) -> bool | None:
        """A guard's value for this config: ``config.x``, ``self.x`` (set from config), ``not``."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._truth(class_name, test.operand)
            return None if inner is None else not inner
        key = _config_key(test)
        if key is None and _self_attr(test):
            source = self.src.assignments(class_name).get(test.attr)
            key = _config_key(source.value) if source is not None else None
        if key is None:
            return None
        return bool(self.cfg.get(key, False))

    def _attention(self, attention_class: str) -> AttentionSpec:
        parts = self._present(attention_class)
        heads = int(self.cfg.get("num_attention_heads", 1))
        kv_heads = int(self.cfg.get("num_key_value_heads") or heads)
        head_dim = int(self.cfg.get("head_dim") or int(self.cfg.get("hidden_size", 0)) // heads)
        projections = self._projections(attention_class, parts)
        self._unknown_children(
            attention_class,
            parts,
            {*projections.values(), "q_norm", "k_norm", "rotary_emb"},
        )
        fused = projections.get("qkv")
        layout, groups = "concatenated", 1
        if fused is not None:
            layout, groups = self._fused_layout(attention_class, fused, heads, kv_heads)
        biases, bias_keys = {}, []
        for letter in "qkvo":
            attr = projections.get(letter, fused if letter != "o" else None)
            node = parts.get(attr) if attr else None
            if node is None:
                biases[letter] = False
                continue
            if attr != f"{letter}_proj" and attr != fused:
                self.names[f"{letter}_proj"] = attr
            value, key = self._bool_keyword(node, "bias", default=True)
            biases[letter] = value
            if key:
                bias_keys.append((letter, key))
            self._cite(f"text.attention.{letter}_bias", _keyword(_call(node.value), "bias") or node)
        qk_norm = "none"
        if "q_norm" in parts:
            width = (
                _call(parts["q_norm"].value).args[0] if _call(parts["q_norm"].value).args else None
            )
            text = ast.unparse(width) if width is not None else ""
            qk_norm = "full_width" if "num" in text and "head" in text else "per_head"
            self._cite("text.attention.qk_norm", parts["q_norm"])
        scale_key = self._scale_key(parts.get("scaling"))
        if "scaling" not in parts:
            self._cite_plain_scale(attention_class)
        scale = head_dim**-0.5
        power = 1.0 if scale_key in MULTIPLIER_KEYS else -0.5
        if scale_key is not None:
            value = self.cfg.get(scale_key)
            if isinstance(value, int | float) and value > 0:
                scale = float(value) ** power
            else:
                self._delta(
                    f"attention scale key {scale_key} has no usable value", None, repr(value)
                )
                scale_key = None
        softcap = self._attention_softcap(attention_class)
        self._cite("text.attention.head_dim", self.src.classes[attention_class])
        self._absent("text.attention.mla", attention_class, "q/k/v projections, no latent ranks")
        if qk_norm == "none":
            self._absent("text.attention.qk_norm", attention_class, "no q_norm / k_norm")
        if fused is None:
            self._absent("text.attention.fused_qkv", attention_class, "q, k, v projected apart")
        self._absent("text.rope_layers_key", attention_class, "no per-layer RoPE list")
        return AttentionSpec(
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            q_bias=biases["q"],
            k_bias=biases["k"],
            v_bias=biases["v"],
            o_bias=biases["o"],
            qk_norm=qk_norm,
            scale=scale,
            softcap=float(softcap) if softcap else None,
            bias_keys=tuple(bias_keys),
            scale_key=scale_key,
            scale_power=power,
            fused_qkv=fused,
            fused_qkv_layout=layout,  # type: ignore[arg-type]
            fused_qkv_groups=groups,
            alibi=self._alibi(attention_class),
        )

    def _projections(self, attention_class: str, parts: Mapping[str, ast.Assign]) -> dict[str, str]:
        """Letter (q, k, v, o, or qkv for one fused projection) -> the attention's linear.

        The output projection is the linear applied to something else than the block's input;
        the input ones are the others: three are told apart by their names (q_proj, wq, query),
        one is a fused q/k/v projection whose layout the forward shows."""
        linears = [a for a, n in parts.items() if _called_class(n.value) == "Linear"]
        if {"q_proj", "k_proj", "v_proj", "o_proj"} <= set(linears):
            return {letter: f"{letter}_proj" for letter in "qkvo"}
        calls = graph.linear_calls(self.src, attention_class, set(linears))
        on_input = {name for name, first in calls if first}
        outputs = [n for n in dict.fromkeys(name for name, _ in calls) if n not in on_input]
        named_o = [n for n in linears if n.lower() in OUTPUT_NAMES]
        found: dict[str, str] = {}
        if len(outputs) == 1:
            found["o"] = outputs[0]
        elif len(named_o) == 1:
            found["o"] = named_o[0]
        inputs = [n for n in linears if n != found.get("o")]
        letters = {_letter(n): n for n in inputs}
        if len(inputs) == 1 and "o" in found:
            found["qkv"] = inputs[0]
            self._cite("text.attention.fused_qkv", parts[inputs[0]])
        elif len(inputs) == 3 and set(letters) == {"q", "k", "v"} and "o" in found:
            found.update(letters)
        else:
            described = ", ".join(
                f"{a} ({_called_class(n.value)})"
                for a, n in parts.items()
                if graph.is_module(self.src, n.value)
            )
            self._delta(
                f"attention {attention_class}: found children {described or 'none'}; expected "
                "q, k, v projections told apart by name (q_proj, wq, query, ...) or one fused "
                "q/k/v linear, and one output linear applied to the attention's result",
                self.src.classes[attention_class],
            )
        return found

    def _fused_layout(
        self, attention_class: str, fused: str, heads: int, kv_heads: int
    ) -> tuple[str, int]:
        """The fused projection's rows as the forward splits them (InternLM2's rows per
        key/value head are kv_grouped, per_head when each has one query head)."""
        read = graph.fused_layout(self.src, attention_class, fused)
        where = read.node or self.src.classes[attention_class]
        if read.layout is None:
            self._delta(
                f"fused q/k/v projection {fused}: the forward splits it in a way onboard cannot "
                f"read ({read.why}); expected a split or a view showing q, k, v concatenated or "
                "per head",
                where,
                self.src.cite(where).detail,
            )
            return "concatenated", 1
        self._cite("text.attention.fused_qkv", where)
        if read.layout == "kv_grouped" and heads == kv_heads:
            return "per_head", 1  # one query head per key/value head: (head, q/k/v, head_dim)
        return read.layout, 1

    def _alibi(self, attention_class: str) -> bool:
        """ALiBi: the standard slopes computed in the file, and no RoPE applied; anything else
        named for ALiBi is refused, never read as RoPE."""
        formula, named = graph.alibi_slopes(self.src)
        if formula is None and named is None:
            self._absent("text.attention.alibi", attention_class, "no ALiBi slopes")
            return False
        where = formula or named
        if formula is None:
            self._delta(
                "ALiBi with slopes onboard cannot read: expected the ALiBi paper's "
                "2 ** (-(2 ** -(log2(heads) - 3))) series",
                where,
                self.src.cite(where).detail,
            )
            return False
        if self._rope_calls(attention_class):
            self._delta(
                "ALiBi slopes and RoPE in one file: which layers use which is not readable",
                where,
                self.src.cite(where).detail,
            )
            return False
        self._cite("text.attention.alibi", formula)
        if named is not None:
            self._cite("text.attention.alibi", named)
        return True

    def _rope_calls(self, attention_class: str) -> list[ast.Call]:
        """Calls of a rotary function in any method of the attention (or a class it derives
        from): 2024 code often projects and rotates in a helper of the forward."""
        calls = []
        for owner in (attention_class, *self.src.bases(attention_class)):
            for node in ast.walk(self.src.classes[owner]):
                if isinstance(node, ast.Call) and "rotary" in (_name_of(node.func) or ""):
                    calls.append(node)
        return sorted(calls, key=lambda c: c.lineno)

    def _cite_plain_scale(self, attention_class: str) -> None:
        """Without a ``scaling`` attribute: where the scores are divided by sqrt(head_dim)."""
        for scope in graph.scopes(self.src, attention_class):
            for node in ast.walk(scope):
                if (
                    isinstance(node, ast.BinOp)
                    and (
                        (isinstance(node.op, ast.Div) and _mentions(node.right, "sqrt"))
                        or (
                            isinstance(node.op, ast.Pow)
                            and ast.unparse(node.right).replace(" ", "") == "-0.5"
                        )
                    )
                    and (_mentions(node, "head_dim") or _mentions(node, "head_size"))
                ):
                    self._cite("text.attention.scale", node)
                    return

    def _scale_key(self, scaling: ast.Assign | None) -> str | None:
        """``head_dim ** -0.5`` -> None; ``config.k ** -0.5`` -> ``k``; anything else, a delta."""
        if scaling is None:
            return None
        self._cite("text.attention.scale", scaling)
        expr = scaling.value
        base = None
        if (
            isinstance(expr, ast.BinOp)
            and isinstance(expr.op, ast.Pow)
            and ast.unparse(expr.right).replace(" ", "") == "-0.5"
        ):
            base = expr.left
        elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div) and _is_one(expr.left):
            call = expr.right
            if isinstance(call, ast.Call) and _name_of(call.func) == "sqrt" and call.args:
                base = call.args[0]
        key = _config_key(base) if base is not None else None
        if base is not None and (key == "head_dim" or ast.unparse(base) == "self.head_dim"):
            return None
        if key is not None:
            return key
        if _config_key(expr) in MULTIPLIER_KEYS:  # the config holds the scale itself (Granite)
            return _config_key(expr)
        self._delta(
            "attention scale not explained by head_dim ** -0.5 or config.<key> ** -0.5",
            scaling,
            ast.unparse(expr),
        )
        return None

    def _cite_uses(self, path: str, scope: ast.AST, name: str) -> None:
        """Cite every simple statement in ``scope`` that mentions ``name``."""
        for node in ast.walk(scope):
            if isinstance(node, ast.stmt) and not hasattr(node, "body") and _mentions(node, name):
                self._cite(path, node)

    def _absent(self, path: str, class_name: str, what: str) -> None:
        """Evidence for a feature the code does not have: where it was looked for."""
        node = self.src.classes[class_name]
        self.log.add(path, Evidence("source", f"{self.src.file.name}:{node.lineno}", what))

    def _with_helpers(self, class_name: str) -> list[ast.AST]:
        """A class plus the module-level functions it names (``attention_interface =
        eager_attention_forward`` counts, not only calls)."""
        cls = self.src.classes[class_name]
        functions = {n.name: n for n in self.src.tree.body if isinstance(n, ast.FunctionDef)}
        named = {node.id for node in ast.walk(cls) if isinstance(node, ast.Name)}
        return [cls, *(functions[name] for name in sorted(named & set(functions)))]

    def _attention_softcap(self, attention_class: str) -> float | None:
        tanh = _first_tanh(self._with_helpers(attention_class))
        if tanh is None:
            self._absent("text.attention.softcap", attention_class, "no tanh on the scores")
            return None
        self._cite("text.attention.softcap", tanh)
        return self._cap("attn_logit_softcapping", tanh, "attention scores")

    def _bool_keyword(
        self, node: ast.Assign, name: str, *, default: bool
    ) -> tuple[bool, str | None]:
        value = _keyword(_call(node.value), name)
        if value is None:
            return default, None
        key = _config_key(value)
        if key:
            return bool(self.cfg.get(key, False)), key
        try:
            return bool(ast.literal_eval(value)), None
        except ValueError:
            self._delta(f"{name}= is neither a literal nor a config key", node, ast.unparse(value))
            return default, None

    def _layer_types(
        self, attention_class: str, model_class: str
    ) -> tuple[tuple[str, ...], int | None, str | None]:
        """The layer kinds, the window of sliding ones, and the config key listing the kinds."""
        count = int(self.cfg.get("num_hidden_layers", 0))
        key = None
        declared = self.cfg.get("layer_types")
        window = self.cfg.get("sliding_window")
        model = self.src.classes[model_class]
        uses_window = _mentions(model, "sliding_window") or _mentions(
            self.src.classes[attention_class], "sliding_window"
        )
        pattern = self.cfg.get("sliding_window_pattern")
        if declared is None and isinstance(pattern, int) and pattern > 0 and window:
            # Gemma's rule: every pattern-th layer attends fully, the others slide.
            declared = [
                "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(count)
            ]
        if isinstance(declared, list) and len(declared) == count:
            kinds, key = tuple(str(k) for k in declared), "layer_types"
            self.log.add(
                "text.layer_types", Evidence("config", "config.json:layer_types", str(set(kinds)))
            )
        elif window and uses_window and self.cfg.get("use_sliding_window") is False:
            kinds = ("full_attention",) * count
            self.log.add(
                "text.layer_types",
                Evidence("config", "config.json:use_sliding_window", "false: no layer slides"),
            )
        elif window and uses_window and "max_window_layers" in self.cfg.config:
            kinds = ("full_attention",) * count
            self._delta(
                "sliding window on some layers by max_window_layers: which ones is not readable",
                None,
                f"max_window_layers={self.cfg.get('max_window_layers')}",
            )
        elif window and uses_window:
            kinds = ("sliding_attention",) * count
            node = next(
                n
                for n in ast.walk(model)
                if isinstance(n, ast.Name | ast.Attribute) and "sliding_window" in ast.unparse(n)
            )
            self._cite("text.layer_types", node)
        else:
            kinds = ("full_attention",) * count
        if "sliding_attention" in kinds and window:
            self.log.add(
                "text.sliding_window", Evidence("config", "config.json:sliding_window", str(window))
            )
            return kinds, int(window), key
        self.log.add(
            "text.sliding_window",
            Evidence(
                "config", "config.json:sliding_window", f"{window}; every layer attends fully"
            ),
        )
        return kinds, None, key

    # -- MLP, RoPE, embeddings, head --------------------------------------------------------

    def _mlp(self, mlp_class: str) -> MLPSpec:
        parts = self.src.assignments(mlp_class)
        linears = [a for a, n in parts.items() if _called_class(n.value) == "Linear"]
        if {"gate_proj", "up_proj", "down_proj"} <= set(linears):
            kind, projections = "gated", ("gate_proj", "up_proj", "down_proj")
        elif "gate_up_proj" in linears:
            kind, projections = "fused_gate_up", ("gate_up_proj", "down_proj")
        elif len(linears) == 2:
            kind, projections = "plain", self._plain_order(mlp_class, linears)
        elif len(linears) == 3 and (order := self._gated_order(mlp_class, linears)) is not None:
            kind, projections = "gated", order  # InternLM2: w1 (gate), w3 (up), w2 (down)
        else:
            self._delta(
                f"MLP {mlp_class}: projections not understood (found linears "
                f"{', '.join(linears) or 'none'}; expected gate/up/down, as the forward shows "
                "down(act(gate(x)) * up(x)), or up and down)",
                self.src.classes[mlp_class],
                ", ".join(linears),
            )
            kind, projections = "gated", ("gate_proj", "up_proj", "down_proj")
        self._unknown_children(
            mlp_class,
            parts,
            {*linears, *(a for a in parts if "act" in a)},
        )
        self.log.add("text.mlp.kind", self.src.cite(self.src.classes[mlp_class]))
        act_key, activation = "hidden_act", self.cfg.get("hidden_act", "silu")
        for node in ast.walk(self.src.classes[mlp_class]):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id == "ACT2FN"
            ):
                key = _config_key(node.slice)
                if key:
                    act_key, activation = key, self.cfg.get(key)
                    self._cite("text.mlp.activation", node)
        if activation not in PLAIN_ACTIVATIONS:
            self._delta(
                f"activation {activation!r}: onboard cannot tell from the source whether it has "
                "learnable parameters or a non-standard formula",
                self.src.classes[mlp_class],
                f"config.{act_key}",
            )
        width = int(self.cfg.get("intermediate_size", 0))
        last = parts.get(projections[-1])
        if last is None:  # not understood, reported above: nothing to read the bias from
            return MLPSpec(kind, str(activation), False, width, projections, None, act_key)
        bias, bias_key = self._bool_keyword(last, "bias", default=True)
        self._cite("text.mlp.bias", _keyword(_call(last.value), "bias") or last)
        return MLPSpec(kind, str(activation), bias, width, projections, bias_key, act_key)

    def _gated_order(self, mlp_class: str, linears: list[str]) -> tuple[str, str, str] | None:
        """(gate, up, down) from ``down(act(gate(x)) * up(x))`` in the forward: down is the
        outer call, gate the one inside the activation, up the other."""
        forward = self.src.method(mlp_class, "forward")
        names = set(linears)
        for node in ast.walk(forward) if forward is not None else ():
            if not (isinstance(node, ast.Call) and _self_attr(node.func)):
                continue
            down = node.func.attr
            if down not in names or not node.args:
                continue
            product = node.args[0]
            if not (isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)):
                continue
            gate = up = None
            for side in (product.left, product.right):
                inner = _inner_linear(side, names)
                if inner is None:
                    continue
                if isinstance(side, ast.Call) and _self_attr(side.func) and side.func.attr == inner:
                    up = inner
                else:
                    gate = inner  # wrapped: the activation's argument
            if gate and up and len({gate, up, down}) == 3:
                self._cite("text.mlp.kind", node)
                return gate, up, down
        return None

    def _plain_order(self, mlp_class: str, linears: list[str]) -> tuple[str, ...]:
        """The projection the forward calls first is the input one."""
        forward = self.src.method(mlp_class, "forward")
        order = (
            [
                n.func.attr
                for n in ast.walk(forward)
                if isinstance(n, ast.Call) and _self_attr(n.func) and n.func.attr in linears
            ]
            if forward
            else []
        )
        first = order[-1] if order else linears[0]  # ast.walk visits outer calls first
        return (first, next(name for name in linears if name != first))

    def _rope(
        self, kinds: tuple[str, ...], attention: AttentionSpec
    ) -> tuple[tuple[str, RopeSpec], ...]:
        if attention.alibi:  # positions enter as ALiBi biases: nothing rotates
            where = self.log.freeze()
            alibi = dict(where).get("text.attention.alibi", ())
            for kind in dict.fromkeys(kinds):
                for evidence in alibi[:1]:
                    self.log.add(
                        f"text.rope.{kind}",
                        Evidence("source", evidence.where, "ALiBi biases, no rotary embedding"),
                    )
            return tuple((kind, RopeSpec(None, 0.0)) for kind in dict.fromkeys(kinds))
        key = "rope_parameters" if self.cfg.get("rope_parameters") else "rope_scaling"
        params = self.cfg.get(key) or {}
        if not isinstance(params, dict):
            self._delta(f"config.json {key} is not an object", None, repr(params)[:80])
            params = {}
        interleaved = self._rope_interleaved()
        self._conditional_rope()
        specs = []
        for kind in dict.fromkeys(kinds):
            own = params.get(kind) if isinstance(params.get(kind), dict) else params
            specs.append((kind, self._rope_of(own, interleaved)))
            self.log.add(
                f"text.rope.{kind}", Evidence("config", f"config.json:{key}", str(own)[:120])
            )
        understood = {"rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor"}
        for unread in sorted(k for k in self.cfg.config if "rope" in k or "rotary" in k):
            if unread not in understood:
                self._delta(f"config.json {unread} is a RoPE setting onboard does not read", None)
        if "llama_4_scaling_beta" in params:
            self._delta(
                "position-dependent query scale (llama_4_scaling_beta)",
                None,
                f"{key}.llama_4_scaling_beta = {params['llama_4_scaling_beta']}",
            )
        return tuple(specs)

    def _rope_of(self, params: Mapping[str, Any], interleaved: bool) -> RopeSpec:
        theta = float(params.get("rope_theta", self.cfg.get("rope_theta", 10000.0)))
        partial = float(
            params.get("partial_rotary_factor", self.cfg.get("partial_rotary_factor", 1.0)) or 1.0
        )
        rope_type = str(params.get("rope_type", params.get("type", "default")))
        extra = tuple(
            sorted(
                (k, v)
                for k, v in params.items()
                if k not in ("rope_type", "type", "rope_theta", "partial_rotary_factor")
            )
        )
        if partial < 1.0 and not self._reads_partial_rotary():
            self._delta(
                "config.json sets partial_rotary_factor but the modeling code never reads it",
                None,
                f"partial_rotary_factor={partial:g}",
            )
        return RopeSpec(rope_type, theta, partial, extra, interleaved)

    def _conditional_rope(self) -> None:
        """RoPE applied under an ``if`` in the attention forward (NoPE layers): not expressible
        from the source alone, so a delta."""
        forward = self.src.method(self.roles.get("attention", ""), "forward")
        for node in ast.walk(forward) if forward is not None else ():
            if isinstance(node, ast.If) and any(
                isinstance(n, ast.Call) and "rotary" in (_name_of(n.func) or "")
                for n in ast.walk(node)
            ):
                self._delta(
                    "RoPE applied only under a condition (layers without RoPE)",
                    node,
                    f"if {ast.unparse(node.test)}",
                )

    def _rotary_functions(self) -> list[ast.FunctionDef]:
        return [
            n
            for n in self.src.tree.body
            if isinstance(n, ast.FunctionDef) and ("rotary" in n.name or "rotate" in n.name)
        ]

    def _rope_interleaved(self) -> bool:
        """Rotate-half pairs dim i with i + d/2; interleaved pairs 2i, 2i+1 (``x[..., ::2]``)."""
        for function in self._rotary_functions():
            for node in ast.walk(function):
                if isinstance(node, ast.Slice) and _is_two(node.step):
                    self._cite("text.rope.interleaved", node)
                    return True
                if isinstance(node, ast.Call) and _name_of(node.func) == "repeat_interleave":
                    self._cite("text.rope.interleaved", node)
                    return True
        rotate_half = next((f for f in self._rotary_functions() if f.name == "rotate_half"), None)
        if rotate_half is not None:
            self._cite("text.rope.convention", rotate_half.body[-1])
        return False

    def _reads_partial_rotary(self) -> bool:
        rotary = self.src.classes.get(self.roles.get("rotary", ""))
        scopes: list[ast.AST] = [*self._rotary_functions(), *([rotary] if rotary else [])]
        for scope in scopes:
            for node in ast.walk(scope):
                text = ast.unparse(node) if isinstance(node, ast.Name | ast.Attribute) else ""
                if "partial_rotary" in text or "rotary_dim" in text:
                    self._cite("text.rope.partial_rotary_factor", node)
                    return True
        return False

    def _check_attention_forward(self, attention_class: str, attention: AttentionSpec) -> None:
        """The spec normalises q/k per head before RoPE, as Qwen3 does: check the order."""
        forward = self.src.method(attention_class, "forward")
        if forward is None:
            self._delta("attention has no forward", self.src.classes[attention_class])
            return
        calls = [n for n in ast.walk(forward) if isinstance(n, ast.Call)]
        rope_calls = self._rope_calls(attention_class)
        norm_calls = [
            c for c in calls if _self_attr(c.func) and c.func.attr in ("q_norm", "k_norm")
        ]
        for call in norm_calls:
            self._cite("text.attention.qk_norm", call)
        for call in rope_calls:
            self._cite("text.rope.applied", call)
        if not rope_calls and not attention.alibi:
            self._delta(
                "attention forward applies no RoPE function and the file computes no ALiBi "
                "slopes: how positions enter is not read",
                forward,
            )
        elif norm_calls and max(c.lineno for c in norm_calls) > rope_calls[0].lineno:
            self._delta("q/k norm applied after RoPE", max(norm_calls, key=lambda c: c.lineno))
        if attention.qk_norm != "none" and not norm_calls:
            self._delta("q_norm/k_norm built but never called", forward)

    def _tied(self) -> bool:
        tied = bool(self.cfg.get("tie_word_embeddings", True))
        self.log.add(
            "text.tie_word_embeddings",
            Evidence("config", "config.json:tie_word_embeddings", str(tied)),
        )
        return tied

    def _embedding_scale(self, model_class: str, embed: ast.Assign | None) -> str:
        candidates = [self.src.classes[model_class]]
        if embed is not None and _called_class(embed.value) in self.src.classes:
            candidates.append(self.src.classes[_called_class(embed.value)])
        for cls in candidates:
            for node in ast.walk(cls):
                if _is_sqrt_hidden(node):
                    self._cite("text.embedding_scale", node)
                    self._cite_uses("text.embedding_scale", cls, "embed_scale")
                    return "sqrt_hidden"
        self._absent("text.embedding_scale", model_class, "embeddings used as looked up")
        return "none"

    def _scales(
        self, sites: Mapping[str, Sequence[str | None]], skip: set[str | None]
    ) -> tuple[ScaleSpec, ...]:
        """Config multipliers: where the code multiplies or divides by ``config.<key>`` (or an
        attribute set from it). A use in any other place is a delta, never dropped."""
        found: list[ScaleSpec] = []
        for key in MULTIPLIER_KEYS:
            if key in skip or not any(_reads_key(n, key) for n in ast.walk(self.src.tree)):
                continue
            uses = [
                (site, node, form)
                for site, classes in sites.items()
                for name in classes
                if name in self.src.classes
                for node, form in _scaling_uses(self.src.classes[name], key)
            ]
            if len({site for site, _, _ in uses}) != 1 or any(f != uses[0][2] for _, _, f in uses):
                where = next(n for n in ast.walk(self.src.tree) if _reads_key(n, key))
                self._delta(f"config multiplier {key} used where onboard cannot place it", where)
                continue
            site, node, form = uses[0]
            self._cite(f"text.scales.{site}", node)
            found.append(ScaleSpec(site, key, form))
        if not found:
            self._absent("text.scales", self.causal_lm, "no config multiplier")
        return tuple(found)

    def _unread_config_math(self, classes: Sequence[str]) -> None:
        """A forward that multiplies or divides by a config value onboard does not read
        (MiniCPM's logits / (hidden_size / dim_model_base)) would be dropped: a delta."""
        read = {*MULTIPLIER_KEYS, *_READ_KEYS}
        for class_name in classes:
            forward = self.src.method(class_name, "forward")
            for node in ast.walk(forward) if forward is not None else ():
                if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div)):
                    continue
                keys = {_config_key(n) for n in ast.walk(node)} - {None}
                unread = sorted(k for k in keys if k not in read)
                if unread:
                    self._delta(
                        f"{class_name}.forward scales by config.{', config.'.join(unread)}, "
                        "which onboard does not read",
                        node,
                        ast.unparse(node)[:100],
                    )
                    return

    def _lm_head_bias(self, head: ast.Assign | None) -> bool:
        """torch's Linear has a bias unless built with ``bias=False``."""
        if head is None:
            self._absent("text.lm_head_bias", self.causal_lm, "no lm_head")
            return False
        self._cite("text.lm_head_bias", head)
        return self._bool_keyword(head, "bias", default=True)[0]

    def _final_softcap(self) -> float | None:
        forward = self.src.method(self.causal_lm, "forward")
        tanh = _first_tanh([forward]) if forward is not None else None
        if tanh is None:
            self._absent("text.final_logit_softcap", self.causal_lm, "no tanh on the logits")
            return None
        self._cite("text.final_logit_softcap", tanh)
        self._cite_uses("text.final_logit_softcap", forward, "final_logit_softcapping")
        return self._cap("final_logit_softcapping", tanh, "final logits")

    def _cap(self, key: str, tanh: ast.AST, what: str) -> float | None:
        """The soft-cap the code applies with ``tanh``: the config value; null turns it off."""
        if not self.cfg.has(key):
            self._delta(f"{what} soft-capped by a value onboard cannot read", tanh, f"no {key}")
            return None
        cap = self.cfg.get(key)
        if cap is None or cap == 0:
            return None
        if not isinstance(cap, int | float):
            self._delta(f"{what} soft-cap {key} is not a number", tanh, repr(cap)[:60])
            return None
        return float(cap)


# Config keys whose use in arithmetic the reader explains (soft-caps, embedding scale, the
# multipliers' divisors) or that only size things.
_READ_KEYS = frozenset(
    {
        "final_logit_softcapping",
        "hidden_size",
        "num_hidden_layers",
        "vocab_size",
        "num_attention_heads",
        "head_dim",
    }
)
# What attention code calls its output projection, when the forward does not show it.
OUTPUT_NAMES = frozenset({"o_proj", "wo", "dense", "out_proj", "c_proj", "o"})


def _letter(name: str) -> str:
    """q, k or v for a projection's name (q_proj, wq, query, W_q); ? otherwise."""
    lowered = name.lower().removeprefix("w_")
    if len(lowered) > 1 and lowered[0] == "w" and lowered[1] in "qkv":
        lowered = lowered[1:]
    for letter, word in (("q", "query"), ("k", "key"), ("v", "value")):
        if lowered.startswith((word, f"{letter}_")) or lowered == letter:
            return letter
    return "?"


def _assignment(stmt: ast.stmt) -> tuple[list[str], ast.AST | None]:
    if isinstance(stmt, ast.Assign):
        names = []
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                names.append(target.id)
            elif isinstance(target, ast.Tuple):
                names += [e.id for e in target.elts if isinstance(e, ast.Name)]
        return names, stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id], stmt.value
    return [], None


def _inner_linear(node: ast.AST, names: set[str]) -> str | None:
    """The one ``self.<linear>(...)`` call inside ``node``, if exactly one."""
    found = {
        n.func.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and _self_attr(n.func) and n.func.attr in names
    }
    return found.pop() if len(found) == 1 else None


def _one_plus_weight(node: ast.AST) -> bool:
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return False
    sides = (node.left, node.right)
    one = any(_is_one(side) for side in sides)
    return one and any("weight" in ast.unparse(side) for side in sides)


def _first_tanh(scopes: Sequence[ast.AST]) -> ast.AST | None:
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and _name_of(node.func) == "tanh":
                return node
    return None


def _is_sqrt_hidden(node: ast.AST) -> bool:
    """``hidden_size ** 0.5`` (any spelling of the hidden size on the left)."""
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Pow)
        and "hidden_size" in ast.unparse(node.left)
        and isinstance(node.right, ast.Constant)
        and node.right.value == 0.5
    )


def _is_one(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in (1, 1.0) and node.value is not True


def _is_two(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == 2


def _default(function: ast.FunctionDef | None, name: str) -> ast.AST | None:
    """The default value of parameter ``name`` of ``function``, if it has one."""
    if function is None:
        return None
    args = function.args
    positional = args.posonlyargs + args.args
    with_defaults = positional[len(positional) - len(args.defaults) :]
    defaults = dict(zip([a.arg for a in with_defaults], args.defaults, strict=True))
    keyword_only = zip(args.kwonlyargs, args.kw_defaults, strict=True)
    defaults |= {a.arg: d for a, d in keyword_only if d is not None}
    return defaults.get(name)


def _reads_key(node: ast.AST, key: str) -> bool:
    return _config_key(node) == key


def _scaling_uses(cls: ast.ClassDef, key: str) -> list[tuple[ast.AST, str]]:
    """``x * factor`` / ``x / factor`` in ``cls`` where the factor is ``config.<key>`` or a
    ``self.<attr>`` the class set from it (MiniCPM3: scale_depth / math.sqrt(layers)), or a
    sub-module built with it (``embed_scale=config.scale_emb``)."""
    attrs: dict[str, str] = {}
    uses: list[tuple[ast.AST, str]] = []
    for node in ast.walk(cls):
        if not isinstance(node, ast.Assign):
            continue
        if not any(_reads_key(n, key) for n in ast.walk(node.value)):
            continue
        calls = [n for n in ast.walk(node.value) if isinstance(n, ast.Call)]
        if any(_reads_key(k.value, key) for call in calls for k in call.keywords):
            uses.append((node, "times"))
            continue
        right = node.value.right if isinstance(node.value, ast.BinOp) else None
        over_sqrt = (
            right is not None and _mentions(right, "sqrt") and _mentions(right, "num_hidden_layers")
        )
        for target in node.targets:
            if _self_attr(target):
                attrs[target.attr] = "times_over_sqrt_layers" if over_sqrt else "times"

    def factor(operand: ast.AST) -> str | None:
        if _reads_key(operand, key):
            return "times"
        if _self_attr(operand) and operand.attr in attrs:
            return attrs[operand.attr]
        return None

    for node in ast.walk(cls):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
            form = factor(node.right) or (
                factor(node.left) if isinstance(node.op, ast.Mult) else None
            )
            if form is None:
                continue
            if isinstance(node.op, ast.Div):
                if form != "times":
                    continue
                form = "divided_by"
            uses.append((node, form))
    return uses


def _matches(cls: ast.ClassDef, predicate: Any) -> bool:
    return any(predicate(n) for n in ast.walk(cls))


def _mentions(node: ast.AST, name: str) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and name in n.attr)
        or (isinstance(n, ast.Name) and name in n.id)
        for n in ast.walk(node)
    )
