"""How an MoE block maps onto AutoModel's ``MoE``: the ``MoEConfig`` fields and the checkpoint
names and layouts the state-dict adapter converts.

An MoE model swaps HF's sparse block for AutoModel's own ``MoE`` (``Gate`` + ``GroupedExperts``,
built from an ``MoEConfig``), as every MoE model of AutoModel 0.7.0 does: that is the module its
expert parallelism, grouped-GEMM backends and MoE parallelizer work on. HF's decoder layer still
decides which layers are sparse. The adapter groups the checkpoint's per-expert tensors with
AutoModel's ``MoESplitExpertsStateDictMixin``, or transposes experts the checkpoint keeps fused.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from onboard.analysis.probe import Probe
from onboard.analysis.router import describe_router
from onboard.errors import UnsupportedFeatureError
from onboard.spec import ArchitectureSpec, MoESpec
from onboard.targets.automodel.hf_facts import (
    HFNames,
    Reason,
    cite,
    class_location,
    source_line,
)
from onboard.targets.automodel.router_training import RouterTraining, router_training


@dataclass(frozen=True)
class Rename:
    """One checkpoint name <-> native name rule, as the two regex substitutions that apply it."""

    hf_pattern: str  # matches the checkpoint's name (a regex, anchored at the end)
    native: str  # its replacement: the native name
    native_pattern: str
    hf: str


@dataclass(frozen=True)
class MoEDesign:
    """How the HF config and checkpoint map onto AutoModel's ``MoEConfig`` and ``MoE``."""

    count_key: str  # config key of the routed-expert count
    top_k_key: str
    width_key: str  # config key of each expert's width
    softmax_before_topk: bool  # softmax over all experts, then top-k (else top-k logits, softmax)
    norm_topk_prob: str  # the expression the renormalisation flag is read from
    renames: tuple[Rename, ...]  # checkpoint names of the expert / router tensors that differ
    hf_router: str = "gate"  # the router's attribute in HF's sparse block
    # HF's decoder layer holds its sparse block under another attribute than AutoModel's ``mlp``
    # (Granite MoE: block_sparse_moe): the generated layer moves it to ``mlp`` and names it back
    hf_block: str = "mlp"
    # Experts the checkpoint keeps fused, 3-D, one tensor per projection (Granite MoE:
    # input_linear [E, 2W, H], gate rows first; output_linear [E, H, W]): checkpoint name <->
    # AutoModel's grouped tensor, which holds the same rows transposed
    fused: tuple[Rename, ...] = ()
    # A shared expert beside the routed ones: config key of its width, and whether
    # sigmoid(shared_expert_gate(x)) scales it
    shared_width: str | None = None  # Python over ``config``
    shared_gated: bool = False
    # How the router scores and picks, as MoEConfig fields (Python over ``config``): sigmoid
    # scores with an expert-choice correction bias, group-limited, scaled (DeepSeek-V3, GLM-4.5)
    score_func: str = "softmax"
    correction_bias: bool = False
    n_groups: str = "0"
    topk_groups: str = "0"
    route_scale: str = "1.0"
    # The checkpoint keeps the choice bias as one row per expert group, [1, E] (ERNIE 4.5's
    # moe_statics); AutoModel's Gate holds it as [E]: the adapter reshapes it both ways
    correction_row: bool = False
    # HF's router holds the choice bias as a parameter it does not train (ERNIE 4.5), where
    # AutoModel's Gate holds a buffer: the generated tests compare the trained parameters' grads
    correction_parameter: bool = False
    # A config edit that makes the tiny model's first layer dense, for the generated tests.
    dense_override: tuple[tuple[str, Any], ...] = ()
    # Where HF's experts scale each expert's down-projection output by its routing weight
    # (MoEConfig.apply_router_weight_after_down); "" leaves AutoModel's default, which scales
    # the activation before the down projection: equal in exact arithmetic, not in fp32
    weighted_after_down: str = ""
    # HF's load-balancing loss (output_router_logits) and router jitter, where recognised
    training: RouterTraining = field(default_factory=RouterTraining)


# AutoModel's native names for one expert's projections (MoESplitExpertsStateDictMixin's keys).
NATIVE_LEAVES = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}


MOE_ATTRIBUTE = "mlp"  # where AutoModel's MoE parallelizer and FSDP mixin look for the block


SHARED_ATTRIBUTE = "shared_experts"  # AutoModel's MoE keeps its shared expert MLP here


CORRECTION_BIAS = "e_score_correction_bias"  # the router's choice bias, in HF and AutoModel


