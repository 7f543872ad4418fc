"""Which model parallelism a generated causal LM declares, and why.

A class AutoModel has no optimised plan for (``PARALLELIZE_FUNCTIONS`` is keyed by the library's
own classes) is tensor-sharded with the plan its HF classes carry: the causal LM's ``_tp_plan``
merged with ``config.base_model_tp_plan`` under the base model's attribute, as
``parallelizer.get_hf_tp_shard_plan`` reads them. The closest AutoModel class's capability flags
are copied only where that plan covers every parameter of the generated model, and only for the
axis this machine can prove: tensor parallelism, run on two CPU ranks by the generated
``test_tensor_parallel_matches_unsharded``. Context, pipeline and expert parallelism need GPUs
to prove; they stay off and the docstring says what the closest class declares.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from onboard.targets.base import Candidate, Library

AXES = ("tp", "cp", "pp", "ep")
# Styles whose module's output is sharded over the heads or the intermediate width: a
# parameter beside such a module (or on the module holding it) sees one rank's share
SHARDED_OUTPUT = frozenset({"colwise"})
# Styles AutoModel's translation drops (expert-parallel plans belong to its MoE parallelizer)
DROPPED = frozenset({"ep_router", "local_colwise", "local_rowwise", "gather"})
# The styles ``parallelizer.translate_to_torch_parallel_style`` knows; any other makes
# ``get_hf_tp_shard_plan`` raise, and AutoModel falls back to its Llama-named default plan
TRANSLATED = frozenset(
    {
        "colwise",
        "rowwise",
        "colwise_rep",
        "colwise_gather_output",
        "rowwise_rep",
        "sequence_parallel",
        "replicated_with_grad_allreduce",
    }
)
# A module path inside an attention (self_attn., attention., attn.)
ATTENTION = re.compile(r"(?:^|\.)\w*attn\w*\.|(?:^|\.)\w*attention\w*\.")
TP_WORLD = 2  # the ranks the generated test shards the tiny model over
# AutoModel's own plans, keyed by a class's module path and name or its bare name
OPTIMISED = "nemo_automodel/components/distributed/optimized_tp_plans.py"
# Where 0.7.0 sums the gradients of ``replicated_with_grad_allreduce`` parameters once before the
# optimizer step; older sources translate that style to nothing, leaving each rank its share
TP_REPLICAS = "nemo_automodel/components/distributed/tp_replicas.py"
REPLICATED = "replicated_with_grad_allreduce"


@dataclass(frozen=True)
class Parallelism:
    """The capability flags a generated class declares, from its closest class and HF's plan."""

    closest: str  # the closest AutoModel class's architecture ("" when there is none)
    # AutoModel's own plan for the generated class's path or name (re-onboarding a class the
    # library keys in PARALLELIZE_FUNCTIONS), which it selects before HF's; "" for HF's
    optimised: str
    declared: tuple[str, ...]  # the axes the closest class declares
    plan: tuple[tuple[str, str], ...]  # the TP plan AutoModel selects for the generated class
    uncovered: tuple[str, ...]  # parameters that plan leaves whole beside sharded neighbours
    refused: str = ""  # why TP is not declared although plan and closest class would allow it
    replica_sync: bool = True  # the library sums the replicated parameters' gradients (0.7.0)

    @property
    def world(self) -> int:
        """The ranks the generated tensor-parallel test runs."""
        return TP_WORLD

    @property
    def tp(self) -> bool:
        return "tp" in self.declared and not self.uncovered and not self.refused

    @property
    def not_copied(self) -> tuple[str, ...]:
        """Axes the closest class declares that the generated class does not."""
        return tuple(a for a in self.declared if a != "tp" or not self.tp)

    def tp_said(self, config: str) -> str:
        """Why the class declares tensor parallelism or not, for its docstring and ONBOARD.md."""
        source = (
            f"its own plan for {self.optimised} (PARALLELIZE_FUNCTIONS)"
            if self.optimised
            else f"HF's plan ({config}.base_model_tp_plan, the head column-wise)"
        )
        if self.tp:
            return (
                f"Tensor parallelism is copied from {self.closest}: AutoModel shards this class "
                f"with {source}, which places every parameter, and "
                f"test_tensor_parallel_matches_unsharded runs it on {self.world} CPU ranks."
            )
        if "tp" not in self.declared:
            closest = self.closest or "no closest class"
            return f"Tensor parallelism is not declared: {closest} declares none to copy."
        if self.refused:
            return f"Tensor parallelism is not copied from {self.closest}: {self.refused}."
        shown = ", ".join(self.uncovered[:4]) + (", ..." if len(self.uncovered) > 4 else "")
        dropped = (
            ""
            if self.replica_sync or REPLICATED not in dict(self.plan).values()
            else f"; this AutoModel source drops the plan's {REPLICATED} entries"
        )
        return (
            f"Tensor parallelism is not copied from {self.closest}: AutoModel would shard this "
            f"class with {source}, which leaves {len(self.uncovered)} parameter(s) whole beside "
            f"column-wise sharded projections ({shown}){dropped}."
        )

    def others_said(self) -> str:
        """The closest class's other axes, which proving needs GPUs for."""
        others = [a for a in self.not_copied if a != "tp"]
        if not others:
            return ""
        return (
            f"{self.closest} also declares {', '.join(others)}: not declared here until run on "
            f"GPUs, with an examples/ recipe using them (CI's test_model_capabilities requires "
            f"both)."
        )


