"""What a generated mobius config sets, and the evidence each setting's comment cites."""

from __future__ import annotations

from dataclasses import dataclass

from onboard.spec import ArchitectureSpec, Evidence


@dataclass(frozen=True)
class Setting:
    """``field=expr`` in the generated config's ``from_transformers``, with its reason."""

    field: str
    expr: str
    why: str


@dataclass(frozen=True)
class ExtraField:
    """A dataclass field the generated config adds to its base config class."""

    name: str
    annotation: str
    default: str


def cite(spec: ArchitectureSpec, path: str, fallback: str = "") -> str:
    """Where a spec value came from, short: an HF source line, else a config key or probe."""
    evidence: tuple[Evidence, ...] = spec.evidence_for(path)
    source = [e for e in evidence if e.kind == "source"]
    if source:
        return source[0].where
    if evidence:
        first = evidence[0]
        return first.where if first.kind == "config" else f"probe of {first.where}"
    return fallback


def why(phrase: str, spec: ArchitectureSpec, path: str) -> str:
    where = cite(spec, path)
    return f"{phrase} ({where})" if where else phrase