_LAYER_CORRECTION = re.compile(rf"\.layers\.\d+\.([\w.]+\.{CORRECTION_BIAS})$")


def sparse_block(modules: dict[str, str]) -> tuple[str, str] | None:
    """(path, class) of the first decoder layer's sub-module that holds ``experts``."""
    for name, cls in modules.items():
        parts = name.split(".")
        if len(parts) == 4 and parts[:2] == ["model", "layers"] and f"{name}.experts" in modules:
            return name, cls
    return None


def moe_design(spec: ArchitectureSpec, hf: HFNames, probe: Probe) -> MoEDesign:
    """The ``MoEConfig`` fields and checkpoint renames for the spec's MoE block.

    Raises UnsupportedFeatureError for an HF block whose tensors AutoModel's ``MoE`` cannot hold:
    another attribute than ``mlp``, expert biases, a transposed expert layout, extra parameters.
    """
    moe = spec.text.moe
    assert moe is not None
    block = sparse_block(dict(probe.modules))
    where = class_location(hf, hf.sparse_block)
    if block is None:
        raise UnsupportedFeatureError("no MoE block found in the probed model", (where,))
    path, _ = block
    problems = []
    hf_block = path.rsplit(".", 1)[-1]
    if hf_block != MOE_ATTRIBUTE and moe.dense_rule != "none":
        problems.append(
            f"the MoE block is {hf_block!r}, not 'mlp', beside dense layers ({moe.dense_rule}) "
            f"at {where}: AutoModel's MoE parallelizer and FSDP mixin look for block.mlp, and "
            "the generated layer moves only an all-sparse model's block there"
        )
    params = {
        name.removeprefix(f"{path}."): shape
        for name, shape in probe.parameters
        if name.startswith(f"{path}.")
    }
    # the router's weight: HF's name for it (HunYuan's gate.wg), else the usual ones
    names = (f"{moe.router_name}.weight", "gate.weight", "router.weight")
    router = next((n for n in names if n in params), None)
    gate_up, down = params.get("experts.gate_up_proj"), params.get("experts.down_proj")
    hidden = probe.param_shape("model.embed_tokens.weight")
    shared = moe.shared
    held = {router, "experts.gate_up_proj", "experts.down_proj"}
    if shared is not None:  # AutoModel's MoE holds a swiglu shared expert and its sigmoid gate
        held |= {f"{shared.name}.{leaf}.weight" for leaf in ("gate_proj", "up_proj", "down_proj")}
        held |= {"shared_expert_gate.weight"} if shared.gated else set()
    correction = {name for name in params if name.endswith(f".{CORRECTION_BIAS}")}
    if moe.router.correction_bias:  # a parameter in HF's router (ERNIE 4.5), AutoModel's buffer
        held |= correction
    extra = sorted(set(params) - held)
    if extra:
        problems.append(
            f"MoE block parameters AutoModel's MoE does not hold ({', '.join(extra)}) at {where}"
        )
    if router is None:
        problems.append(f"no router weight ({' or '.join(dict.fromkeys(names))}) at {where}")
    if gate_up is None or down is None or hidden is None:
        problems.append(f"experts without gate_up_proj and down_proj at {where}")
    elif not (
        len(gate_up) == len(down) == 3
        and gate_up[2] == down[1] == hidden[1]
        and gate_up[1] == 2 * down[2]
    ):
        problems.append(
            f"expert layout gate_up_proj {gate_up}, down_proj {down} is not [E, 2W, H] / "
            f"[E, H, W] at {where}"
        )
    if problems:
        raise UnsupportedFeatureError(
            f"AutoModel's MoE cannot hold {hf.sparse_block}'s tensors", tuple(problems)
        )
    router_spec = moe.router
    norm = (
        f"config.{router_spec.renormalize_key}"
        if router_spec.renormalize_key
        else repr(router_spec.renormalize)
    )
    before = router_spec.order == "softmax_topk"
    router_attribute = router.split(".")[0] if router else "gate"
    modules = dict(probe.modules)
    training = router_training(
        hf.module,
        hf.source_file,
        {
            "causal_lm": hf.causal_lm,
            "pretrained": hf.pretrained,
            "sparse_block": hf.sparse_block,
            "router": modules.get(f"{path}.{router_attribute}", ""),
        },
        (moe.count_key, moe.top_k_key),
        _config_aliases(spec.model_type),
    )
    return MoEDesign(
        count_key=moe.count_key,
        top_k_key=moe.top_k_key,
        width_key=moe.width_key,
        softmax_before_topk=before,
        # a softmax over the top k logits already sums to 1
        norm_topk_prob=norm if before else "False",
        renames=_renames(moe, {name for name, _ in spec.weights.tensors}),
        hf_router=router_attribute,
        hf_block=hf_block,
        fused=_fused(moe),
        dense_override=_DENSE_OVERRIDES.get(moe.dense_rule, ()),
        correction_row=_correction_row(spec),
        correction_parameter=bool(correction),
        shared_width=_over_config(shared.width_expr) if shared is not None else None,
        shared_gated=shared is not None and shared.gated,
        weighted_after_down=_weighted_after_down(hf, modules.get(f"{path}.experts")),
        training=training,
        **_router_fields(spec, router_spec),
    )


