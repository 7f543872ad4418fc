"""Read and check a Qwen2.5-VL vision side: the windowed tower, its patch merger (the projector,
which HF keeps inside the tower), the placeholder merge and the multimodal RoPE positions.

Structure is read from the tiny HF modules: one bias-free Conv3d, a rotary module with buffers
only, a list of ``depth`` layers each with two RMS norms, a two-linear attention (fused ``qkv``
and the output) and a gated three-linear MLP, and the merger (an RMS norm, then linears and an
activation over rows grouped ``spatial_merge_size ** 2`` at a time). What structure cannot say
(window order, which layers attend fully, the 2-D RoPE, the M-RoPE positions and sections) the
spec says from the config, and the check proves it stage by stage on three images of different
grids, against what HF's modules received and returned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from onboard.analysis.vision.encoder import encoder_layers, rope_tower_evidence
from onboard.analysis.vision.glm import NotGlm, glm_keys, read_glm_parts
from onboard.analysis.vision.parts import VLMParts
from onboard.analysis.vision.projector import norm_eps, rms_offset
from onboard.analysis.vision.qwen_vl_run import Grid
from onboard.block_specs import AttentionSpec, MLPSpec, NormSpec
from onboard.spec import Evidence
from onboard.vision import MRopeSpec, QwenVLTowerSpec

_SIZE_KEYS = {
    "hidden_size": "hidden_size",
    "num_layers": "depth",
    "patch_size": "patch_size",
    "temporal_patch_size": "temporal_patch_size",
    "num_channels": "in_channels",
    "num_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "activation": "hidden_act",
    "spatial_merge_size": "spatial_merge_size",
    "window_size": "window_size",
    "fullatt_layers": "fullatt_block_indexes",
    "out_hidden_size": "out_hidden_size",
    "position_embeddings": "num_position_embeddings",
}


class NotQwenVL(Exception):
    pass


def check_grids(spec_merge: int, patch: int) -> list[Grid]:
    """Three images for the check and the parity run, in patches: a wide one over 2 x 3
    windows (the last column of windows cut short), a square one in one window, a tall one."""
    m = spec_merge
    return [(1, 3 * m, 5 * m), (1, 2 * m, 2 * m), (1, 3 * m, 2 * m)]


def qwen_vl_parts(model: Any) -> VLMParts:
    """Qwen2.5-VL's base model holds the tower (with the merger inside) and the language
    model: the projector is the tower's merger."""
    base = model.base_model_prefix
    merger = _merger_name(model.get_submodule(f"{base}.visual"))
    head = model.get_output_embeddings()
    head_name = next(n for n, m in model.named_modules() if m is head)
    return VLMParts(base, "visual", f"visual.{merger}", "language_model", head_name)


def _merger_name(tower: Any) -> str:
    import torch.nn as nn

    found = [
        n
        for n, m in tower.named_children()
        if any(isinstance(c, nn.Linear) for c in m.modules()) and not isinstance(m, nn.ModuleList)
    ]
    if len(found) != 1:
        raise NotQwenVL(f"{len(found)} children besides the layers hold linears")
    return found[0]


def _width_keys(config: Any) -> dict[str, str]:
    """field -> vision_config key: Qwen2-VL calls the tower's width embed_dim (its hidden_size
    is the merger's output) and sizes the MLP by mlp_ratio."""
    keys = dict(_SIZE_KEYS)
    if getattr(config, "embed_dim", None):
        keys.update(hidden_size="embed_dim", out_hidden_size="hidden_size")
        keys.pop("intermediate_size")
    return {f: k for f, k in keys.items() if getattr(config, k, None) is not None}


