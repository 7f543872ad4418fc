"""RoPE settings a generated mobius config needs beyond mobius' own extraction.

Per layer kind: mobius reads one RoPE from a config (``rope_parameters`` per kind are normalised
to ``full_attention``), and its Gemma 3 text model gives sliding layers the default RoPE of
``rope_local_base_freq``. Where sliding layers rotate differently (another theta, rope type,
scaling or rotated share, as in ``rope_parameters`` keyed by layer kind), the generated config
reads each kind's entry and the generated text model builds the sliding layers' table (and their
attention's rotated width) from the sliding entry.

Dynamic NTK: transformers' dynamic NTK RoPE (``_compute_dynamic_ntk_parameters`` in
``modeling_rope_utils.py``) computes ``base * (factor * L / max_position_embeddings -
(factor - 1)) ** (d / (d - 2))`` with ``L = max(seq_len, max_position_embeddings)``: up to
``max_position_embeddings`` positions the base is unchanged, i.e. the default RoPE. mobius 0.1.0's
``DynamicNTKRope`` scales the base by ``factor ** (d / (d - 2))`` at every length (bug M8, see
``bugs.py``). mobius' RoPE tables hold ``max_position_embeddings`` rows, exactly the positions
where transformers' dynamic RoPE is the default one, so the generated config asks for the
default tables instead of inheriting M8.
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.spec import ArchitectureSpec, RopeSpec
from onboard.targets.mobius.settings import ExtraField, Setting, why

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


FULL, SLIDING = "full_attention", "sliding_attention"
_SLIDING = f'config.rope_parameters["{SLIDING}"]'
_FULL = f'config.rope_parameters["{FULL}"]'


@dataclass(frozen=True)
class SlidingRope:
    """How the sliding layers' RoPE differs from the full layers' (both rotate): the
    generated text model builds their tables from their own settings."""

    scaled: bool  # their own rope type and scaling (else the default RoPE of their theta)
    partial: bool  # their own share of each head rotates


def sliding_rope(spec: ArchitectureSpec) -> SlidingRope | None:
    """None when sliding and full layers rotate alike (or one of them does not rotate)."""
    ropes = dict(spec.text.rope)
    full, sliding = ropes.get(FULL), ropes.get(SLIDING)
    if full is None or sliding is None or None in (full.rope_type, sliding.rope_type):
        return None
    if _key(full) == _key(sliding):
        return None
    return SlidingRope(
        scaled=sliding.rope_type != "default" or bool(sliding.scaling),
        partial=sliding.partial_rotary_factor != full.partial_rotary_factor,
    )


def _key(rope: RopeSpec) -> tuple[object, ...]:
    return (rope.rope_type, rope.theta, rope.partial_rotary_factor, rope.scaling)


def rope_blockers(spec: ArchitectureSpec) -> list[str]:
    """RoPE the generated code cannot build, by name."""
    return (
        _per_kind_unrounded_yarn(spec) + sliding_rope_blockers(spec) + reordered_rope_blockers(spec)
    )


def unrounded_yarn(spec: ArchitectureSpec) -> bool:
    """transformers' YaRN keeps the correction range unrounded with ``truncate: False``
    (GPT-OSS); mobius 0.1.0's YarnRope always floors and ceils it (its config has no such
    setting), so the generated text model builds transformers' table."""
    return any(
        rope.rope_type == "yarn" and dict(rope.scaling).get("truncate") is False
        for _, rope in spec.text.rope
    )


def _per_kind_unrounded_yarn(spec: ArchitectureSpec) -> list[str]:
    """transformers reads ``truncate`` from the top of ``rope_parameters`` only, never from a
    kind's own entry: a kind's ``truncate`` is refused rather than guessed."""
    if not unrounded_yarn(spec) or sliding_rope(spec) is None:
        return []
    return [
        "YaRN RoPE with truncate=False in a layer kind's own rope_parameters "
        "(config.json:rope_parameters): transformers reads truncate from the top level only"
    ]


def sliding_rope_blockers(spec: ArchitectureSpec) -> list[str]:
    """What per-kind RoPE the generated text model cannot build (it builds one table for full
    and one for sliding layers; mobius' DynamicNTKRope is bug M8)."""
    if len({_key(r) for _, r in spec.text.rope if r.rope_type is not None}) < 2:
        return []
    kinds = {kind for kind, rope in spec.text.rope if rope.rope_type is not None}
    if not kinds <= {FULL, SLIDING}:
        return [
            f"layer kinds {', '.join(sorted(kinds))} rotate differently "
            "(config.json:rope_parameters): the generated text model has full and sliding tables"
        ]
    if DYNAMIC in {rope.rope_type for _, rope in spec.text.rope}:
        return [
            "dynamic NTK RoPE in layers whose kinds rotate differently "
            "(config.json:rope_parameters): the default tables stand in only for every layer"
        ]
    return []


