"""Rules for every target: entries resolve, keys are known to transformers, keys are unique."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from onboard.lint.context import Context
from onboard.lint.findings import Finding, Severity
from onboard.lint.pyindex import Missing
from onboard.lint.registry import Registered
from onboard.lint.rules.base import Rule

_CONSEQUENCE = {
    "mobius": "importing mobius fails",
    "automodel": "AutoModel drops the entry and silently uses the HF implementation",
}


def _registered(ctx: Context) -> Iterator[Registered]:
    yield from ctx.registry.entries
    yield from ctx.registry.configs


def _related(ctx: Context, entry: Registered) -> tuple[str, ...]:
    if ctx.target == "mobius":
        return (f"{ctx.layout.kind.prefix}/models/",)
    return (ctx.module_display(entry.module),)


class UnresolvedRegistryModule(Rule):
    """## What it does
    Checks that the module behind every registry entry exists and parses.

    ## Why is this bad?
    NeMo AutoModel imports an entry's module lazily and, when the import fails, drops the entry
    without a word: the model then silently runs on the HF implementation. In mobius the import
    sits at the top of `_registry.py`, so the whole library stops importing.
    Only static facts are checked (the file exists and parses); an import error raised by a
    missing third-party dependency is not detected.

    ## Example
    ```python
    ("FooForCausalLM", ("nemo_automodel.components.models.foo.modle", "FooForCausalLM")),
    ```

    ## Use instead
    ```python
    ("FooForCausalLM", ("nemo_automodel.components.models.foo.model", "FooForCausalLM")),
    ```
    """

    code = "OB101"
    name = "unresolved-registry-module"
    severity = Severity.ERROR

    def check(self, ctx: Context) -> Iterator[Finding]:
        for entry in _registered(ctx):
            found = ctx.resolve(entry)
            if isinstance(found, Missing) and found.module is not None:
                yield self.finding(
                    ctx.registry_display,
                    entry.line,
                    f"{entry.key!r} -> {entry.class_name}: {found.reason}; "
                    f"{_CONSEQUENCE[ctx.target]}",
                    related=_related(ctx, entry),
                )


class UnresolvedRegistryClass(Rule):
    """## What it does
    Checks that the class a registry entry names is defined (or re-exported) where the registry
    looks for it: for mobius, imported in `_registry.py` from a module of `mobius.models` that
    defines it; for NeMo AutoModel, defined in the module of the `(module, class)` pair.

    ## Why is this bad?
    A renamed or moved class leaves an entry that cannot load: AutoModel silently falls back to
    HF (`getattr` fails after the import), mobius fails at import time.

    ## Example
    ```python
    "qwen3": ModelRegistration(Qwen3CausalLM),  # the class is Qwen3CausalLMModel
    ```

    ## Use instead
    ```python
    from mobius.models import Qwen3CausalLMModel

    "qwen3": ModelRegistration(Qwen3CausalLMModel),
    ```
    """

    code = "OB102"
    name = "unresolved-registry-class"
    severity = Severity.ERROR

    def check(self, ctx: Context) -> Iterator[Finding]:
        registry_module = ctx.registry.module
        for entry in _registered(ctx):
            found = ctx.resolve(entry)
            if not isinstance(found, Missing) or found.module is not None:
                continue
            reason = found.reason
            if reason == f"{registry_module} does not define {entry.class_name}":
                reason = f"{entry.class_name} is neither imported nor defined in the registry"
            yield self.finding(
                ctx.registry_display,
                entry.line,
                f"{entry.key!r} -> {entry.class_name}: {reason}; {_CONSEQUENCE[ctx.target]}",
                related=_related(ctx, entry),
            )


class UnknownRegistryKey(Rule):
    """## What it does
    Checks that every registry key is a name the installed transformers knows: a `model_type`
    (or an architecture class name) for mobius, an architecture class name for NeMo AutoModel.
    An AutoModel architecture whose model package also registers a custom config
    (`_CUSTOM_CONFIG_REGISTRATIONS`) is a remote-code model supported on purpose and is skipped.

    ## Why is this bad?
    The key is what a checkpoint's `config.json` is matched against. A key transformers does not
    know is reachable only through remote code, a config registered by hand, or not at all
    (a typo, or a model removed from transformers): the entry may never be used.

    ## Example
    ```python
    "qwen-3": ModelRegistration(Qwen3CausalLMModel),
    ```

    ## Use instead
    ```python
    "qwen3": ModelRegistration(Qwen3CausalLMModel),
    ```
    """

    code = "OB103"
    reads_transformers = True
    name = "unknown-registry-key"
    severity = Severity.WARNING

    def check(self, ctx: Context) -> Iterator[Finding]:
        catalog = ctx.catalog
        if catalog is None:
            return
        known = catalog.architectures
        custom = frozenset(_package(entry.module) for entry in ctx.registry.configs)
        if ctx.target == "mobius":
            known = known | catalog.model_types
        for entry in ctx.registry.entries:
            if entry.key in known or _package(entry.module) in custom:
                continue
            yield self.finding(
                ctx.registry_display,
                entry.line,
                f"{entry.key!r} is not {_UNKNOWN[ctx.target]} transformers {catalog.version} "
                f"knows: {_REACH[ctx.target]}",
            )


_UNKNOWN = {"mobius": "a model_type or architecture", "automodel": "an architecture class"}
_REACH = {
    "mobius": "AutoConfig parses such a checkpoint only with remote code, a config registered by "
    "hand or mobius' own routing (or the key is a typo)",
    "automodel": "only checkpoints whose config.json names it (remote-code or renamed ones) reach "
    "this entry; make sure it is not a typo",
}


def _package(module: str) -> str:
    return module.rpartition(".")[0]


class DuplicateRegistryKey(Rule):
    """## What it does
    Checks that no key appears twice in a registry mapping literal (`_REGISTRATIONS`, the mobius
    side tables, `MODEL_ARCH_MAPPING`, `_CUSTOM_CONFIG_REGISTRATIONS`, ...).

    ## Why is this bad?
    Python keeps the last value for a repeated key, in a dict literal and in
    `OrderedDict([...])` alike, so the earlier entry is silently discarded.

    ## Example
    ```python
    _REGISTRATIONS = {
        "qwen3": ModelRegistration(Qwen3CausalLMModel),
        "qwen3": ModelRegistration(CausalLMModel),
    }
    ```

    ## Use instead
    ```python
    _REGISTRATIONS = {
        "qwen3": ModelRegistration(Qwen3CausalLMModel),
    }
    ```
    """

    code = "OB104"
    name = "duplicate-registry-key"
    severity = Severity.ERROR

    def check(self, ctx: Context) -> Iterator[Finding]:
        for table in ctx.registry.tables.values():
            lines: dict[str, list[int]] = defaultdict(list)
            for item in table.items:
                lines[item.key].append(item.line)
            for key, where in lines.items():
                for line in where[:-1]:
                    yield self.finding(
                        ctx.registry_display,
                        line,
                        f"{key!r} appears again in {table.name} at line {where[-1]}; "
                        "Python keeps only the last, so this entry is dead",
                    )