def closest_axes(library: Library, closest: Candidate | None) -> tuple[str, ...]:
    """The ``supports_*`` flags the closest class's nested ``ModelCapabilities`` sets True,
    read from its source in the library (a checkout or the installed package)."""
    if closest is None:
        return ()
    module, _, class_name = closest.variant.class_name.rpartition(".")
    path = library.root / Path(*module.split(".")).with_suffix(".py")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return ()
    owner = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name), None
    )
    capabilities = next(
        (
            n
            for n in (owner.body if owner else ())
            if isinstance(n, ast.ClassDef) and n.name == "ModelCapabilities"
        ),
        None,
    )
    if capabilities is None:
        return ()
    set_true = {
        n.target.id.removeprefix("supports_")
        for n in capabilities.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and isinstance(n.value, ast.Constant)
        and n.value.value is True
    }
    return tuple(a for a in AXES if a in set_true)


def hf_tp_plan(config_class: type, base: str, head: str) -> dict[str, str]:
    """The plan ``get_hf_tp_shard_plan`` builds for a generated class: its head's
    ``colwise_rep``, HF's base-model plan under ``base``, the embeddings row-wise by default."""
    plan = {head: "colwise_rep"}
    base_plan: dict[str, str] = getattr(config_class, "base_model_tp_plan", None) or {}
    plan.update({f"{base}.{k}" if base else k: v for k, v in base_plan.items()})
    return {
        name: style
        for name, style in plan.items()
        if isinstance(style, str) and not style.startswith("ep_") and style not in DROPPED
    }


