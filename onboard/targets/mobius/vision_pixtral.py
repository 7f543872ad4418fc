"""A Pixtral tower for mobius: what the generated tower needs from the spec, and what it cannot
follow.

mobius 0.1.0 has Pixtral components (``components/_pixtral_vision.py``), reached only through
``LLaVAModel``'s ``vision.model_type == "pixtral"`` branch. Their attention (q/k/v/o without bias,
2-D RoPE through ``RotaryEmbedding``, ``MultiHeadAttention`` over one image) computes what HF
does and is reused. The layer is generated: mobius' ``PixtralTransformerLayer`` fixes the MLP's
activation to silu, while HF's ``PixtralMLP`` reads ``vision_config.hidden_act`` (gelu in
transformers' default config). So are the RoPE angles (the vision config's ``rope_theta``, which
mobius reads from an attribute transformers 5 keeps in ``rope_parameters``) and the patch merge
(its size from the composite config, where mobius reads the vision config's).
"""

from __future__ import annotations

from dataclasses import dataclass

from onboard.vision import PixtralTowerSpec

# mobius' PixtralAttention and GatedMLP name their linears so
_ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP = ("gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class PixtralNames:
    """Where the generated tower keeps each part: HF's names, so checkpoint tensors map as they
    are."""

    patch: str  # patch_conv
    pre_norm: str  # ln_pre
    encoder: str  # transformer
    layers: str  # layers, under encoder
    norms: tuple[str, str]  # attention_norm, ffn_norm
    attention: str  # attention
    mlp: str  # feed_forward
    norm_eps: float  # the tower's RMS norms' (HF fixes it)


def pixtral_blockers(tower: PixtralTowerSpec) -> list[str]:
    names = dict(tower.names)
    a = tower.attention
    found = []
    if pixtral_names(tower) is None or names.get("o_proj") != "o_proj":
        found.append(
            f"a Pixtral tower laid out otherwise ({', '.join(f'{r}={n}' for r, n in tower.names)}; "
            "vision.tower.names): the generated tower keeps HF Pixtral's names"
        )
    if tower.mlp.projections != _MLP or tower.mlp.bias:
        found.append(
            f"a Pixtral MLP {tower.mlp.projections} with bias={tower.mlp.bias} (vision.tower.mlp): "
            "mobius' GatedMLP names gate_proj, up_proj, down_proj, without bias"
        )
    if any((a.q_bias, a.k_bias, a.v_bias, a.o_bias)) or a.scale != a.head_dim**-0.5:
        found.append(
            "a Pixtral attention with biases or its own scale (vision.tower.attention): mobius' "
            "PixtralAttention has neither"
        )
    if tower.patch_bias:
        found.append("a Pixtral patch convolution with a bias (vision.tower.patch_bias)")
    return found


def pixtral_names(tower: PixtralTowerSpec) -> PixtralNames | None:
    """The generated tower's names, when HF's nest as Pixtral's do (<encoder>.<layers>, the
    patch convolution and ln_pre on the tower); None otherwise."""
    names = dict(tower.names)
    encoder, _, layers = names["layers"].partition(".")
    if not layers or "." in layers or "." in names["patch"] or "." in names["pre_norm"]:
        return None
    norms = dict(tower.norm.names)
    return PixtralNames(
        patch=names["patch"],
        pre_norm=names["pre_norm"],
        encoder=encoder,
        layers=layers,
        norms=(norms["attn_in"], norms["mlp_in"]),
        attention=names["attention"],
        mlp=names["mlp"],
        norm_eps=tower.norm.eps,
    )