def _config_aliases(model_type: str) -> dict[str, str]:
    """The HF config class' ``attribute_map``: other names of its keys (num_experts)."""
    from transformers import CONFIG_MAPPING

    return dict(getattr(CONFIG_MAPPING[model_type], "attribute_map", None) or {})


def _weighted_after_down(hf: HFNames, experts: str | None) -> str:
    """``modeling_x.py:N`` where HF's experts multiply each expert's down-projection output by
    its routing weight (the third argument of their forward), "" where they weight elsewhere."""
    cls = getattr(importlib.import_module(hf.module), experts or "", None)
    if cls is None:
        return ""
    forward = inspect.unwrap(cls.forward)
    arguments = list(inspect.signature(forward).parameters)
    if len(arguments) < 4:  # self, hidden states, expert indices, routing weights
        return ""
    lines, start = inspect.getsourcelines(forward)
    down = False
    for offset, line in enumerate(lines):
        down = down or "down_proj" in line
        if re.search(rf"\*\s*{arguments[3]}\b", line):
            return f"{hf.source_file}:{start + offset}" if down else ""
    return ""


def _over_config(expression: str) -> str:
    """``moe_intermediate_size * n_shared_experts`` -> the same over ``config.``."""
    return re.sub(r"\b([A-Za-z_]\w*)\b", r"config.\1", expression)


def _correction_row(spec: ArchitectureSpec) -> bool:
    """Whether the checkpoint keeps the choice bias as ``[1, E]``; refuses more rows (one per
    expert group), which AutoModel's ``[E]`` bias cannot hold."""
    shapes = {shape for name, shape in spec.weights.tensors if name.endswith(f".{CORRECTION_BIAS}")}
    rows = {shape[0] for shape in shapes if len(shape) == 2}
    if rows - {1}:
        raise UnsupportedFeatureError(
            f"expert-choice correction bias of shape {sorted(shapes)} in the checkpoint: "
            "AutoModel's Gate holds one bias per expert",
            (f"checkpoint: {CORRECTION_BIAS}",),
        )
    return bool(rows)


def _router_fields(spec: ArchitectureSpec, router: Any) -> dict[str, Any]:
    """MoEConfig's routing fields for a sigmoid router, read from the config where HF reads,
    and for a softmax router whose choice a correction bias shifts (ERNIE 4.5)."""
    if router.scoring == "softmax" and router.correction_bias:
        # softmax over all experts, the bias added for the choice only, the weights gathered
        # from the unbiased softmax (then renormalised by norm_topk_prob): "softmax_with_bias"
        return {"score_func": "softmax_with_bias", "correction_bias": True}
    if router.scoring != "sigmoid":
        return {}
    from transformers import CONFIG_MAPPING

    defaults = CONFIG_MAPPING[spec.model_type]()

    def read(key: str, value: Any) -> str:
        return f"config.{key}" if hasattr(defaults, key) else repr(value)

    return {
        # with a choice bias, HF masks the unpicked groups with -inf: AutoModel's
        # "sigmoid_with_bias" does, its "sigmoid" multiplies them by 0 (which beats negative
        # shifted scores)
        "score_func": "sigmoid_with_bias" if router.correction_bias else "sigmoid",
        "correction_bias": router.correction_bias,
        "n_groups": read("n_group", router.n_group),
        "topk_groups": read("topk_group", router.topk_group),
        "route_scale": read(router.scale_key, router.routed_scaling_factor),
    }


