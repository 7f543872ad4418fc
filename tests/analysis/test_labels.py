"""The detector against hand-read labels (tests/analysis/labels.py), feature by feature.

Each labelled type is analysed once per process. A case whose label the HF source proves right
but the detector gets wrong is a strict xfail carrying the precise detector bug, so the suite
stays green, records the bug, and fails the day the bug is fixed without the label being updated.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from tests.analysis.labels import (
    BASELINE,
    LABELS,
    Unresolved,
    delta_texts,
    detected_features,
    expected_features,
    expected_unresolved,
    reported,
    source_for,
)

BY_TYPE = {entry["type"]: entry for entry in LABELS}


@cache
def _outcome(model_type: str) -> Any:
    """The ``Analysis`` of the type, or the exception the analysis raised (cached either way)."""
    from onboard.analysis import analyse

    try:
        return analyse(source_for(BY_TYPE[model_type]))
    except Exception as exc:  # re-raised by every test of the type
        return exc


def _spec(model_type: str) -> Any:
    outcome = _outcome(model_type)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome.spec


def _param(model_type: str, check: str, *values: Any) -> Any:
    bugs = BY_TYPE[model_type].get("bugs", {})
    reason = bugs.get(check) or bugs.get("*")
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(model_type, *values, marks=marks, id=f"{model_type}-{check}")


FEATURE_CASES = [
    _param(entry["type"], name, name, label)
    for entry in LABELS
    for name, label in expected_features(entry).items()
]
UNRESOLVED_CASES = [_param(entry["type"], "unresolved") for entry in LABELS]


def test_the_table_is_big_enough_and_mixed() -> None:
    types = [entry["type"] for entry in LABELS]
    assert len(types) == len(set(types)), "a type is labelled twice"
    assert len(types) >= 40
    moe = [e for e in LABELS if expected_features(e)["moe.router"] != "none"]
    assert len(moe) >= 10 and len(types) - len(moe) >= 20


def test_labels_cover_the_whole_catalogue() -> None:
    from onboard.analysis.features import CATALOGUE

    assert list(BASELINE) == [name for name, _, _ in CATALOGUE]


def test_bugs_name_real_checks() -> None:
    for entry in LABELS:
        for check in entry.get("bugs", {}):
            assert check in BASELINE or check in ("unresolved", "*"), (entry["type"], check)


@pytest.mark.parametrize(("model_type", "feature", "label"), FEATURE_CASES)
def test_feature_matches_the_label(model_type: str, feature: str, label: Any) -> None:
    spec = _spec(model_type)
    detected = detected_features(spec, BY_TYPE[model_type])[feature]
    if isinstance(label, Unresolved):
        assert detected == label, (
            f"HF does something the catalogue cannot express here; onboard should report a delta "
            f"containing {label.reason!r}, it emitted {detected!r}; deltas: {delta_texts(spec)}"
        )
    else:
        assert detected == label


@pytest.mark.parametrize("model_type", UNRESOLVED_CASES)
def test_unresolved_are_reported(model_type: str) -> None:
    """Deltas no catalogue feature covers are reported; a type expecting none gets a full spec.

    (Each feature labelled ``Unresolved`` is checked by its own feature case.)
    """
    spec = _spec(model_type)
    entry = BY_TYPE[model_type]
    if not expected_unresolved(entry):
        assert spec.unresolved == (), f"expected a complete spec; deltas: {delta_texts(spec)}"
        return
    missing = [reason for reason in entry.get("unresolved", ()) if not reported(spec, reason)]
    assert not missing, f"not reported: {missing}; deltas: {delta_texts(spec)}"
