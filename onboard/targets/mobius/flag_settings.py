"""The generated config's settings, made to read the architecture's boolean flags.

The design is built from the analysis with every flag flipped (``Analysis.variant``), so its
settings describe the flipped checkpoint. Each setting that differs from the analysed one is
tied to the flag that changes it (the spec with that flag alone flipped gives the same value)
and rewritten to read the flag; a setting already read from the config stays as it is (parity
on both tiny configs proves it). A setting no single flag explains cannot be written, and the
caller falls back to code for the analysed values with a guard.
"""

from __future__ import annotations

from collections.abc import Callable

from onboard.errors import UnsupportedFeatureError
from onboard.spec import ArchitectureSpec, FlagSpecs
from onboard.targets.mobius.settings import Setting

__all__ = ["settings_reading_flags"]

_LITERALS = ("True", "False")


def settings_reading_flags(
    flipped: tuple[Setting, ...],
    flags: FlagSpecs,
    settings_of: Callable[[ArchitectureSpec], tuple[Setting, ...]],
    values: dict[str, bool],
) -> tuple[Setting, ...]:
    """``flipped`` with each flag-dependent literal read from the config.

    ``settings_of`` gives a spec's settings; ``values`` each flag's value as analysed.
    """
    baseline = _exprs(settings_of(flags.baseline))
    single = {key: _exprs(settings_of(spec)) for key, spec in flags.single}
    return tuple(
        _reading(setting, baseline.get(setting.field), single, values) for setting in flipped
    )


def _exprs(settings: tuple[Setting, ...]) -> dict[str, str]:
    return {s.field: s.expr for s in settings}


def _reading(
    setting: Setting,
    analysed: str | None,
    single: dict[str, dict[str, str]],
    values: dict[str, bool],
) -> Setting:
    if setting.expr == analysed or (analysed is None and setting.expr not in _LITERALS):
        return setting
    if "config." in setting.expr and analysed not in _LITERALS:
        return setting  # read from the config either way: both parity runs prove it
    owners = [key for key, exprs in single.items() if exprs.get(setting.field) == setting.expr]
    if len(owners) != 1 or setting.expr not in _LITERALS or analysed not in (*_LITERALS, None):
        raise UnsupportedFeatureError(
            f"the generated {setting.field} differs with the flags "
            f"{', '.join(sorted(single))} in a way no one flag explains "
            f"({analysed} as analysed, {setting.expr} flipped)"
        )
    key = owners[0]
    # the flipped setting holds when config.<key> is the flipped value, not values[key]
    true_when_set = (setting.expr == "True") != values[key]
    expr = f"bool(config.{key})" if true_when_set else f"not config.{key}"
    return Setting(setting.field, expr, f"{setting.why}, switched by config.{key}")