def read_qwen_vl_tower(tower: Any, config: Any) -> QwenVLTowerSpec:
    """The tower's spec; ``NotQwenVL`` says what does not fit."""
    import torch.nn as nn

    keys = _width_keys(config)
    width = getattr(config, keys["hidden_size"])
    convolutions = [(n, m) for n, m in tower.named_modules() if isinstance(m, nn.Conv3d)]
    if len(convolutions) != 1:
        raise NotQwenVL(f"{len(convolutions)} 3-D patch convolutions")
    patch_name, patch = convolutions[0]
    rope = [
        n
        for n, m in tower.named_children()
        if "inv_freq" in dict(m.named_buffers()) and not any(True for _ in m.parameters())
    ]
    if len(rope) != 1:
        raise NotQwenVL(f"{len(rope)} rotary modules")
    layers_name = encoder_layers(tower, config.depth, NotQwenVL)
    layer = tower.get_submodule(f"{layers_name}.0")
    rms = [n for n, m in layer.named_children() if rms_offset(m) == 0.0]
    layer_norms = [n for n, m in layer.named_children() if isinstance(m, nn.LayerNorm)]
    norms = rms or layer_norms
    if len(norms) != 2 or (rms and layer_norms):
        raise NotQwenVL(f"norms {rms + layer_norms} in an encoder layer, not two of one kind")
    holders = {
        n: {c: m for c, m in child.named_children() if isinstance(m, nn.Linear)}
        for n, child in layer.named_children()
    }
    fused = [  # two linears: a gated MLP as wide as 3 x width (GLM-4V's tiny one) is not it
        n
        for n, ls in holders.items()
        if len(ls) == 2 and any(m.out_features == 3 * width for m in ls.values())
    ]
    others = [n for n, ls in holders.items() if ls and n not in fused]
    if len(fused) != 1 or len(others) != 1 or len(holders[fused[0]]) != 2:
        raise NotQwenVL(f"children {sorted(holders)}: not one fused-qkv attention and one MLP")
    attention_name, mlp_name = fused[0], others[0]
    attention, mlp = layer.get_submodule(attention_name), layer.get_submodule(mlp_name)
    linears = holders[attention_name]
    (qkv,) = [n for n, m in linears.items() if m.out_features == 3 * width]
    (o_name,) = [n for n in linears if n != qkv]
    heads = config.num_heads
    head_dim = width // heads
    biased = linears[qkv].bias is not None
    norm_module = layer.get_submodule(norms[0])
    extra = _learned_positions(tower, width, layers_name)
    if deepstack := deepstack_name(tower, config):
        extra["deepstack"] = deepstack
    merger = _merger_name(tower)
    try:
        glm, glm_names = read_glm_parts(tower, config, layers_name, merger)
    except NotGlm as exc:
        raise NotQwenVL(str(exc)) from None
    mlp_spec = _mlp(mlp, config, width)
    if glm is not None:
        keys = glm_keys(config, keys, mlp_spec.intermediate_size)
    return QwenVLTowerSpec(
        hidden_size=width,
        num_layers=config.depth,
        patch_size=config.patch_size,
        temporal_patch_size=config.temporal_patch_size,
        num_channels=config.in_channels,
        head_dim=head_dim,
        rope_theta=float(config.rope_parameters["rope_theta"]),
        spatial_merge_size=config.spatial_merge_size,
        window_size=int(getattr(config, "window_size", 0) or 0),
        fullatt_layers=tuple(
            int(i)
            for i in (
                config.fullatt_block_indexes
                if getattr(config, "window_size", None)
                else range(config.depth)
            )
        ),
        out_hidden_size=getattr(config, keys["out_hidden_size"]),
        attention=AttentionSpec(
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=head_dim,
            q_bias=biased,
            k_bias=biased,
            v_bias=biased,
            o_bias=linears[o_name].bias is not None,
            qk_norm="none",
            scale=float(getattr(attention, "scaling", head_dim**-0.5)),
        ),
        mlp=mlp_spec,
        norm=NormSpec(
            kind="rms" if rms else "layer",
            eps=float(norm_eps(norm_module) or 0.0),
            weight_offset=0.0,
            placement="pre",
            names=(("attn_in", norms[0]), ("mlp_in", norms[1])),
            eps_key=keys.get("norm_eps"),  # Qwen-VL's: HF fixes it (1e-6), no config key
            bias=getattr(norm_module, "bias", None) is not None,
        ),
        names=tuple(
            sorted(
                {
                    "patch": patch_name,
                    "rope": rope[0],
                    "layers": layers_name,
                    "attention": attention_name,
                    "qkv": qkv,
                    "o_proj": o_name,
                    "mlp": mlp_name,
                    "merger": merger,
                    **extra,
                    **glm_names,
                }.items()
            )
        ),
        keys=tuple(keys.items()),
        patch_bias=patch.bias is not None,
        position_embeddings=tower.get_submodule(extra["positions"]).num_embeddings
        if "positions" in extra
        else 0,
        glm=glm,
    )


