"""Which rules run: ``--select`` / ``--ignore`` with ruff's "most specific selector wins".

A selector is ``ALL``, a code prefix (``OB``, ``OB2``, ``OB201``) or a rule name
(``duplicate-registry-key``, as specific as its full code). For each rule the longest matching
selector decides; when a select and an ignore selector are equally specific, the ignore wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from onboard.errors import BadInputError
from onboard.lint.rules import RULES, Rule

ALL = "ALL"


def split_selectors(values: Iterable[str] | None) -> tuple[str, ...]:
    """``["OB1,OB2", "OB5"]`` -> ``("OB1", "OB2", "OB5")`` (comma lists, as ruff accepts)."""
    return tuple(p.strip() for value in values or () for p in value.split(",") if p.strip())


def _specificity(selector: str, rule: type[Rule]) -> int | None:
    """How specifically ``selector`` names ``rule`` (None: it does not match)."""
    if selector == ALL:
        return 0
    if selector.lower() == rule.name:
        return len(rule.code)
    if rule.code.startswith(selector.upper()):
        return len(selector)
    return None


def _best(selectors: Iterable[str], rule: type[Rule]) -> int | None:
    scores = [s for s in (_specificity(x, rule) for x in selectors) if s is not None]
    return max(scores, default=None)


def _validate(selectors: Iterable[str]) -> None:
    for selector in selectors:
        if not any(_specificity(selector, rule) is not None for rule in RULES):
            raise BadInputError(
                f"unknown rule selector {selector!r}: use ALL, a code prefix such as OB2, or a "
                "rule name (see `onboard check --show-rules`)"
            )


def select_rules(
    select: Sequence[str] | None = None, ignore: Sequence[str] = (), target: str | None = None
) -> tuple[type[Rule], ...]:
    """The rules enabled by the selectors (default: all), applicable to ``target``."""
    chosen = split_selectors(select) or (ALL,)
    dropped = split_selectors(ignore)
    _validate((*chosen, *dropped))
    enabled = []
    for rule in RULES:
        if target is not None and target not in rule.targets:
            continue
        best_select, best_ignore = _best(chosen, rule), _best(dropped, rule)
        if best_select is not None and (best_ignore is None or best_select > best_ignore):
            enabled.append(rule)
    return tuple(enabled)


def find_rule(selector: str) -> type[Rule]:
    """The one rule a code or name denotes."""
    for rule in RULES:
        if selector.upper() == rule.code or selector.lower() == rule.name:
            return rule
    raise BadInputError(f"no rule {selector!r} (see `onboard check --show-rules`)")


def explain(code: str) -> str:
    """The rule's documentation: a title line, its severity and targets, then its docstring."""
    rule = find_rule(code)
    fix = "Fix is available with --fix." if rule.fixable else "Fix is not available."
    return (
        f"# {rule.name} ({rule.code})\n\n"
        f"Severity: {rule.severity}. Targets: {', '.join(rule.targets)}. {fix}\n\n"
        f"{rule.explain()}\n"
    )
