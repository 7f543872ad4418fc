"""Two analysed models side by side: which catalogue features differ, and how they are related."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.analysis import Analysis
from onboard.analysis.ancestry import chain, module_dir
from onboard.analysis.features import feature_values


@dataclass(frozen=True)
class Comparison:
    left: str
    right: str
    rows: tuple[tuple[str, Any, Any], ...]  # feature, left value, right value
    left_chain: tuple[str, ...]
    right_chain: tuple[str, ...]

    @property
    def differences(self) -> tuple[tuple[str, Any, Any], ...]:
        return tuple(row for row in self.rows if row[1] != row[2])

    @property
    def common_ancestor(self) -> str | None:
        return next((m for m in self.left_chain if m in self.right_chain), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "left": self.left,
            "right": self.right,
            "features": [
                {"feature": f, "left": a, "right": b, "differs": a != b} for f, a, b in self.rows
            ],
            "ancestry": {"left": list(self.left_chain), "right": list(self.right_chain)},
            "common_ancestor": self.common_ancestor,
        }


def compare(left: Analysis, right: Analysis) -> Comparison:
    a, b = feature_values(left.spec), feature_values(right.spec)
    return Comparison(
        left=left.spec.model_type,
        right=right.spec.model_type,
        rows=tuple((name, a[name], b.get(name)) for name in a),
        left_chain=_chain(left.spec.model_type),
        right_chain=_chain(right.spec.model_type),
    )


def _chain(model_type: str) -> tuple[str, ...]:
    try:
        return chain(module_dir(model_type))
    except Exception:  # a model type transformers does not know has no ancestry
        return (model_type,)
