"""RoPE settings a generated mobius config needs beyond mobius' own extraction.

transformers' dynamic NTK RoPE (``_compute_dynamic_ntk_parameters`` in
``modeling_rope_utils.py``) computes ``base * (factor * L / max_position_embeddings -
(factor - 1)) ** (d / (d - 2))`` with ``L = max(seq_len, max_position_embeddings)``: up to
``max_position_embeddings`` positions the base is unchanged, i.e. the default RoPE. mobius 0.1.0's
``DynamicNTKRope`` scales the base by ``factor ** (d / (d - 2))`` at every length (bug M8, see
``bugs.py``). mobius' RoPE tables hold ``max_position_embeddings`` rows, exactly the positions
where transformers' dynamic RoPE is the default one, so the generated config asks for the
default tables instead of inheriting M8.
"""

from __future__ import annotations

from onboard.spec import ArchitectureSpec
from onboard.targets.mobius.settings import Setting, why

DYNAMIC = "dynamic"
M8_NOTE = (
    "mobius bug M8 not inherited: DynamicNTKRope rescales RoPE at every length; the generated "
    "config builds the default tables, which transformers' dynamic RoPE uses up to "
    "max_position_embeddings (the rows mobius' tables hold)"
)


def dynamic_rope(spec: ArchitectureSpec) -> bool:
    return any(rope.rope_type == DYNAMIC for _, rope in spec.text.rope)


def rope_settings(spec: ArchitectureSpec) -> list[Setting]:
    """``rope_type="default"`` for a dynamic NTK RoPE (module docstring); nothing otherwise."""
    if not dynamic_rope(spec):
        return []
    phrase = (
        "dynamic NTK RoPE is the default RoPE up to max_position_embeddings, the rows of "
        "mobius' tables; mobius' DynamicNTKRope rescales at every length (bug M8)"
    )
    kind = next(kind for kind, rope in spec.text.rope if rope.rope_type == DYNAMIC)
    return [Setting("rope_type", '"default"', why(phrase, spec, f"text.rope.{kind}"))]
