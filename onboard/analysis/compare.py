"""Two analysed models side by side: which catalogue features differ, and how they are related."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onboard.analysis import Analysis
from onboard.analysis.ancestry import chain, module_dir
from onboard.analysis.features import features
from onboard.spec import ArchitectureSpec, ConfigFlag


@dataclass(frozen=True)
class Comparison:
    left: str
    right: str
    rows: tuple[tuple[str, Any, Any], ...]  # feature, left value, right value
    left_chain: tuple[str, ...]
    right_chain: tuple[str, ...]
    # What each side's flags switch that its analysed config leaves as it is
    left_flags: tuple[ConfigFlag, ...] = ()
    right_flags: tuple[ConfigFlag, ...] = ()
    evidence: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    unresolved: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())

    @property
    def differences(self) -> tuple[tuple[str, Any, Any], ...]:
        return tuple(row for row in self.rows if row[1] != row[2])

    @property
    def capability_differences(self) -> tuple[tuple[str, str, str], ...]:
        """(feature, what the left's flags make of it, the right's) where one side has a flag
        switching the feature and the other has none, or flags that switch it differently."""
        left, right = _switchable(self.left_flags), _switchable(self.right_flags)
        return tuple(
            (name, left.get(name, "-"), right.get(name, "-"))
            for name in sorted({*left, *right})
            if left.get(name) != right.get(name)
        )

    @property
    def common_ancestor(self) -> str | None:
        return next((m for m in self.left_chain if m in self.right_chain), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "left": self.left,
            "right": self.right,
            "features": [
                {
                    "feature": f,
                    "left": a,
                    "right": b,
                    "differs": a != b,
                    "evidence": {"left": list(ea), "right": list(eb)},
                }
                for (f, a, b), (_, ea, eb) in zip(self.rows, self.evidence, strict=True)
            ],
            "flags": {
                "left": [_flag_dict(f) for f in self.left_flags],
                "right": [_flag_dict(f) for f in self.right_flags],
            },
            "capability_differences": [
                {"feature": f, "left": a, "right": b} for f, a, b in self.capability_differences
            ],
            "unresolved": {"left": list(self.unresolved[0]), "right": list(self.unresolved[1])},
            "ancestry": {"left": list(self.left_chain), "right": list(self.right_chain)},
            "common_ancestor": self.common_ancestor,
        }


def compare(left: Analysis, right: Analysis) -> Comparison:
    a, b = _by_name(left.spec), _by_name(right.spec)
    names = tuple(a)
    return Comparison(
        left=left.spec.model_type,
        right=right.spec.model_type,
        rows=tuple((name, a[name].value, b[name].value if name in b else None) for name in names),
        left_chain=_chain(left.spec.model_type),
        right_chain=_chain(right.spec.model_type),
        left_flags=left.spec.flags,
        right_flags=right.spec.flags,
        evidence=tuple((name, _cited(a.get(name)), _cited(b.get(name))) for name in names),
        unresolved=(_deltas(left.spec), _deltas(right.spec)),
    )


def _by_name(spec: ArchitectureSpec) -> dict[str, Any]:
    return {f.name: f for f in features(spec)}


def _cited(feature: Any) -> tuple[str, ...]:
    return tuple(e.cite() for e in feature.evidence) if feature is not None else ()


def _deltas(spec: ArchitectureSpec) -> tuple[str, ...]:
    return tuple(f"{d.what} ({d.where})" for d in spec.unresolved)


def _switchable(flags: tuple[ConfigFlag, ...]) -> dict[str, str]:
    """feature -> "<value> behind <flag>" for each feature a flag switches."""
    found: dict[str, str] = {}
    for flag in flags:
        for name, _, flipped in flag.switches:
            found[name] = f"{flipped} with {flag.key}={not flag.value}"
    return found


def _flag_dict(flag: ConfigFlag) -> dict[str, Any]:
    return {
        "key": flag.key,
        "value": flag.value,
        "switches": [{"feature": f, "as_is": a, "flipped": b} for f, a, b in flag.switches],
        "evidence": [e.cite() for e in flag.evidence],
        "not_understood": flag.not_understood,
        "pinned": flag.pinned,
    }


def _chain(model_type: str) -> tuple[str, ...]:
    try:
        return chain(module_dir(model_type))
    except Exception:  # a model type transformers does not know has no ancestry
        return (model_type,)
