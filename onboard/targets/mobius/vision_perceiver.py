"""A perceiver resampler in the generated projector (Idefics 2's ``perceiver_resampler``).

mobius has no resampler: the generated projector holds one of its own, built from mobius'
``Linear``, ``RMSNorm`` and ``GatedMLP`` under HF's names (so the checkpoint's tensors map as
they are), its sizes read from the composite config's perceiver sub-config as HF reads them
and its width the text's (HF resets a perceiver of another width to the text's). Its attention
is ONNX's ``Attention``: the latents' queries over the context's and the latents' keys and
values, grouped-query heads, no positions, no mask (every patch real). mobius' own registration
of idefics2 (``LLaVAModel``) builds none of it (``vision_bugs.perceiver_defects``).
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.vision import PerceiverSpec, ProjectorStep, VisionSpec

# mobius' GatedMLP names its projections so; the generated layer holds one under HF's mlp name
_GATED_MLP = ("gate_proj", "up_proj", "down_proj")
_ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class PerceiverNames:
    """Where the generated resampler keeps each part: HF's names, relative to the resampler
    (``attribute`` on the projector)."""

    attribute: str  # perceiver_resampler
    latents: str
    layers: str
    latents_norm: str
    context_norm: str
    attention: str
    post_norm: str
    mlp: str
    norm: str
    intermediate_factor: int  # the MLP's width over the hidden size (HF writes hidden * 4)
    latent_count: int  # the real model's, for the docstring
    depth: int


def perceiver_step(vision: VisionSpec) -> ProjectorStep | None:
    return next((s for s in vision.projector.steps if s.perceiver is not None), None)


def perceiver_names(vision: VisionSpec) -> PerceiverNames | None:
    step = perceiver_step(vision)
    if step is None or step.perceiver is None:
        return None
    p = step.perceiver
    return PerceiverNames(
        attribute=step.name,
        latents=p.name_of("latents"),
        layers=p.name_of("layers"),
        latents_norm=p.name_of("latents_norm"),
        context_norm=p.name_of("context_norm"),
        attention=p.name_of("attention"),
        post_norm=p.name_of("post_norm"),
        mlp=p.name_of("mlp"),
        norm=p.name_of("norm"),
        intermediate_factor=p.intermediate_factor,
        latent_count=p.latents,
        depth=p.depth,
    )


def perceiver_blockers(vision: VisionSpec, text_hidden: int) -> list[str]:
    """What the generated resampler cannot hold under HF's names, or at the text's width (HF
    resets a perceiver of another width to the text's, so the generated one reads that)."""
    step = perceiver_step(vision)
    if step is None or step.perceiver is None:
        return []
    p = step.perceiver
    found = []
    if p.hidden_size != text_hidden:
        found.append(
            f"a perceiver {p.hidden_size} wide under a text {text_hidden} wide "
            "(vision.projector.perceiver): the generated resampler is the text's width"
        )
    if "." in step.name:
        found.append(
            f"a perceiver resampler nested at {step.name} (vision.projector): the generated "
            "projector holds it as an attribute of its own"
        )
    mlp = tuple(p.name_of(r) for r in ("gate", "up", "down"))
    if mlp != _GATED_MLP:
        found.append(
            f"perceiver MLP projections {mlp} (vision.projector.perceiver.names): the "
            f"generated layer holds mobius' GatedMLP, whose are {_GATED_MLP}"
        )
    attention = tuple(p.name_of(r) for r in _ATTENTION)
    if attention != _ATTENTION:
        found.append(
            f"perceiver attention projections {attention} (vision.projector.perceiver.names): "
            f"the generated attention names them {_ATTENTION}"
        )
    if p.num_heads % p.num_kv_heads:
        found.append(
            f"{p.num_heads} perceiver query heads over {p.num_kv_heads} key/value heads: ONNX's "
            "Attention groups whole multiples"
        )
    return found


def perceiver_fields(vision: VisionSpec) -> tuple[tuple[str, str, str, str, str], ...]:
    """The resampler's config fields: (name, annotation, default, expression over ``top``,
    why), each read from the perceiver sub-config's key HF reads it from."""
    step = perceiver_step(vision)
    if step is None or step.perceiver is None:
        return ()
    p: PerceiverSpec = step.perceiver
    sub = f"top.{p.config}"
    rows = (
        ("perceiver_latents", "int", "latents", "the learned latents: image tokens per image"),
        ("perceiver_depth", "int", "depth", "the resampler's layers"),
        ("perceiver_heads", "int", "num_heads", "the resampler attention's query heads"),
        ("perceiver_kv_heads", "int", "num_kv_heads", "its key/value heads (grouped queries)"),
        ("perceiver_head_dim", "int", "head_dim", "the width of each of its heads"),
        ("perceiver_hidden_act", "str", "activation", "the activation of its layers' MLPs"),
        ("perceiver_norm_eps", "float", "eps", "the epsilon of its RMS norms"),
    )
    return tuple(
        (
            name,
            annotation,
            repr(getattr(p, field)) if annotation != "str" else f'"{getattr(p, field)}"',
            f"{sub}.{p.key_of(field)}",
            why,
        )
        for name, annotation, field, why in rows
    )


def perceiver_change(vision: VisionSpec) -> str:
    step = perceiver_step(vision)
    assert step is not None and step.perceiver is not None
    p = step.perceiver
    return (
        f"perceiver resampler ({step.name}): {p.latents} learned latents per image through "
        f"{p.depth} layers (RMS norms; the latents' queries over the image's features and the "
        f"latents as keys and values, {p.num_heads} heads sharing {p.num_kv_heads} key/value "
        f"heads of {p.head_dim}; a gated {p.activation} MLP {p.intermediate_factor} x wide), "
        "then an RMS norm, all read from the perceiver sub-config; the context mask is all "
        "ones (every patch real)"
    )