def sliding_rope_settings(spec: ArchitectureSpec, extra: list[ExtraField]) -> list[Setting]:
    """The full layers' RoPE from their own entry of ``rope_parameters`` (mobius reads a
    per-kind partial_rotary_factor nowhere) and the sliding layers' in fields of their own."""
    differs = sliding_rope(spec)
    if differs is None:
        return _full_share(spec)
    full, sliding = f"text.rope.{FULL}", f"text.rope.{SLIDING}"
    settings = [
        Setting(
            "rope_theta", f'{_FULL}["rope_theta"]', why("RoPE theta of full layers", spec, full)
        ),
        Setting(
            "rope_local_base_freq",
            f'{_SLIDING}["rope_theta"]',
            why("RoPE theta of sliding layers", spec, sliding),
        ),
    ]
    if differs.scaled:
        extra += [
            ExtraField("rope_local_type", "str", '"default"'),
            ExtraField("rope_local_scaling", "dict | None", "None"),
        ]
        settings += [
            Setting(
                "rope_local_type",
                f'{_SLIDING}.get("rope_type", "default")',
                why("RoPE type of sliding layers", spec, sliding),
            ),
            Setting(
                "rope_local_scaling",
                f"dict({_SLIDING})",
                why("RoPE scaling of sliding layers", spec, sliding),
            ),
        ]
    if not differs.partial:
        return settings + _full_share(spec)
    extra.append(ExtraField("local_partial_rotary_factor", "float", "1.0"))
    shares = [
        Setting(
            "partial_rotary_factor",
            f'{_FULL}.get("partial_rotary_factor", 1.0)',
            why("share of each head full layers rotate", spec, full),
        ),
        Setting(
            "local_partial_rotary_factor",
            f'{_SLIDING}.get("partial_rotary_factor", 1.0)',
            why("share of each head sliding layers rotate", spec, sliding),
        ),
    ]
    return settings + shares


def _full_share(spec: ArchitectureSpec) -> list[Setting]:
    """The share of each head full layers rotate, from their own entry of ``rope_parameters``
    where the config keeps one per kind (Laguna: 0.5; mobius reads a per-kind
    partial_rotary_factor nowhere), else the base config's. A setting the base derives alike is
    dropped later (restated)."""
    full = dict(spec.text.rope).get(FULL)
    if full is None or full.rope_type is None:
        return []
    if spec.vision is not None:  # a VLM's decoder config is a sub-config: mobius maps it
        return []
    kinds = '(getattr(config, "rope_parameters", None) or {})'
    if full.partial_rotary_factor == 1.0:  # mobius takes a legacy rotary_dim HF may not read
        phrase = "the whole head rotates: HF reads rope_parameters, not rotary_dim"
        expr = f'{kinds}.get("partial_rotary_factor", 1.0)'
        return [Setting("partial_rotary_factor", expr, why(phrase, spec, f"text.rope.{FULL}"))]
    expr = (
        f'{_FULL}.get("partial_rotary_factor", 1.0) if "{FULL}" in {kinds} '
        "else base.partial_rotary_factor"
    )
    return [
        Setting(
            "partial_rotary_factor",
            expr,
            why("share of each head full layers rotate", spec, f"text.rope.{FULL}"),
        )
    ]


def reordered_rope_blockers(spec: ArchitectureSpec) -> list[str]:
    """mobius' rope classes build the standard order only: the generated text model builds one
    reordered table, for every layer that rotates."""
    found = spec.text.reordered_rope()
    if found is None:
        return []
    kind, rope = found
    others = sorted(k for k, r in spec.text.rope if r.rope_type is not None and r != rope)
    if not others:
        return []
    return [
        f"RoPE frequencies reordered in {kind} layers while {', '.join(others)} layers rotate "
        "otherwise (config.json:rope_parameters): the generated text model builds one table"
    ]


def reordered_rope_settings(spec: ArchitectureSpec, extra: list[ExtraField]) -> list[Setting]:
    """The reordered kind's theta and sections, from its own entry of ``rope_parameters`` (or
    the whole dict, where the config keeps one RoPE): mobius reads neither there."""
    found = spec.text.reordered_rope()
    if found is None:
        return []
    kind, rope = found
    assert rope.order is not None
    entry = f'config.rope_parameters.get("{kind}", config.rope_parameters)'
    extra.append(ExtraField("rope_sections", "list[int] | None", "None"))
    path = f"text.rope.{kind}"
    return [
        Setting(
            "rope_theta", f'{entry}["rope_theta"]', why(f"RoPE theta of {kind} layers", spec, path)
        ),
        Setting(
            "rope_sections",
            f'list({entry}["{rope.order.key}"])',
            why("sections of the reordered RoPE frequencies", spec, path),
        ),
    ]
