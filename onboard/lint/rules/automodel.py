"""NeMo AutoModel rules: every registered class declares its tie policy and its capabilities.

These mirror AutoModel's own CI guardrails (``test_tie_support_registry.py`` and
``test_model_capabilities.py``, section 1.9 of the automodel notes), statically, so a maintainer
sees them at commit time instead of in CI.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from onboard.lint.context import Context
from onboard.lint.findings import Finding, Severity
from onboard.lint.pyindex import ClassInfo, assigned_value, own_attribute, parse_file
from onboard.lint.registry import Registered
from onboard.lint.rules.base import Rule
from onboard.lint.tables import module_tables

AUTOMODEL = ("automodel",)
TIE_ATTRIBUTE = "tie_word_embeddings_support"
# Entries tagged like this own no causal LM head, so no tie policy applies.
NO_LM_HEAD_TAGS = ("retrieval",)
TIE_EXEMPT = "_TIE_SUPPORT_EXEMPT"
# Policies under which the model may run tied, so it must tie the head itself.
TIED_POLICIES = ("BOTH", "TIED_ONLY")


def registered_classes(ctx: Context) -> Iterator[tuple[ClassInfo, tuple[Registered, ...]]]:
    """Each distinct class of MODEL_ARCH_MAPPING that resolves, with the entries naming it."""

    def group() -> dict[tuple[str, str], tuple[ClassInfo, tuple[Registered, ...]]]:
        groups: dict[tuple[str, str], tuple[ClassInfo, tuple[Registered, ...]]] = {}
        for entry in ctx.registry.entries:
            cls = ctx.resolve(entry)
            if isinstance(cls, ClassInfo):
                key = (cls.module, cls.name)
                known = groups.get(key, (cls, ()))[1]
                groups[key] = (cls, (*known, entry))
        return groups

    yield from ctx.memo("automodel.classes", group).values()


def _names(entries: tuple[Registered, ...]) -> str:
    keys = [repr(e.key) for e in entries]
    return keys[0] if len(keys) == 1 else f"{keys[0]} (also {', '.join(keys[1:])})"


def _exempt(ctx: Context) -> frozenset[str]:
    """Class names the checkout's tie-support test exempts (it lives under tests/)."""

    def read() -> frozenset[str]:
        tests = ctx.repo_path("tests")
        if tests is None or not tests.is_dir():
            return frozenset()
        return frozenset(k for path in tests.rglob("*tie_support*.py") for k in _keys(path))

    return ctx.memo("automodel.tie_exempt", read)


def _keys(path: Path) -> frozenset[str]:
    tree = parse_file(path)
    if isinstance(tree, str):
        return frozenset()
    table = module_tables(tree).get(TIE_EXEMPT)
    return table.keys() if table is not None else frozenset()


class MissingTieSupport(Rule):
    """## What it does
    Checks that every class registered in `MODEL_ARCH_MAPPING` declares
    `tie_word_embeddings_support` (a `TieSupport`), on itself or an AutoModel base class.
    Entries tagged `retrieval` (no causal LM head) and classes listed in the checkout's
    `_TIE_SUPPORT_EXEMPT` are skipped.

    ## Why is this bad?
    Without a declared policy AutoModel treats the class as `TieSupport.BOTH` and may tie (or
    untie) `lm_head` against the checkpoint: force-tying once discarded the trained `lm_head` of
    untied Nemotron Nano models (trap T12).

    ## Example
    ```python
    class FooForCausalLM(HFCheckpointingMixin, FooPreTrainedModel):
        ...
    ```

    ## Use instead
    ```python
    class FooForCausalLM(HFCheckpointingMixin, FooPreTrainedModel):
        tie_word_embeddings_support = TieSupport.UNTIED_ONLY
    ```
    """

    code = "OB301"
    name = "missing-tie-support"
    severity = Severity.ERROR
    targets = AUTOMODEL

    def check(self, ctx: Context) -> Iterator[Finding]:
        exempt = _exempt(ctx)
        for cls, entries in registered_classes(ctx):
            if cls.name in exempt or any(t in NO_LM_HEAD_TAGS for e in entries for t in e.tags):
                continue
            if ctx.index.class_attribute(cls, TIE_ATTRIBUTE) is not None:
                continue
            yield self.finding(
                ctx.registry_display,
                entries[0].line,
                f"{_names(entries)} -> {cls.name} ({ctx.display(cls.path)}:{cls.node.lineno}) "
                f"declares no {TIE_ATTRIBUTE}; AutoModel then assumes TieSupport.BOTH",
                related=(ctx.display(cls.path),),
            )