def _learned_positions(tower: Any, width: int, layers: str) -> dict[str, str]:
    """role positions -> the tower's one embedding table of its width outside the layers
    (Qwen3-VL's pos_embed, GLM-4V's embeddings.position_embedding), whose rows must make a
    square grid; none for Qwen2(.5)-VL."""
    import torch.nn as nn

    tables = [
        (n, m)
        for n, m in tower.named_modules()
        if isinstance(m, nn.Embedding)
        and m.embedding_dim == width
        and not n.startswith(f"{layers}.")
    ]
    if not tables:
        return {}
    if len(tables) > 1:
        raise NotQwenVL(f"{len(tables)} position tables")
    name, table = tables[0]
    side = math.isqrt(table.num_embeddings)
    if side * side != table.num_embeddings:
        raise NotQwenVL(f"a position table of {table.num_embeddings} rows, not a square grid")
    return {"positions": name}


def deepstack_name(tower: Any, config: Any) -> str | None:
    """The tower's list of one merger per ``deepstack_visual_indexes`` entry (Qwen3-VL)."""
    import torch.nn as nn

    layers = list(getattr(config, "deepstack_visual_indexes", None) or ())
    if not layers:
        return None
    found = [
        n
        for n, m in tower.named_children()
        if isinstance(m, nn.ModuleList)
        and len(m) == len(layers)
        and len(m) != config.depth
        and all(any(isinstance(c, nn.Linear) for c in item.modules()) for item in m)
    ]
    if len(found) != 1:
        raise NotQwenVL(f"{len(found)} lists of {len(layers)} DeepStack mergers")
    return found[0]


def _mlp(mlp: Any, config: Any, width: int) -> MLPSpec:
    """Gated (gate, up, down: Qwen2.5-VL) or plain (fc1, fc2: Qwen2-VL), biases as held."""
    import torch.nn as nn

    linears = {n: m for n, m in mlp.named_children() if isinstance(m, nn.Linear)}
    if len(linears) == 2:
        up = next(n for n, m in linears.items() if m.in_features == width)
        (down,) = [n for n in linears if n != up]
        return MLPSpec(
            kind="plain",
            activation=config.hidden_act,
            bias=linears[up].bias is not None,
            intermediate_size=linears[up].out_features,
            projections=(up, down),
        )
    gate, up, down = _gated(mlp, width)
    return MLPSpec(
        kind="gated",
        activation=config.hidden_act,
        bias=linears[up].bias is not None,
        intermediate_size=linears[up].out_features,
        projections=(gate, up, down),
    )


def _gated(mlp: Any, width: int) -> tuple[str, str, str]:
    """gate, up, down: down reads the intermediate width back to the tower's; the gate is
    the one named so."""
    import torch.nn as nn

    linears = {n: m for n, m in mlp.named_children() if isinstance(m, nn.Linear)}
    down = [n for n, m in linears.items() if m.in_features != width and m.out_features == width]
    gate = [n for n in linears if "gate" in n and n not in down]
    if len(down) != 1 or len(gate) != 1:
        raise NotQwenVL(f"a three-linear MLP {sorted(linears)} without one gate and one down")
    (up,) = [n for n in linears if n not in down + gate]
    return gate[0], up, down[0]


@dataclass(frozen=True)
class QwenVLTrace:
    pixel_values: Any  # [patches, C*T*P*P]
    grids: Any  # [images, 3]
    input_ids: Any  # [rows, seq]
    embedded: Any  # the patch convolution's output (merge-block order)
    layer_inputs: tuple[Any, ...]  # what each layer received (window order)
    layer_outputs: tuple[Any, ...]
    merger_in: Any
    features: Any  # the merger's rows, back in merge-block order (get_image_features)
    merged: Any  # the embeddings the language model received
    text_embeddings: Any
    positions: Any  # [3, rows, seq] the language model received
    cos_sin: tuple[Any, Any]  # the text rotary's output on those positions
    mm_token_type_ids: Any
    deepstack: tuple[Any, ...] = ()  # each DeepStack merger's rows (get_image_features)
    # after each text layer, what came next received: the next layer, or the final norm
    text_inputs: tuple[Any, ...] = ()
    text_outputs: tuple[Any, ...] = ()  # what each text layer returned


def prompt(hf_config: Any, per_row: list[list[int]], text: int = 4) -> Any:
    """Rows of text and image placeholders (``per_row[r]``: the token counts of row r's
    images), text before, between and after them; rows padded with text to one length."""
    import torch

    image = hf_config.image_token_id
    vocab = hf_config.text_config.vocab_size
    rows = []
    for r, counts in enumerate(per_row):
        row: list[int] = [(11 + 5 * r + i) % vocab for i in range(text)]
        for k, count in enumerate(counts):
            row += [image] * count + [(37 + 3 * r + k + i) % vocab for i in range(text)]
        rows.append(row)
    longest = max(len(r) for r in rows)
    rows = [r + [(53 + i) % vocab for i in range(longest - len(r))] for r in rows]
    return torch.tensor(rows)


