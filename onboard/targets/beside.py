"""Generated code goes beside the library's own, never over it.

``--treat-as-new`` into a checkout that has the model (or an architecture whose derived names
are taken) would write over files the library's maintainers wrote (AutoModel's ``qwen3/``
package, mobius' ``gemma3_text.py``). Such files are never conflicts to force through: the
model is generated under ``<module>_onboarded`` instead. What is taken is read from the library
as it is and from onboard's own record of what it wrote, never from an earlier run's choice, so
a re-run picks the same names.
"""

from __future__ import annotations

from onboard.plan import Plan
from onboard.render import recorded_files
from onboard.targets.base import Library

SUFFIX = "_onboarded"


def beside(module: str) -> str:
    """The ``--name`` a model whose names are taken is generated under."""
    return f"{module}{SUFFIX}"


def overwrites_library(plan: Plan, library: Library) -> bool:
    """Whether a file ``plan`` writes whole already exists in the checkout and onboard did
    not write it."""
    written = recorded_files(library.root, plan.model_type)
    return any(
        change.owned and (library.root / change.path).is_file() and change.path not in written
        for change in plan.changes
    )
