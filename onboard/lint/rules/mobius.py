"""mobius rules: registry options mobius drops (T2, T3) and aliases that lose features (T4, T9)."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from onboard.lint.context import Context
from onboard.lint.findings import Edit, Finding, Severity
from onboard.lint.hf_source import (
    AttentionFacts,
    ConfigField,
    attention_facts,
    config_field,
    declared_model_types,
)
from onboard.lint.pyindex import ClassInfo, assigned_value, parse_file
from onboard.lint.registry import (
    MOBIUS_REGISTRATIONS,
    MOBIUS_SIDE_TABLES,
    MOBIUS_TEXT_ONLY,
    Registered,
)
from onboard.lint.rules.base import Rule

MOBIUS = ("mobius",)
# Generic classes that take graph-changing flags from model_type-keyed lists in
# _configs/_base.py (T4) and build no sliding-window mask on the default EP (T9).
GENERIC_CLASSES = ("CausalLMModel", "MoECausalLMModel")
FLAG_SOURCE = "_configs/_base.py"
# Values of a class-level config_class that let the registry's config_class apply.
_DEFERS_TO_REGISTRY = ("None", "ArchitectureConfig")


def _value_text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return json.dumps(node.value)
    return ast.unparse(node)


class IgnoredInlineRegistrationOption(Rule):
    """## What it does
    Checks `_REGISTRATIONS` entries for `family=`, `variant=` or `test_model_id=` written inline
    in `ModelRegistration(...)`.

    ## Why is this bad?
    `_create_default_registry` re-registers each entry with only `task` and `config_class`;
    `_apply_test_metadata` then fills `family`, `variant` and `test_model_id` from the side tables
    `_FAMILY_OVERRIDES`, `_VARIANT_LABELS` and `_TEST_MODEL_IDS`. An inline value is dropped
    without a message (trap T3).

    ## Example
    ```python
    "DFlashDraftModel": ModelRegistration(
        DFlashDraftModel, task="dflash-draft", family="dflash", variant="qwen3"
    ),
    ```

    ## Use instead
    ```python
    "DFlashDraftModel": ModelRegistration(DFlashDraftModel, task="dflash-draft"),
    _FAMILY_OVERRIDES = {..., "DFlashDraftModel": "dflash"}
    _VARIANT_LABELS = {..., "DFlashDraftModel": "qwen3"}
    ```
    Fixable with `--fix` when the side table exists and has no other value for the key.
    """

    code = "OB201"
    name = "ignored-inline-registration-option"
    severity = Severity.ERROR
    targets = MOBIUS
    fixable = True

    def check(self, ctx: Context) -> Iterator[Finding]:
        for entry in ctx.registry.entries:
            for option, table_name in MOBIUS_SIDE_TABLES.items():
                keyword = entry.keyword(option)
                if keyword is not None:
                    yield self._finding(ctx, entry, keyword, table_name)

    def _finding(
        self, ctx: Context, entry: Registered, keyword: ast.keyword, table_name: str
    ) -> Finding:
        option, value = keyword.arg or "", _value_text(keyword.value)
        message = (
            f"{option}={value} in the {entry.key!r} registration is dropped "
            "(mobius copies only task and config_class)"
        )
        table = ctx.registry.tables.get(table_name)
        existing = table.get(entry.key) if table is not None else None
        fix = None
        if table is None:
            message += f"; there is no {table_name} dict to move it to"
        elif existing is None:
            message += f"; move it to {table_name}"
            fix = Edit("move-option", entry.key, option, table_name, value)
        elif ast.dump(existing.value) == ast.dump(keyword.value):
            message += f"; {table_name} already has it, remove the inline option"
            fix = Edit("drop-option", entry.key, option, table_name, value)
        else:
            other = _value_text(existing.value)
            message += f"; {table_name} says {other} (line {existing.line}) and wins"
        return self.finding(ctx.registry_display, keyword.lineno, message, fix=fix)


class IgnoredRegistryConfigClass(Rule):
    """## What it does
    Checks `config_class=` in `_REGISTRATIONS` entries against the class's own `config_class`
    attribute (looked up along its bases, statically).

    ## Why is this bad?
    `_config_from_hf` uses the module class's `config_class` first and reads the registry's
    only when the class has none (or `ArchitectureConfig`). Every `CausalLMModel` subclass
    inherits `config_class = CausalLMConfig`, so for text models a different registry
    `config_class` is silently ignored (trap T2). A registry value equal to the class attribute
    is redundant and not reported.

    ## Example
    ```python
    "myqwen3": ModelRegistration(Qwen3CausalLMModel, config_class=QKNormConfig),
    ```

    ## Use instead
    ```python
    class MyQwen3CausalLMModel(Qwen3CausalLMModel):
        config_class = QKNormConfig

    "myqwen3": ModelRegistration(MyQwen3CausalLMModel),
    ```
    """

    code = "OB202"
    name = "ignored-registry-config-class"
    severity = Severity.ERROR
    targets = MOBIUS

    def check(self, ctx: Context) -> Iterator[Finding]:
        for entry in ctx.registry.entries:
            keyword = entry.keyword("config_class")
            cls = ctx.resolve(entry)
            if keyword is None or not isinstance(cls, ClassInfo):
                continue
            found = ctx.index.class_attribute(cls, "config_class")
            value = assigned_value(found[1]) if found else None
            if found is None or value is None:
                continue
            wins, wanted = ast.unparse(value), ast.unparse(keyword.value)
            if wins in _DEFERS_TO_REGISTRY or wins == wanted:
                continue
            owner = found[0]
            yield self.finding(
                ctx.registry_display,
                keyword.lineno,
                f"config_class={wanted} in the {entry.key!r} registration is ignored: "
                f"{cls.name}.config_class = {wins} ({owner.name}, "
                f"{ctx.display(owner.path)}:{found[1].lineno}) wins in _config_from_hf; "
                "set config_class on a subclass instead",
                related=(ctx.display(owner.path),),
            )


@dataclass(frozen=True)
class FlagLists:
    """How mobius' config extraction decides one flag: model_type lists and config fields."""

    model_types: frozenset[str]
    config_fields: frozenset[str]