def _renames(moe: MoESpec, checkpoint: set[str]) -> tuple[Rename, ...]:
    """Checkpoint <-> native rules for the expert and router tensors whose names differ
    (``checkpoint``: the tensor names a checkpoint of the architecture holds)."""
    rules = []
    for role, leaf in moe.expert_leaves:
        native = NATIVE_LEAVES[role]
        if (moe.block_name == MOE_ATTRIBUTE and leaf == native) or moe.fused_on_disk:
            continue
        rules.append(
            _rename(
                f".{moe.block_name}.experts.{{}}.{leaf}.weight",
                f".{MOE_ATTRIBUTE}.experts.{{}}.{native}.weight",
                r"(\d+)",
            )
        )
    shared = moe.shared
    if shared is not None and (moe.block_name, shared.name) != (MOE_ATTRIBUTE, SHARED_ATTRIBUTE):
        rules.append(
            _rename(
                f".{moe.block_name}.{shared.name}.{{}}.weight",
                f".{MOE_ATTRIBUTE}.{SHARED_ATTRIBUTE}.{{}}.weight",
                r"(\w+)",
            )
        )
    if moe.router_on_disk:  # Granite MoE: block_sparse_moe.router.layer.weight
        rules.append(_rename(f".{moe.router_on_disk}", f".{MOE_ATTRIBUTE}.gate.weight"))
    elif moe.block_name != MOE_ATTRIBUTE or moe.router_name != "gate":
        rules.append(
            _rename(f".{moe.block_name}.{moe.router_name}.weight", f".{MOE_ATTRIBUTE}.gate.weight")
        )
    # AutoModel's Gate holds the choice bias; a checkpoint may keep it elsewhere in the layer
    # (EXAONE-MoE: mlp.e_score_correction_bias, which transformers renames on load)
    native = f"{MOE_ATTRIBUTE}.gate.{CORRECTION_BIAS}"
    on_disk = {m.group(1) for key in checkpoint if (m := _LAYER_CORRECTION.search(key))}
    rules += [_rename(f".{name}", f".{native}") for name in sorted(on_disk) if name != native]
    return tuple(rules)


# AutoModel's grouped expert tensor for each fused role of the checkpoint
GROUPED = {"gate_up": "gate_and_up_projs", "down": "down_projs"}


def _fused(moe: MoESpec) -> tuple[Rename, ...]:
    """Checkpoint <-> native rules for experts kept fused on disk; refuses a role AutoModel's
    ``GroupedExperts`` has no tensor for."""
    unknown = [role for role, _ in moe.fused_on_disk if role not in GROUPED]
    if unknown:
        raise UnsupportedFeatureError(
            f"fused expert tensors of role {', '.join(unknown)} on disk: AutoModel's "
            "GroupedExperts holds gate_and_up_projs and down_projs only",
            tuple(name for role, name in moe.fused_on_disk if role in unknown),
        )
    return tuple(
        _rename(f".{name}", f".{MOE_ATTRIBUTE}.experts.{GROUPED[role]}")
        for role, name in moe.fused_on_disk
    )


def _rename(hf: str, native: str, group: str = "") -> Rename:
    """The rule between two name endings; ``{}`` marks the part ``group`` matches in both."""

    def pattern(name: str) -> str:
        return re.escape(name).replace(re.escape("{}"), group) + "$"

    return Rename(
        hf_pattern=pattern(hf),
        native=native.replace("{}", r"\1"),
        native_pattern=pattern(native),
        hf=hf.replace("{}", r"\1"),
    )