def trace_qwen_vl(model: Any, parts: VLMParts, hf_config: Any) -> QwenVLTrace:
    import torch

    vision = hf_config.vision_config
    m = vision.spatial_merge_size
    grids = torch.tensor(check_grids(m, vision.patch_size))
    width = vision.in_channels * vision.temporal_patch_size * vision.patch_size**2
    patches = int(grids.prod(-1).sum())
    pixel_values = torch.randn(patches, width, generator=torch.Generator().manual_seed(7))
    tower = parts.module(model, "tower")
    spec_names = {"patch": None}
    conv = next(n for n, c in tower.named_modules() if isinstance(c, torch.nn.Conv3d))
    spec_names["patch"] = conv
    layers_name = encoder_layers(tower, vision.depth, NotQwenVL)
    captured: dict[str, Any] = {"in": [], "out": []}
    handles = [
        tower.get_submodule(conv.rpartition(".")[0] or conv).register_forward_hook(
            lambda _m, _a, out: captured.__setitem__("embedded", out)
        ),
        parts.module(model, "projector").register_forward_pre_hook(
            lambda _m, args: captured.__setitem__("merger_in", args[0])
        ),
        parts.module(model, "language_model").register_forward_pre_hook(
            lambda _m, _a, kwargs: captured.update(
                merged=kwargs.get("inputs_embeds"), positions=kwargs.get("position_ids")
            ),
            with_kwargs=True,
        ),
    ]

    def keep_layer(_module: Any, args: tuple[Any, ...], out: Any) -> None:
        captured["in"].append(args[0])
        captured["out"].append(out)

    handles += [
        layer.register_forward_hook(keep_layer) for layer in tower.get_submodule(layers_name)
    ]
    language_model = parts.module(model, "language_model")
    text_layers = encoder_layers(language_model, hf_config.text_config.num_hidden_layers, NotQwenVL)
    text: dict[str, list[Any]] = {"in": [], "out": []}

    def keep_text(_module: Any, args: tuple[Any, ...], out: Any) -> None:
        text["in"].append(args[0])
        text["out"].append(out[0] if isinstance(out, tuple) else out)

    handles += [
        layer.register_forward_hook(keep_text)
        for layer in language_model.get_submodule(text_layers)
    ]
    handles.append(
        language_model.norm.register_forward_pre_hook(
            lambda _m, args: captured.__setitem__("norm_in", args[0])
        )
    )
    counts = [int(g.prod()) // m**2 for g in grids]
    input_ids = prompt(hf_config, [[counts[0]], counts[1:]])
    types = (input_ids == hf_config.image_token_id).int()
    try:
        with torch.no_grad():
            features = model.get_image_features(pixel_values=pixel_values, image_grid_thw=grids)
            captured["in"], captured["out"] = [], []
            text["in"], text["out"] = [], []
            model(
                input_ids=input_ids,
                pixel_values=pixel_values,
                image_grid_thw=grids,
                mm_token_type_ids=types,
            )
            text_embeddings = language_model.get_input_embeddings()(input_ids)
            cos_sin = language_model.rotary_emb(captured["merged"], captured["positions"])
    finally:
        for handle in handles:
            handle.remove()
    return QwenVLTrace(
        pixel_values,
        grids,
        input_ids,
        captured["embedded"],
        tuple(captured["in"]),
        tuple(captured["out"]),
        captured["merger_in"],
        torch.cat(features.pooler_output),
        captured["merged"],
        text_embeddings,
        captured["positions"],
        cos_sin,
        types,
        tuple(torch.cat(f) for f in getattr(features, "deepstack_features", None) or ()),
        (*text["in"][1:], captured["norm_in"]),
        tuple(text["out"]),
    )


def qwen_vl_evidence(
    tower_module: Any, spec: QwenVLTowerSpec, config: Any, mrope: MRopeSpec
) -> tuple[tuple[str, tuple[Evidence, ...]], ...]:
    found = rope_tower_evidence(tower_module, spec.keys, spec.rope_theta, spec.names, config)
    found.append(
        (
            "vision.merge.mrope",
            (
                Evidence(
                    "config",
                    f"config.json:text_config.{mrope.key}",
                    f"{list(mrope.sections)} (tiny); proved on image positions by the check",
                ),
            ),
        )
    )
    return tuple(found)