def optimised_plan(library: Library, qualified: str) -> tuple[str, dict[str, str]] | None:
    """AutoModel's own plan for the class ``qualified`` (module path and name), where
    ``PARALLELIZE_FUNCTIONS`` keys it by that path or its bare name: the key and the plan's
    styles by name. The keys are read from the source first; the plans only exist once called."""
    try:
        tree = ast.parse((library.root / OPTIMISED).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    keys = {
        key.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for key in node.keys
        if isinstance(key, ast.Constant) and isinstance(key.value, str)
    }
    key = next((k for k in (qualified, qualified.rpartition(".")[2]) if k in keys), None)
    if key is None:
        return None
    from nemo_automodel.components.distributed.optimized_tp_plans import PARALLELIZE_FUNCTIONS

    try:
        styles = PARALLELIZE_FUNCTIONS[key](None, sequence_parallel=False)
    except Exception:  # AutoModel falls back to HF's plan when its own cannot be built
        return None
    return key, {name: _style_name(style) for name, style in styles.items()}


def _style_name(style: Any) -> str:
    """A torch ParallelStyle by the name HF's plans give it (only the column-wise split of a
    projection's output matters to the coverage rule; the head's is gathered)."""
    from torch.distributed.tensor import Shard

    kind = type(style).__name__
    if kind == "ColwiseParallel":
        layouts = getattr(style, "output_layouts", None) or ()
        local = getattr(style, "use_local_output", True)
        return "colwise" if local and all(isinstance(p, Shard) for p in layouts) else "colwise_rep"
    if kind in {"RowwiseParallel", "VocabParallelEmbedding"}:
        return "rowwise"
    return {"ReplicatedWithGradAllReduce": "replicated_with_grad_allreduce"}.get(kind, kind)


def matches(pattern: str, module: str) -> bool:
    """Whether a plan key names ``module``, atom by atom (a ``*`` never spans a dot), as
    torch's ``parallelize_module`` resolves it."""
    atoms, parts = pattern.split("."), module.split(".")
    return len(atoms) == len(parts) and all(map(fnmatchcase, parts, atoms))


def uncovered(parameters: tuple[str, ...], plan: dict[str, str]) -> tuple[str, ...]:
    """Parameters the plan neither places nor may leave whole.

    A parameter the plan does not name stays replicated; that is right where its module sees
    the whole hidden state (the layers' and the final norm) and wrong beside a column-wise
    sharded module: a q/k norm after a sharded q_proj needs its gradients summed, a per-head
    sink or gate in a sharded attention holds every head where each rank has some.
    """
    owners = {module.rpartition(".")[0] for module in _split_modules(parameters, plan)}
    missed = []
    for name in parameters:
        module = name.rpartition(".")[0]
        if any(matches(key, module) for key in plan):
            continue
        if module in owners or module.rpartition(".")[0] in owners:
            missed.append(name)
    return tuple(missed)


def _split_modules(parameters: tuple[str, ...], plan: dict[str, str]) -> set[str]:
    """The modules the plan shards column-wise (inside the layers: the head's ``colwise_rep``
    gathers its output)."""
    modules = {name.rpartition(".")[0] for name in parameters}
    return {
        module
        for key, style in plan.items()
        if style in SHARDED_OUTPUT
        for module in modules
        if matches(key, module)
    }


def parallelism(
    library: Library,
    closest: Candidate | None,
    config_class: type,
    parameters: tuple[str, ...],
    *,
    base: str,
    head: str,
    tiny: dict[str, Any],
    fused: tuple[str, ...] = (),
    qualified: str = "",
    moe: bool = False,
) -> Parallelism:
    """What the generated class over ``parameters`` (HF's tiny model's names) declares.

    ``fused``: attributes holding q, k and v concatenated (not head by head): sharded
    column-wise they split the concatenation, not the heads, so they refuse TP."""
    own = optimised_plan(library, qualified) if qualified else None
    plan = own[1] if own else hf_tp_plan(config_class, base, head)
    heads = tiny.get("num_attention_heads") or 0
    kv_heads = tiny.get("num_key_value_heads") or heads
    refused = ""
    untranslated = () if own else sorted({s for s in plan.values() if s not in TRANSLATED})
    if moe:
        refused = (
            "its MoE layers are AutoModel's, which its MoE parallelizer shards (experts over "
            "ranks), not a tensor-parallel plan"
        )
    elif untranslated:
        refused = f"AutoModel cannot translate HF's plan styles {', '.join(untranslated)}"
    elif fused_names := [k for k in plan if k.rpartition(".")[2] in fused]:
        refused = f"HF's plan shards concatenated q/k/v column-wise ({', '.join(fused_names)})"
    elif not (split := _split_modules(parameters, plan)):
        refused = "HF's plan splits no layer's projections (only the head would be split)"
    elif not any(ATTENTION.search(module) for module in split):
        # not proved: Youtu's (latent attention whole, MLPs split) fails the two-rank test
        # inside DTensor's sharding propagation, its root cause not found
        refused = "HF's plan leaves the attention whole (it splits only the MLPs)"
    elif heads % TP_WORLD or kv_heads % TP_WORLD:
        refused = (
            f"the tiny config's {heads} attention and {kv_heads} key/value heads do not split "
            f"over {TP_WORLD} ranks, so the tensor-parallel test cannot run"
        )
    replica_sync = (library.root / TP_REPLICAS).is_file()
    placed = plan if replica_sync else {k: v for k, v in plan.items() if v != REPLICATED}
    return Parallelism(
        closest=closest.variant.key if closest else "",
        optimised=own[0] if own else "",
        declared=closest_axes(library, closest),
        plan=tuple(plan.items()),
        uncovered=uncovered(parameters, placed),
        refused=refused,
        replica_sync=replica_sync,
    )


def for_design(design: Any, probe: Any, tiny: dict[str, Any], library: Library) -> Parallelism:
    """``parallelism`` for a text design (``ModelDesign``) over HF's tiny model (``Probe``):
    the generated classes subclass or keep HF's modules, so HF's tensor names, as transformers
    loads them (the probe's own parameter names are the Llama layout's), are theirs."""
    import transformers

    return parallelism(
        library,
        design.closest,
        getattr(transformers, design.hf.config),
        tuple(_in_memory(name, design.layout.prefixes) for name, _ in probe.disk_tensors),
        base=design.layout.base,
        head=design.layout.head,
        tiny=tiny,
        fused=(design.fused_qkv_attr,) if design.fused_qkv == "concatenated" else (),
        qualified=f"{design.package}.model.{design.text_class}",
        moe=design.moe is not None,
    )


def _in_memory(name: str, prefixes: tuple[tuple[str, str], ...]) -> str:
    """A loaded tensor's name in memory, where transformers renames a checkpoint prefix
    (NemotronH's ``backbone.`` is ``model.``)."""
    for disk, memory in prefixes:
        if name.startswith(disk):
            return memory + name.removeprefix(disk)
    return name