class MissingTieWeights(Rule):
    """## What it does
    Checks that a registered class whose `tie_word_embeddings_support` is `TieSupport.BOTH` or
    `TieSupport.TIED_ONLY` defines `tie_weights()` itself (or in an AutoModel base class).

    ## Why is this bad?
    A class that may run tied must tie `lm_head` to the embeddings explicitly; the inherited HF
    `tie_weights` does not know AutoModel's module layout, so a tied checkpoint loads with an
    untied, wrongly initialised head.

    ## Example
    ```python
    class FooForCausalLM(FooPreTrainedModel):
        tie_word_embeddings_support = TieSupport.BOTH
    ```

    ## Use instead
    ```python
    class FooForCausalLM(FooPreTrainedModel):
        tie_word_embeddings_support = TieSupport.BOTH

        def tie_weights(self, **kwargs):
            if self.config.tie_word_embeddings:
                self.lm_head.weight = self.model.embed_tokens.weight
    ```
    """

    code = "OB302"
    name = "missing-tie-weights"
    severity = Severity.ERROR
    targets = AUTOMODEL

    def check(self, ctx: Context) -> Iterator[Finding]:
        for cls, entries in registered_classes(ctx):
            found = ctx.index.class_attribute(cls, TIE_ATTRIBUTE)
            value = assigned_value(found[1]) if found else None
            policy = ast.unparse(value) if value is not None else ""
            if policy.rpartition(".")[2] not in TIED_POLICIES:
                continue
            if ctx.index.class_attribute(cls, "tie_weights") is not None:
                continue
            yield self.finding(
                ctx.registry_display,
                entries[0].line,
                f"{_names(entries)} -> {cls.name} declares {TIE_ATTRIBUTE} = {policy} but "
                f"defines no tie_weights() ({ctx.display(cls.path)}:{cls.node.lineno})",
                related=(ctx.display(cls.path),),
            )


def _capabilities(ctx: Context, cls: ClassInfo) -> tuple[bool, bool]:
    """(nested ModelCapabilities in the class body, get_capabilities along the bases)."""
    nested = own_attribute(cls.node, "ModelCapabilities") is not None
    method = ctx.index.class_attribute(cls, "get_capabilities") is not None
    return nested, method


class MissingModelCapabilities(Rule):
    """## What it does
    Checks that every registered class states its parallelism capabilities: a nested
    `ModelCapabilities` dataclass in its body, or a `get_capabilities(cls, config)` classmethod.

    ## Why is this bad?
    AutoModel's parallelizer reads the capabilities to decide TP/CP/PP/EP support; a class with
    neither fails AutoModel's `test_model_capabilities.py` and gives the recipes nothing to check
    their parallel sizes against.

    ## Example
    ```python
    class FooForCausalLM(FooPreTrainedModel):
        tie_word_embeddings_support = TieSupport.UNTIED_ONLY
    ```

    ## Use instead
    ```python
    class FooForCausalLM(FooPreTrainedModel):
        @dataclass(frozen=True)
        class ModelCapabilities:
            supports_tp: bool = True
            supports_cp: bool = False
            supports_pp: bool = False
            supports_ep: bool = False
    ```
    """

    code = "OB303"
    name = "missing-model-capabilities"
    severity = Severity.ERROR
    targets = AUTOMODEL

    def check(self, ctx: Context) -> Iterator[Finding]:
        for cls, entries in registered_classes(ctx):
            if any(_capabilities(ctx, cls)):
                continue
            yield self.finding(
                ctx.registry_display,
                entries[0].line,
                f"{_names(entries)} -> {cls.name} has neither a nested ModelCapabilities nor a "
                f"get_capabilities classmethod ({ctx.display(cls.path)}:{cls.node.lineno})",
                related=(ctx.display(cls.path),),
            )


class ConflictingModelCapabilities(Rule):
    """## What it does
    Checks that a registered class does not state its capabilities twice: a nested
    `ModelCapabilities` and a `get_capabilities` classmethod.

    ## Why is this bad?
    AutoModel's guardrail requires exactly one mechanism: with both, which one the parallelizer
    reads is an implementation detail, and the two drift apart.

    ## Example
    ```python
    class FooForCausalLM(FooPreTrainedModel):
        class ModelCapabilities: ...

        @classmethod
        def get_capabilities(cls, config): ...
    ```

    ## Use instead
    Keep one of them: the nested class for fixed capabilities, the classmethod when they depend
    on the config.
    """

    code = "OB304"
    name = "conflicting-model-capabilities"
    severity = Severity.ERROR
    targets = AUTOMODEL

    def check(self, ctx: Context) -> Iterator[Finding]:
        for cls, entries in registered_classes(ctx):
            if not all(_capabilities(ctx, cls)):
                continue
            yield self.finding(
                ctx.registry_display,
                entries[0].line,
                f"{_names(entries)} -> {cls.name} has both a nested ModelCapabilities and a "
                f"get_capabilities classmethod ({ctx.display(cls.path)}:{cls.node.lineno})",
                related=(ctx.display(cls.path),),
            )
