"""Coverage rules: every entry has a test config, a test case and a docs page (checkouts only).

Each rule reads a folder only a checkout has (``tests/``, ``testdata/``, ``docs/``) and stays silent
when that folder is absent, as in an installed package. Skip lists the library keeps for its own
coverage tests (mobius ``_COVERAGE_SKIP``, AutoModel ``_DOC_ARCH_ALIASES``) are honoured.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from onboard.lint.context import Context
from onboard.lint.findings import Finding, Severity
from onboard.lint.pyindex import parse_file
from onboard.lint.registry import MOBIUS_TEST_MODEL_IDS
from onboard.lint.rules.base import Rule
from onboard.lint.tables import module_tables

TEST_CONFIGS = "tests/_test_configs.py"
CASES_DIR = "testdata/cases"
DOCS_DIR = "docs/model-coverage"
# The fields mobius' load_test_case requires; discover_test_cases skips a file without them.
CASE_FIELDS = ("model_id", "model_type", "revision", "task_type", "dtype", "level")
_TOP_LEVEL_SCALAR = re.compile(r"^([A-Za-z_]\w*):[ \t]*(.*?)[ \t]*$", re.MULTILINE)


def _tests_table(ctx: Context, pattern: str, name: str) -> dict[str, ast.expr]:
    """A mapping literal ``name`` from test files matching ``pattern`` under tests/."""

    def read() -> dict[str, ast.expr]:
        tests = ctx.repo_path("tests")
        found: dict[str, ast.expr] = {}
        for path in sorted(tests.rglob(pattern)) if tests is not None and tests.is_dir() else ():
            tree = parse_file(path)
            table = module_tables(tree).get(name) if not isinstance(tree, str) else None
            found.update({item.key: item.value for item in table.items} if table else {})
        return found

    return ctx.memo(f"tests:{pattern}:{name}", read)


def _case_model_ids(cases: Path) -> frozenset[str]:
    """``model_id`` of every case mobius' ``discover_test_cases`` finds (``*.yaml``, all fields).

    Read as text (top-level ``key: scalar`` lines), not parsed: on mobius' 233 cases this finds
    the same 212 ids as ``yaml`` does, in a third of the time of its C loader.
    """
    found = set()
    for path in cases.rglob("*.yaml"):
        text = path.read_text(encoding="utf-8", errors="replace")
        fields = {key: _scalar(raw) for key, raw in _TOP_LEVEL_SCALAR.findall(text)}
        if all(field in fields for field in CASE_FIELDS) and fields["model_id"]:
            found.add(fields["model_id"])
    return frozenset(found)


def _scalar(raw: str) -> str:
    """A YAML plain or quoted scalar without its trailing comment."""
    if raw[:1] in ("'", '"'):
        end = raw.find(raw[0], 1)
        return raw[1:end] if end > 0 else raw[1:]
    return raw.split(" #", 1)[0].strip()


def _coverage_skip(ctx: Context) -> frozenset[str]:
    return frozenset(_tests_table(ctx, "*coverage*test*.py", "_COVERAGE_SKIP"))


def _test_config_keys(path: Path) -> frozenset[str] | None:
    """First elements of the tuples in every module-level ``*_CONFIGS`` list."""
    tree = parse_file(path)
    if isinstance(tree, str):
        return None
    keys = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if not any(isinstance(t, ast.Name) and t.id.endswith("_CONFIGS") for t in targets):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Tuple) and inner.elts:
                first = inner.elts[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    keys.add(first.value)
    return frozenset(keys)


class MissingTestConfig(Rule):
    """## What it does
    Checks that every `_REGISTRATIONS` key has a `(model_type, overrides, is_representative)`
    tuple in one of the `*_CONFIGS` lists of the checkout's `tests/_test_configs.py`, unless
    `_COVERAGE_SKIP` in the coverage test names it. Silent when `tests/_test_configs.py` is absent.

    ## Why is this bad?
    The tuple drives mobius' graph-build (L1) and synthetic-parity (L3) tests; without it the
    entry is never built in CI, and `tests/model_coverage_test.py` fails.

    ## Example
    ```python
    _REGISTRATIONS = {..., "qwen3": ModelRegistration(Qwen3CausalLMModel)}
    CAUSAL_LM_CONFIGS = [("llama", {}, True)]
    ```

    ## Use instead
    ```python
    CAUSAL_LM_CONFIGS = [("llama", {}, True), ("qwen3", {"attn_qk_norm": True}, True)]
    ```
    """

    code = "OB401"
    name = "missing-test-config"
    severity = Severity.WARNING
    targets = ("mobius",)

    def check(self, ctx: Context) -> Iterator[Finding]:
        path = ctx.repo_path(TEST_CONFIGS)
        keys = _test_config_keys(path) if path is not None and path.is_file() else None
        if keys is None:
            return
        skip = _coverage_skip(ctx)
        for entry in ctx.registry.entries:
            if entry.key in keys or entry.key in skip:
                continue
            yield self.finding(
                ctx.registry_display,
                entry.line,
                f"{entry.key!r} has no test config in {TEST_CONFIGS} (and no _COVERAGE_SKIP "
                "reason): its graph is never built by the L1/L3 tests",
                related=(TEST_CONFIGS,),
            )


class MissingTestCase(Rule):
    """## What it does
    Checks, as mobius' `TestL4L5GoldenDataCoverage` in `tests/model_coverage_test.py` does, that
    every `_REGISTRATIONS` key with a test model id in `_TEST_MODEL_IDS` has a YAML test case
    under `testdata/cases/` whose `model_id` is that id, unless `_COVERAGE_SKIP` names the key.
    Cases are matched by `model_id`, not `model_type` (a `gemma3_text` entry is covered by a case
    for `google/gemma-3-1b-pt` whatever its `model_type`). Only `*.yaml` files holding the fields
    mobius requires (`model_id`, `model_type`, `revision`, `task_type`, `dtype`, `level`) count,
    as in `discover_test_cases`. A key without a test model id is not checked here (mobius'
    L2 test, `TestL2ConfigValidation`, asks for the id first). Silent when `testdata/cases/` is
    absent.

    ## Why is this bad?
    The YAML case drives the real-weight golden tests (L4/L5); without it a regression against
    the real checkpoint goes unnoticed, and `test_model_has_golden_data[<key>]` and
    `test_all_models_have_yaml_or_skip` in `tests/model_coverage_test.py` fail.

    ## Example
    `_TEST_MODEL_IDS = {..., "qwen3": "Qwen/Qwen3-0.6B"}` and no YAML under `testdata/cases/`
    with `model_id: "Qwen/Qwen3-0.6B"`.

    ## Use instead
    ```yaml
    model_id: "Qwen/Qwen3-0.6B"
    model_type: "qwen3"
    revision: "<pinned commit>"
    task_type: "text-generation"
    dtype: "float32"
    level: "L4+L5"
    ```
    or a `_COVERAGE_SKIP` entry with the reason.
    """

    code = "OB402"
    name = "missing-test-case"
    severity = Severity.WARNING
    targets = ("mobius",)

    def check(self, ctx: Context) -> Iterator[Finding]:
        cases = ctx.repo_path(CASES_DIR)
        test_ids = ctx.registry.tables.get(MOBIUS_TEST_MODEL_IDS)
        if cases is None or not cases.is_dir() or test_ids is None:
            return
        case_ids = _case_model_ids(cases)
        skip = _coverage_skip(ctx)
        for key in sorted(ctx.registry.main_table.keys() - skip):
            item = test_ids.get(key)
            value = item.value if item is not None else None
            model_id = value.value if isinstance(value, ast.Constant) else None
            if item is None or not isinstance(model_id, str) or model_id in case_ids:
                continue
            yield self.finding(
                ctx.registry_display,
                item.line,
                f"{key!r} has test model id {model_id!r} but no test case under {CASES_DIR}/ "
                f"has model_id: {model_id} (and no _COVERAGE_SKIP reason): mobius' "
                f"test_model_has_golden_data[{key}] fails",
                related=(f"{CASES_DIR}/",),
            )


class MissingDocsPage(Rule):
    """## What it does
    Checks that every `MODEL_ARCH_MAPPING` architecture is mentioned in some
    `docs/model-coverage/**/*.mdx` (or `.md`) page, directly or through the name
    `_DOC_ARCH_ALIASES` gives it. Silent when `docs/model-coverage/` is absent.

    ## Why is this bad?
    Users find supported models through these pages, and AutoModel's `test_doc_coverage.py`
    fails once the grace period for a new architecture ends.

    ## Example
    A new `FooForCausalLM` entry and no page naming it.

    ## Use instead
    Add `docs/model-coverage/llm/<org>/foo.mdx` that names `FooForCausalLM`.
    """

    code = "OB403"
    name = "missing-docs-page"
    severity = Severity.WARNING
    targets = ("automodel",)

    def check(self, ctx: Context) -> Iterator[Finding]:
        docs = ctx.repo_path(DOCS_DIR)
        if docs is None or not docs.is_dir():
            return
        text = "\n".join(
            p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(docs.rglob("*"))
            if p.suffix in (".md", ".mdx") and p.is_file()
        )
        aliases = _tests_table(ctx, "*doc_coverage*.py", "_DOC_ARCH_ALIASES")
        for entry in ctx.registry.entries:
            alias = aliases.get(entry.key)
            documented = alias.value if isinstance(alias, ast.Constant) else entry.key
            if entry.key in text or (isinstance(documented, str) and documented in text):
                continue
            yield self.finding(
                ctx.registry_display,
                entry.line,
                f"{entry.key!r} is not named in any {DOCS_DIR}/ page (nor through "
                "_DOC_ARCH_ALIASES)",
                related=(f"{DOCS_DIR}/",),
            )