def _flag_lists(tree: ast.Module | str, flag: str) -> FlagLists:
    """Collect ``model_type in (...)`` strings and ``getattr(config, "x")`` fields for ``flag=``."""
    model_types: set[str] = set()
    fields: set[str] = set()
    if isinstance(tree, str):
        return FlagLists(frozenset(), frozenset())
    for keyword in (n for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == flag):
        for node in ast.walk(keyword.value):
            if isinstance(node, ast.Compare) and any(isinstance(o, ast.In) for o in node.ops):
                for container in node.comparators:
                    model_types.update(_strings(container))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
            ):
                fields.update(_strings(ast.Tuple([node.args[1]])))
    return FlagLists(frozenset(model_types), frozenset(fields))


def _strings(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            if isinstance(element, ast.Constant) and isinstance(element.value, str):
                yield element.value


class _Aliases:
    """Entries mapped to a generic class, with their HF attention facts (shared by 3 rules)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @cached_property
    def flag_source(self) -> ast.Module | str:
        return parse_file(self.ctx.layout.package_dir / FLAG_SOURCE)

    def flags(self, flag: str) -> FlagLists:
        return _flag_lists(self.flag_source, flag)

    def entries(self) -> Iterator[tuple[Registered, str, AttentionFacts, frozenset[str]]]:
        """(entry, generic class, attention facts, model_types the HF module declares)."""
        catalog = self.ctx.catalog
        if catalog is None:
            return
        for entry in self.ctx.registry.entries:
            cls = self.ctx.resolve(entry)
            name = cls.name if isinstance(cls, ClassInfo) else entry.class_name
            if name not in GENERIC_CLASSES:
                continue
            files = catalog.source_files(entry.key)
            facts = attention_facts(files)
            if facts is not None:
                yield entry, name, facts, declared_model_types(files) | {entry.key}

    def config_field(self, key: str, name: str) -> ConfigField | None:
        catalog = self.ctx.catalog
        return config_field(catalog.source_files(key), name) if catalog else None


def _aliases(ctx: Context) -> _Aliases:
    return ctx.memo("mobius.aliases", lambda: _Aliases(ctx))


class AliasMissingQkNorm(Rule):
    """## What it does
    Checks keys mapped straight to the generic `CausalLMModel` / `MoECausalLMModel`: when the
    HF attention class (transformers' `modeling_<type>.py`) creates `self.q_norm` /
    `self.k_norm`, the key (or its HF text config's model_type) must be in the model_type list
    that turns on `attn_qk_norm` in mobius' `_configs/_base.py`, or the norm must hang on a
    config field mobius reads (`use_qk_norm`).

    ## Why is this bad?
    The generic class builds q/k norms only when `attn_qk_norm` is set, and that flag follows
    model_type lists, not the weights (trap T4). Otherwise the `q_norm`/`k_norm` weights are
    reported "not applied" at INFO level and the logits are wrong (measured: 0.59 max abs).

    ## Example
    ```python
    "myqwen3": ModelRegistration(CausalLMModel),  # HF Qwen3Attention has q_norm/k_norm
    ```

    ## Use instead
    A class (or a subclass with its own `config_class`) that sets `attn_qk_norm`, e.g. the one
    `onboard new` generates.
    """

    code = "OB203"
    reads_transformers = True
    name = "alias-missing-qk-norm"
    severity = Severity.ERROR
    targets = MOBIUS

    def check(self, ctx: Context) -> Iterator[Finding]:
        aliases = _aliases(ctx)
        lists = aliases.flags("attn_qk_norm")
        for entry, generic, facts, types in aliases.entries():
            if facts.qk_norm is None or types & lists.model_types:
                continue
            guard = facts.qk_norm_condition or ""
            if guard and any(field in guard for field in lists.config_fields):
                continue
            yield self.finding(
                ctx.registry_display,
                entry.line,
                f"{entry.key!r} maps to {generic}, which builds q/k norms only for the "
                f"model_types listed in {FLAG_SOURCE}, but {facts.class_name} creates "
                f"self.q_norm ({facts.qk_norm}): the q_norm/k_norm weights are never applied",
            )


class AliasIgnoresSlidingWindow(Rule):
    """## What it does
    Checks keys mapped straight to the generic `CausalLMModel` / `MoECausalLMModel` whose HF
    attention class uses a sliding window and whose HF config declares `sliding_window`.

    ## Why is this bad?
    The generic text models build a padding-only mask on the default execution provider and
    ignore `sliding_window` (trap T9; a warning is all you get). Outputs diverge once a prompt is
    longer than the window (measured: mistral with a window of 4, 0.63 max abs). It is a warning
    because checkpoints whose window is unset or longer than any prompt are not affected.

    ## Example
    ```python
    "mistral": ModelRegistration(CausalLMModel),  # MistralAttention passes sliding_window
    ```

    ## Use instead
    A class whose text model passes the window to `create_attention_bias(...,
    sliding_window=...)`.
    """

    code = "OB204"
    reads_transformers = True
    name = "alias-ignores-sliding-window"
    severity = Severity.WARNING
    targets = MOBIUS

    def check(self, ctx: Context) -> Iterator[Finding]:
        aliases = _aliases(ctx)
        for entry, generic, facts, _types in aliases.entries():
            if facts.sliding_window is None:
                continue
            field = aliases.config_field(entry.key, "sliding_window")
            if field is None:
                continue
            yield self.finding(
                ctx.registry_display,
                entry.line,
                f"{entry.key!r} maps to {generic}, which ignores sliding_window on the default "
                f"EP, but {facts.class_name} uses one ({facts.sliding_window}; "
                f"{field.class_name}.sliding_window defaults to {field.default}, {field.where})",
            )


class AliasMissingQkvBias(Rule):
    """## What it does
    Checks keys mapped straight to the generic `CausalLMModel` / `MoECausalLMModel` whose HF
    attention class hard-codes `bias=True` on `q_proj`/`k_proj`/`v_proj`: the key (or its HF
    text config's model_type) must be in the model_type list behind `attn_qkv_bias` in mobius'
    `_configs/_base.py`.

    ## Why is this bad?
    mobius reads `attn_qkv_bias` from config fields (`attention_bias`, `use_bias`, ...) and,
    failing those, from a model_type list. A bias that HF hard-codes has no config field, so a
    key outside the list gets projections without bias: the bias weights are never applied.

    ## Example
    ```python
    "myqwen2": ModelRegistration(CausalLMModel),  # Qwen2Attention: nn.Linear(..., bias=True)
    ```

    ## Use instead
    A class (or `config_class`) that sets `attn_qkv_bias=True`.
    """

    code = "OB205"
    reads_transformers = True
    name = "alias-missing-qkv-bias"
    severity = Severity.ERROR
    targets = MOBIUS

    def check(self, ctx: Context) -> Iterator[Finding]:
        aliases = _aliases(ctx)
        lists = aliases.flags("attn_qkv_bias")
        for entry, generic, facts, types in aliases.entries():
            if facts.hard_coded_qkv_bias is None or types & lists.model_types:
                continue
            yield self.finding(
                ctx.registry_display,
                entry.line,
                f"{entry.key!r} maps to {generic}, which sets q/k/v bias from config fields or "
                f"the model_types listed in {FLAG_SOURCE}, but {facts.class_name} hard-codes "
                f"bias=True ({facts.hard_coded_qkv_bias}): the bias weights are never applied",
            )


class OrphanRegistryMetadata(Rule):
    """## What it does
    Checks that every key of `_TEST_MODEL_IDS`, `_FAMILY_OVERRIDES`, `_VARIANT_LABELS` and
    `_TEXT_ONLY_MODEL_TYPE` (keys and values) is registered in `_REGISTRATIONS`.

    ## Why is this bad?
    `_apply_test_metadata` applies a side-table entry only `if arch in reg`, so metadata for an
    unregistered (renamed, misspelt) key is dropped without a message.

    ## Example
    ```python
    _FAMILY_OVERRIDES = {"qwen-3": "qwen"}  # registered as "qwen3"
    ```

    ## Use instead
    ```python
    _FAMILY_OVERRIDES = {"qwen3": "qwen"}
    ```
    """

    code = "OB206"
    name = "orphan-registry-metadata"
    severity = Severity.WARNING
    targets = MOBIUS

    def check(self, ctx: Context) -> Iterator[Finding]:
        registered = ctx.registry.tables[MOBIUS_REGISTRATIONS].keys()
        for name in (*MOBIUS_SIDE_TABLES.values(), MOBIUS_TEXT_ONLY):
            table = ctx.registry.tables.get(name)
            for item in table.items if table is not None else ():
                names = [item.key]
                if name == MOBIUS_TEXT_ONLY:
                    names += list(_strings(ast.Tuple([item.value])))
                for key in dict.fromkeys(names):
                    if key not in registered:
                        yield self.finding(
                            ctx.registry_display,
                            item.line,
                            f"{key!r} in {name} is not registered in {MOBIUS_REGISTRATIONS}; "
                            "mobius ignores this entry",
                        )
