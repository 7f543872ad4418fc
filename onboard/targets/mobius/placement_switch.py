"""A decoder layer whose residual layout follows a config flag.

StableLM's ``use_parallel_residual``, GPT-NeoX's and Falcon's ``parallel_attn`` choose between
a sequential layer (``x + attn(n1(x))``, then ``+ mlp(n2(.))``) and a parallel one (attention
and MLP of the same input added at once). The generated layer builds the norms of both
layouts (those of one only when the flag selects it, as HF does) and takes one branch of its
forward by the flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.errors import UnsupportedFeatureError
from onboard.spec import ArchitectureSpec, FlagSpecs

__all__ = ["PlacementSwitch", "placement_switch"]

# Roles whose norms run before the residual layouts part ways: both layouts must agree on them.
_SHARED_ROLES = ("attn_in", "attn_out")


@dataclass(frozen=True)
class PlacementSwitch:
    key: str  # the config flag
    when_set: str  # the placement (pre, parallel, ...) with config.<key> true
    when_set_norms: tuple[tuple[str, str], ...]  # role -> attribute
    when_unset: str
    when_unset_norms: tuple[tuple[str, str], ...]

    @property
    def norms(self) -> tuple[tuple[str, str], ...]:
        """Every norm of both layouts, (role, attribute), an attribute once per layout."""
        return self.when_unset_norms + self.when_set_norms

    def built_when(self, attribute: str) -> bool | None:
        """None: the norm is in both layouts; else the flag value whose layout has it."""
        in_set = attribute in dict(self.when_set_norms).values()
        in_unset = attribute in dict(self.when_unset_norms).values()
        return None if in_set and in_unset else in_set


def placement_switch(spec: ArchitectureSpec, flags: FlagSpecs) -> PlacementSwitch | None:
    """The switch when one flag changes the layers' residual layout; None when none does."""
    before, after = flags.baseline.text.norm, spec.text.norm
    if before.placement == after.placement:
        return None
    owners = [k for k, s in flags.single if s.text.norm.placement == after.placement]
    if len(owners) != 1:
        raise UnsupportedFeatureError(
            f"the layers' residual layout changes ({before.placement} to {after.placement}) "
            "with no single flag to follow"
        )
    for role in _SHARED_ROLES:
        if dict(before.names).get(role) != dict(after.names).get(role):
            raise UnsupportedFeatureError(
                f"the {role} norm differs between the {before.placement} and {after.placement} "
                "layouts: one generated layer cannot follow the flag"
            )
    key = owners[0]
    value = next(f.value for f in spec.flags if f.key == key)
    set_, unset = (before, after) if value else (after, before)
    return PlacementSwitch(key, set_.placement, set_.names, unset.placement, unset.names)
