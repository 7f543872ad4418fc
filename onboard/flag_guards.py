"""What generated code refuses of the architecture's config flags: every value it was not proved on.

Parity proves generated code on a flag's analysed value, and on its other boolean value when the
code reads the flag (the flags-flipped tiny config). A config class may admit more than True and
False (Laguna's ``gating: bool | str`` also takes ``"per-head"`` and ``"per-element"``), so the
guard compares the value itself with what was proved, never its truthiness: ``"per-element"`` is
truthy, and a guard asking ``bool(config.gating)`` would let a per-element checkpoint through code
proved per head.
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.spec import ArchitectureSpec, FlagSpecs

__all__ = ["FlagGuard", "guarded_flags"]


@dataclass(frozen=True)
class FlagGuard:
    """A config key's values generated code was proved on; it refuses any other one."""

    key: str
    proved: tuple[bool, ...]  # (the analysed value,) or, for a flag the code reads, (False, True)
    reason: str  # why the other values are refused (a sentence for the error)

    @property
    def refuses(self) -> str:
        """The Python condition, over ``config``, that holds for a value never proved."""
        value = f'getattr(config, "{self.key}", {self.proved[0]})'
        if len(self.proved) > 1:
            return f"not isinstance({value}, bool)"
        return f"{value} is not {self.proved[0]}"

    @property
    def values(self) -> str:
        """What the code was generated for, as the error says it."""
        return " or ".join(f"{self.key}={value}" for value in self.proved)


def guarded_flags(spec: ArchitectureSpec, flagged_from: FlagSpecs | None) -> tuple[FlagGuard, ...]:
    """A guard for each flag the code does not read (its analysed value only), and for each it
    reads whose config class admits values besides True and False."""
    read = {key for key, _ in flagged_from.single} if flagged_from else set()
    guards = []
    for flag in spec.flags:
        if flag.key not in read:
            guards.append(FlagGuard(flag.key, (flag.value,), flag.guard_reason))
        elif flag.admits:
            admitted = ", ".join(flag.admits)
            reason = f"its config class also admits {admitted}, which onboard did not try"
            guards.append(FlagGuard(flag.key, (False, True), reason))
    return tuple(guards)
