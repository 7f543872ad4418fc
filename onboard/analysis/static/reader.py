"""``StaticReader``: follows the construction graph and asks each concern's reader in turn.

It holds what the readers share: the parsed file, the config, the evidence log, the deltas and
the roles found so far, and the helpers that cite a line or record a delta.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onboard.analysis import static_graph as graph
from onboard.analysis.static.attention import check_attention_forward, read_attention
from onboard.analysis.static.config_values import ConfigValues
from onboard.analysis.static.layer_types import read_layer_types
from onboard.analysis.static.mlp import read_mlp
from onboard.analysis.static.norms import read_norm
from onboard.analysis.static.rope import read_rope
from onboard.analysis.static.scales import (
    embedding_scale,
    final_softcap,
    lm_head_bias,
    read_scales,
    tied_embeddings,
    unread_config_math,
)
from onboard.analysis.static.source_model import (
    SourceModel,
    call_of,
    config_key,
    is_self_attr,
    keyword_value,
    mentions,
)
from onboard.analysis.static.structure import (
    layer_roles,
    model_parts,
    read_decoder,
    read_head,
    read_renames,
)
from onboard.source import SourceFile
from onboard.spec import Delta, Evidence, EvidenceLog, TextDecoderSpec


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

    def cite(self, path: str, node: ast.AST) -> None:
        self.log.add(path, self.src.cite(node))
        if not isinstance(node, ast.ClassDef | ast.FunctionDef):
            self.explained.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))

    def delta(self, what: str, node: ast.AST | None, detail: str = "") -> None:
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
        found = read_decoder(self, top)
        if found is None:
            return None
        decoder, layers = found
        model_class = str(decoder.cls)
        layer_class = str(layers.cls)
        parts = graph.children(self.src, model_class)
        embed, final = model_parts(self, model_class, parts, layers)
        if embed is None:
            return None
        built = self.present(layer_class)  # `if config.add_cross_attention:` evaluated
        layer = {a: c for a, c in graph.children(self.src, layer_class).items() if a in built}
        blocks = layer_roles(self, layer_class, layer)
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
        head = read_head(self, top, decoder)
        read_renames(self, decoder, embed, layers, final, head)
        norm = read_norm(self, layer_class, norms, final.node if final else None)
        if final is None:
            self.delta(f"{model_class} has no final norm", self.src.classes[model_class])
        attention = read_attention(self, attention_class)
        check_attention_forward(self, attention_class, attention)
        kinds, window, kinds_key = read_layer_types(self, attention_class, model_class)
        rotary = next((c.cls for c in parts.values() if "rotary" in c.attr), None)
        if rotary in self.src.classes:
            self.roles["rotary"] = rotary
        unread_config_math(self, (self.causal_lm, model_class, layer_class))
        return TextDecoderSpec(
            vocab_size=int(self.cfg.get("vocab_size", 0)),
            hidden_size=int(self.cfg.get("hidden_size", 0)),
            num_layers=int(self.cfg.get("num_hidden_layers", 0)),
            max_position_embeddings=int(self.cfg.get("max_position_embeddings", 2048)),
            layer_types=kinds,
            sliding_window=window,
            layer_types_key=kinds_key,
            attention=attention,
            mlp=read_mlp(self, mlp_class),
            norm=norm,
            rope=read_rope(self, kinds, attention),
            tie_word_embeddings=tied_embeddings(self),
            embedding_scale=embedding_scale(self, model_class, embed.node),
            final_logit_softcap=final_softcap(self),
            lm_head_bias=lm_head_bias(self, head.node if head else None),
            scales=read_scales(
                self,
                {
                    "embedding": [model_class, embed.cls],
                    "residual": [layer_class],
                    "logits": [self.causal_lm],
                },
                skip={attention.scale_key},
            ),
            names=tuple(self.names.items()),
        )

    # -- shared by the concern readers: guards evaluated, citations, helpers -------------

    def present(self, class_name: str) -> dict[str, ast.Assign]:
        """The class's sub-modules that this config builds (``if config.flag:`` evaluated)."""
        built = {}
        for attr, (node, guards) in self.src.guarded_assignments(class_name).items():
            verdicts = [self.truth(class_name, guard) for guard in guards]
            if None in verdicts:
                self.delta(
                    f"{class_name}.{attr} is built under a condition onboard cannot evaluate",
                    node,
                    " and ".join(ast.unparse(g) for g in guards),
                )
            elif all(verdicts):
                built[attr] = node
        return built

    def truth(self, class_name: str, test: ast.expr) -> bool | None:
        """A guard's value for this config: ``config.x``, ``self.x`` (set from config), ``not``."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.truth(class_name, test.operand)
            return None if inner is None else not inner
        key = config_key(test)
        if key is None and is_self_attr(test):
            source = self.src.assignments(class_name).get(test.attr)
            key = config_key(source.value) if source is not None else None
        if key is None:
            return None
        return bool(self.cfg.get(key, False))

    def cite_uses(self, path: str, scope: ast.AST, name: str) -> None:
        """Cite every simple statement in ``scope`` that mentions ``name``."""
        for node in ast.walk(scope):
            if isinstance(node, ast.stmt) and not hasattr(node, "body") and mentions(node, name):
                self.cite(path, node)

    def absent(self, path: str, class_name: str, what: str) -> None:
        """Evidence for a feature the code does not have: where it was looked for."""
        node = self.src.classes[class_name]
        self.log.add(path, Evidence("source", f"{self.src.file.name}:{node.lineno}", what))

    def with_helpers(self, class_name: str) -> list[ast.AST]:
        """A class plus the module-level functions it names (``attention_interface =
        eager_attention_forward`` counts, not only calls)."""
        cls = self.src.classes[class_name]
        functions = {n.name: n for n in self.src.tree.body if isinstance(n, ast.FunctionDef)}
        named = {node.id for node in ast.walk(cls) if isinstance(node, ast.Name)}
        return [cls, *(functions[name] for name in sorted(named & set(functions)))]

    def bool_keyword(
        self, node: ast.Assign, name: str, *, default: bool
    ) -> tuple[bool, str | None]:
        value = keyword_value(call_of(node.value), name)
        if value is None:
            return default, None
        key = config_key(value)
        if key:
            return bool(self.cfg.get(key, False)), key
        try:
            return bool(ast.literal_eval(value)), None
        except ValueError:
            self.delta(f"{name}= is neither a literal nor a config key", node, ast.unparse(value))
            return default, None