def moe_reasons(spec: ArchitectureSpec, hf: HFNames, moe: MoEDesign) -> dict[str, Reason]:
    spec_moe = spec.text.moe
    assert spec_moe is not None
    line = source_line(hf.module, f"{hf.sparse_block}(config")
    reasons = {
        "moe": Reason(
            f"config.{moe.count_key} routed experts of width config.{moe.width_key}, "
            f"config.{moe.top_k_key} per token: {describe_router(spec_moe.router, values=False)}",
            router_location(spec),
        ),
        "mlp": Reason(
            f"AutoModel's MoE in sparse layers, HF's {spec.text.mlp.kind} "
            f"{spec.text.mlp.activation} MLP in dense ones",
            cite(spec, "text.mlp_kinds"),
        ),
        "moe_layers": Reason(
            f"{hf.decoder_layer} builds {hf.sparse_block} for the sparse layers "
            f"({_DENSE_RULES[spec_moe.dense_rule]}); those get AutoModel's MoE",
            f"{hf.source_file}:{line}" if line else cite(spec, "text.mlp_kinds"),
        ),
    }
    if moe.training.aux_loss:
        reasons["aux_loss"] = Reason(
            f"with output_router_logits, HF's causal LM adds config.{moe.training.coef_key} x "
            "its load-balancing loss over the router logits of every sparse layer, padding "
            "excluded by the 2-D attention mask",
            moe.training.aux_loss,
        )
    if moe.training.jitter:
        reasons["jitter"] = Reason(
            "In training, HF's sparse block scales its input (the router's and the experts') by "
            "noise drawn uniformly from [1 - j, 1 + j], j = config.router_jitter_noise",
            moe.training.jitter,
        )
    if moe.weighted_after_down:
        reasons["weighted_after_down"] = Reason(
            "each expert's down-projection output is scaled by its routing weight, as HF's "
            "experts scale it",
            moe.weighted_after_down,
        )
    if spec_moe.shared is not None:
        reasons["shared_expert"] = Reason(
            f"one shared expert of width {moe.shared_width} beside the routed ones"
            + (", scaled by sigmoid(shared_expert_gate(x))" if moe.shared_gated else ""),
            cite(spec, "text.moe.shared") or router_location(spec),
        )
    if moe.correction_row:
        reasons["correction_row"] = Reason(
            "the checkpoint keeps each layer's expert-choice bias as one row [1, E]; "
            "AutoModel's Gate holds it as [E]",
            cite(spec, "text.moe.router") or router_location(spec),
        )
    if moe.fused:
        saved = " and ".join(name for _, name in spec_moe.fused_on_disk)
        reasons["moe_fused"] = Reason(
            f"the checkpoint keeps each layer's experts fused, {saved} (HF's gate_up_proj and "
            "down_proj, gate rows first), which AutoModel's grouped tensors hold transposed",
            cite(spec, "text.moe.experts") or f"checkpoint: model.layers.0.{saved.split()[0]}",
        )
    if moe.hf_block != MOE_ATTRIBUTE:
        reasons["moe_block"] = Reason(
            f"HF's decoder layer calls its sparse block self.{moe.hf_block}; AutoModel's MoE "
            "parallelizer and FSDP mixin look for block.mlp",
            class_location(hf, hf.decoder_layer),
        )
    if moe.renames and spec_moe.router_on_disk:
        reasons["moe_names"] = Reason(
            f"the checkpoint keeps the router as {spec_moe.router_on_disk}",
            f"checkpoint: model.layers.0.{spec_moe.router_on_disk}",
        )
    elif moe.renames:
        leaves = "/".join(leaf for _, leaf in spec_moe.expert_leaves)
        reasons["moe_names"] = Reason(
            f"the checkpoint keeps experts as {spec_moe.block_name}.experts.E.{{{leaves}}} and "
            f"the router as {spec_moe.block_name}.{spec_moe.router_name}",
            f"checkpoint: model.layers.0.{spec_moe.block_name}.experts.0."
            f"{spec_moe.leaf('gate')}.weight",
        )
    return reasons


_DENSE_OVERRIDES: dict[str, tuple[tuple[str, Any], ...]] = {
    "moe_layer_interval": (("moe_layer_start_index", 1),),
    "mlp_only_layers": (("mlp_only_layers", [0]),),
    "first_k_dense_replace": (("first_k_dense_replace", 1),),
    "num_dense_layers": (("num_dense_layers", 1),),
}


_DENSE_RULES = {
    "none": "every layer",
    "first_k_dense_replace": "layers from config.first_k_dense_replace on",
    "num_dense_layers": "layers from config.num_dense_layers on",
    "mlp_layer_types": 'layers config.mlp_layer_types lists as "sparse"',
    "moe_layer_interval": (
        "every config.moe_layer_interval-th layer from config.moe_layer_start_index to "
        "config.moe_layer_end_index"
    ),
    "mlp_only_layers": "every config.decoder_sparse_step-th layer not in config.mlp_only_layers",
    "expert_layer_period": (
        "layers i with i % config.expert_layer_period == config.expert_layer_offset"
    ),
}


def router_location(spec: ArchitectureSpec) -> str:
    """``modeling_x.py:N`` of the HF router's forward (the probe evidence names its class)."""
    modeling = next((n for n, _ in spec.source.hf_files if n.startswith("modeling_")), None)
    for item in spec.evidence_for("text.moe.router"):
        match = re.search(r"\((\w+)\)$", item.where)
        if match is None or modeling is None:
            continue
        package = modeling.removeprefix("modeling_").removesuffix(".py")
        try:
            module = importlib.import_module(
                f"transformers.models.{package}.{modeling.removesuffix('.py')}"
            )
            forward = inspect.unwrap(getattr(module, match.group(1)).forward)
            _, line = inspect.getsourcelines(forward)
        except (AttributeError, ImportError, OSError, TypeError):
            continue
        return f"{modeling}:{line}"
    return cite(spec, "text.moe.router") or "the MoE router"
