"""--select / --ignore: prefixes, names, and ruff's "most specific selector wins"."""

from __future__ import annotations

import pytest

from onboard.errors import BadInputError
from onboard.lint import RULES, explain, select_rules


def codes(*args, **kwargs) -> list[str]:
    return [rule.code for rule in select_rules(*args, **kwargs)]


def test_default_is_every_rule_of_the_target() -> None:
    assert codes() == [rule.code for rule in RULES]
    assert "OB301" not in codes(target="mobius")
    assert "OB201" not in codes(target="automodel")
    assert "OB101" in codes(target="automodel")


def test_prefixes_and_names() -> None:
    assert codes(["OB2"]) == ["OB201", "OB202", "OB203", "OB204", "OB205", "OB206"]
    assert codes(["OB20"], ["OB203"]) == ["OB201", "OB202", "OB204", "OB205", "OB206"]
    assert codes(["duplicate-registry-key"]) == ["OB104"]
    assert codes(["ob104,OB501"]) == ["OB104", "OB501"]


def test_most_specific_selector_wins() -> None:
    # A more specific select re-enables a rule inside an ignored prefix...
    assert codes(["ALL", "OB203"], ["OB2"]) == [
        c for c in codes() if not c.startswith("OB2") or c == "OB203"
    ]
    # ...and a more specific ignore removes one from a selected prefix.
    assert codes(["OB2"], ["OB20"]) == []
    assert codes(["OB203"], ["OB2"]) == ["OB203"]
    # Equally specific: ignore wins.
    assert codes(["OB2"], ["OB2"]) == []


def test_unknown_selectors_are_usage_errors() -> None:
    with pytest.raises(BadInputError, match="unknown rule selector 'OB9'"):
        select_rules(["OB9"])
    with pytest.raises(BadInputError, match="unknown rule selector 'E501'"):
        select_rules(ignore=["E501"])


def test_explain_returns_the_docstring() -> None:
    text = explain("OB201")
    assert text.startswith("# ignored-inline-registration-option (OB201)\n\n")
    assert "Severity: error. Targets: mobius. Fix is available with --fix." in text
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in text
    assert explain("duplicate-registry-key") == explain("OB104")
    with pytest.raises(BadInputError, match="no rule 'OB999'"):
        explain("OB999")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_every_rule_is_documented_and_named_like_ruff(rule) -> None:
    doc = rule.explain()
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in doc, f"{rule.code} lacks {section}"
    assert rule.name == rule.name.lower() and " " not in rule.name
    assert rule.code.startswith("OB") and len(rule.code) == 5
    assert rule.severity in ("error", "warning")
    assert set(rule.targets) <= {"mobius", "automodel"}


def test_codes_and_names_are_unique() -> None:
    assert len({r.code for r in RULES}) == len({r.name for r in RULES}) == len(RULES)


def test_rules_page_is_generated_from_the_docstrings() -> None:
    from onboard.lint.report import rules_markdown

    page = rules_markdown()
    for rule in RULES:
        assert f"| {rule.code} | `{rule.name}` | {rule.severity} |" in page
        assert f"## {rule.code} `{rule.name}`\n\n### What it does" in page
