"""Turn a ``ModelDesign`` into the files of a mobius pull request.

With ``--repo`` the plan edits the checkout: the new model module and test case, plus libcst
upserts of ``models/__init__.py``, ``_registry.py``, the config classes in ``_configs/``
(``config_home``) and ``tests/_test_configs.py``. Without it
the plan writes a folder laid out like the repo, with the registry edits as ``onboard.patch``
(against the installed mobius) and an ``ONBOARD.md`` with the steps that need a checkout.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from onboard import STAMP
from onboard.block_specs import AttentionSpec, MLPSpec
from onboard.codegen import CodeStyle, format_python, render_template
from onboard.codemods import (
    CodemodError,
    add_from_import,
    add_to_all,
    dict_neighbours,
    drop_orphaned_imports,
    upsert_dict_entry,
    upsert_tuple_in_list,
)
from onboard.errors import TargetRepoError
from onboard.plan import FileChange, Plan
from onboard.provenance import header_for
from onboard.spec import ArchitectureSpec, RopeSpec
from onboard.targets.base import Library, Proposal
from onboard.targets.mobius.config_home import (
    CONFIGS_BASE,
    CONFIGS_INIT,
    config_classes,
    with_config_classes,
)
from onboard.targets.mobius.design import ModelDesign
from onboard.tiny import TINY_SLIDING_WINDOW, linear_attention_sizes, tiny_sections

MODELS_INIT = "models/__init__.py"
REGISTRY = "_registry.py"
TEST_CONFIGS = "tests/_test_configs.py"
TINY_LAYERS = 2  # the layer count of mobius' tiny test config (_base_config)
# mobius' pyproject.toml: line-length 95 (E501 ignored: a long path in a comment stays), google
# docstrings; its own package is first party
STYLE = CodeStyle(line_length=95, first_party=("mobius",), docstrings="google", ignore=("E501",))
CASES_DIR = "testdata/cases/causal-lm"
VL_CASES_DIR = "testdata/cases/vision-language"
# mobius' tiny vision config for the vision-language build tests (tests/_test_configs.py)
TINY_VISION = "_TINY_VISION"
# Tiny values of the fields a base class's own __init__ reads (ClassProfile.init_needs): the
# test entry builds the config class directly, without from_transformers' fallbacks.
TINY_INIT_NEEDS = {"rope_local_base_freq": 10_000.0}


def model_module(design: ModelDesign, spec: ArchitectureSpec, command: str) -> str:
    text = design.text
    graph_code = bool(
        design.final_softcap
        or design.logits_scale
        or (text and (text.custom_layer or text.overrides_forward))
    )
    source = render_template(
        "mobius/model.py.j2",
        style=STYLE,
        d=design,
        header=header_for(spec, command),
        graph_code=graph_code,
    )
    return format_python(source, filename=f"{design.module}.py", style=STYLE)


def plan_files(
    design: ModelDesign,
    spec: ArchitectureSpec,
    proposal: Proposal,
    library: Library,
    *,
    out: Path | None,
    command: str,
) -> Plan:
    module_path = f"src/mobius/models/{design.module}.py"
    case_path = f"{VL_CASES_DIR if design.vision else CASES_DIR}/{design.module}.yaml"
    owned = [
        FileChange(module_path, model_module(design, spec, command), True, "model"),
        FileChange(
            case_path,
            render_template("mobius/case.yaml.j2", spec=spec, d=design),
            True,
            "L4/L5 case",
        ),
    ]
    shared = _shared_edits(design, spec, library)
    goldens = (
        f"`python scripts/generate_golden.py --level L4 --filter '{design.module}*'` (then "
        f"`--level L5`) with the real weights, for the case in `{case_path}`"
    )
    notes = [f"registered as {design.model_type!r} -> {design.model_class}"]
    if out is None:
        changes = owned + [
            FileChange(path, text, False, why) for path, (text, why) in shared.items()
        ]
        if (library.root / TEST_CONFIGS).is_file():
            registry = shared[f"src/mobius/{REGISTRY}"][0]
            changes.append(_test_config_change(design, spec, library, registry))
        else:
            notes.append(f"{TEST_CONFIGS} not found in the checkout; add the test config by hand")
        notes.append(f"left for you: goldens, {goldens}")
        return Plan(
            "mobius",
            design.model_type,
            tuple(changes),
            tuple(notes),
            module_path,
            design.model_class,
        )
    patch = _patch(library, shared)
    entry = test_config_entry(design, spec)
    readme = render_template(
        "mobius/ONBOARD.md.j2",
        spec=spec,
        d=design,
        proposal=proposal,
        entry=dedented(entry),
        config_list=test_config_list(design),
        entry_config=entry_config_class(design),
        patch_files=sorted(shared),
        stamp=STAMP,
        command=command,
        goldens=goldens,
    )
    changes = [
        *owned,
        FileChange("onboard.patch", patch, True, "registry edits"),
        FileChange("ONBOARD.md", readme, True, "summary and manual steps"),
    ]
    return Plan(
        "mobius", design.model_type, tuple(changes), tuple(notes), module_path, design.model_class
    )


def _read(library: Library, relative: str) -> str:
    path = library.package_dir / relative
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TargetRepoError(f"cannot read {path}: {exc.strerror}") from None


def _shared_edits(
    design: ModelDesign, spec: ArchitectureSpec, library: Library
) -> dict[str, tuple[str, str]]:
    """Repo-relative path -> (new text, why) for the registry files, via libcst codemods."""
    cls = design.model_class
    edits: dict[str, tuple[str, str]] = {}
    try:
        init = _read(library, MODELS_INIT)
        init = add_to_all(add_from_import(init, f"mobius.models.{design.module}", cls), cls)
        edits[f"src/mobius/{MODELS_INIT}"] = (init, "export the model class")
        base, configs = with_config_classes(
            _read(library, CONFIGS_BASE),
            _read(library, CONFIGS_INIT),
            config_classes(design, STYLE),
        )
        edits[f"src/mobius/{CONFIGS_BASE}"] = (base, "config class")
        edits[f"src/mobius/{CONFIGS_INIT}"] = (configs, "export the config class")
        original = registry = _read(library, REGISTRY)
        registry = add_from_import(registry, "mobius.models", cls)
        # a VLM whose decoder takes input_ids names its own task class (default_task)
        task = f', task="{design.task}"' if design.vision and not design.vision.own_task else ""
        # in the closest model's section, in the table's order (codemods._placement)
        registry = upsert_dict_entry(
            registry,
            "_REGISTRATIONS",
            design.model_type,
            f"ModelRegistration({cls}{task})",
            (design.base_key,),
        )
        if spec.source.hub_id:
            registry = upsert_dict_entry(
                registry,
                "_TEST_MODEL_IDS",
                design.model_type,
                _literal(spec.source.hub_id),
                neighbour_keys(design, registry),
            )
        # --treat-as-new re-points an entry: the class it named may be imported for nothing now
        registry = drop_orphaned_imports(original, registry, "mobius.models")
        edits[f"src/mobius/{REGISTRY}"] = (registry, "registry entry")
    except CodemodError as exc:
        raise TargetRepoError(f"cannot edit mobius' registry files: {exc.message}") from None
    return edits


def neighbour_keys(design: ModelDesign, registry: str) -> tuple[str, ...]:
    """The model types to place the model's entries beside in mobius' other tables: its
    closest model's, then those of its section of ``_REGISTRATIONS`` (``registry``), nearest
    first (a table may lack the closest one)."""
    return (design.base_key, *dict_neighbours(registry, "_REGISTRATIONS", design.model_type))


def test_config_list(design: ModelDesign) -> str:
    """The list of tests/_test_configs.py the model's entry belongs in."""
    return "VL_CONFIGS" if design.vision else "CAUSAL_LM_CONFIGS"


def test_config_entry(design: ModelDesign, spec: ArchitectureSpec) -> str:
    """The ``(model_type, overrides, is_representative)`` tuple for tests/_test_configs.py."""
    if design.vision and spec.vision and design.vision.linear_patch:
        # No tower: the encoder reads the patch sizes, which the text config leaves at mobius'
        # defaults
        tower = spec.vision.tower
        body = (
            f'"_config_cls": {design.vision.config_class}, "patch_size": {tower.patch_size}, '
            f'"num_channels": {tower.num_channels}, '
            f'"image_token_id": {spec.vision.merge.image_token_id}'
        )
        return _formatted_element(f'("{design.model_type}", {{{body}}}, True)')
    if design.vision and spec.vision:
        # The generated config reads the tower's activation from the vision config, which
        # mobius' tiny one leaves unset (its own classes fix theirs)
        vision = (
            f'dataclasses.replace({TINY_VISION}, hidden_act="{spec.vision.tower.mlp.activation}")'
        )
        body = (
            f'"_config_cls": {design.vision.config_class}, "vision": {vision}, '
            f'"image_token_id": {spec.vision.merge.image_token_id}'
        )
        return _formatted_element(f'("{design.model_type}", {{{body}}}, True)')
    overrides = _attention_overrides(spec.text.attention) | _mlp_overrides(spec.text.mlp)
    kinds = spec.text.distinct_layer_types
    if spec.text.sliding_window and "sliding_attention" in kinds:
        overrides["layer_types"] = list(kinds) if len(kinds) > 1 else ["sliding_attention"] * 2
        overrides["sliding_window"] = TINY_SLIDING_WINDOW
    mixers = design.text.mixers if design.text else ()
    if mixers:  # a hybrid: one layer of each kind, in mobius' words
        feed_forward = design.text.feed_forward_words
        attention = ["full_attention"] if spec.text.attention is not None else []
        words = dict.fromkeys([*attention, *(m.label for m in mixers), *feed_forward])
        overrides["layer_types"] = list(words)
        overrides["num_hidden_layers"] = len(words)
    deltanet = spec.text.mixers.gated_deltanet
    if deltanet is not None:  # mobius' config leaves the linear_* sizes unset
        overrides |= linear_attention_sizes(shared=deltanet.value_heads != deltanet.key_heads)
    moe = spec.text.moe
    if moe is not None:  # a few small experts, as mobius' own MoE entries have
        overrides |= {"num_local_experts": 4, "num_experts_per_tok": 2}
        overrides["moe_intermediate_size"] = 64
        if moe.shared is not None:
            overrides["shared_expert_intermediate_size"] = 64
        if moe.router.n_group > 1:
            overrides |= {"n_group": 2, "topk_group": 1}
        if moe.dense_rule == "mlp_layer_types":  # one word per layer, read by index
            layers = overrides.get("num_hidden_layers", TINY_LAYERS)
            overrides["mlp_layer_types"] = ["dense"] + ["sparse"] * (layers - 1)
    indexer = spec.text.attention.indexer if spec.text.attention is not None else None
    if indexer is not None:  # a few small heads, fewer kept keys than a test prompt has
        overrides |= {"index_n_heads": 4, "index_head_dim": 128, "index_topk": 4}
        if indexer.layers_key:  # every layer of the tiny test model runs its own
            overrides["num_hidden_layers"] = 2
            overrides[indexer.layers_key] = [indexer.own] * 2
    for name, _ in design.base.init_needs:
        overrides.setdefault(name, TINY_INIT_NEEDS[name])
    if spec.text.attention is not None and spec.text.attention.scale_key:
        overrides["query_pre_attn_scalar"] = 16
    rope = dict(spec.text.rope)
    if "sliding_attention" in rope and "full_attention" in rope:
        overrides["rope_local_base_freq"] = rope["sliding_attention"].theta
        overrides |= _sliding_rope_overrides(design, rope)
    reordered = spec.text.reordered_rope()
    if reordered is not None and reordered[1].order is not None:
        overrides["rope_sections"] = tiny_sections(
            dict(reordered[1].scaling)[reordered[1].order.key]
        )
    if needs_own_config_class(design):
        overrides = {"_config_cls": design.config_class, **overrides}
    body = ", ".join(
        f'"{k}": {v}' if k == "_config_cls" else f'"{k}": {_literal(v)}'
        for k, v in overrides.items()
    )
    return _formatted_element(f'("{design.model_type}", {{{body}}}, True)')


def _attention_overrides(attention: AttentionSpec | None) -> dict[str, object]:
    """The attention flags a tiny test config sets where mobius' defaults differ."""
    if attention is None:
        return {}
    flags = {
        "attn_qk_norm": attention.qk_norm != "none",
        "attn_qk_norm_full": attention.qk_norm == "full_width",
        "attn_qkv_bias": attention.q_bias,
        "attn_o_bias": attention.o_bias,
    }
    return {name: True for name, on in flags.items() if on}


def _mlp_overrides(mlp: MLPSpec | None) -> dict[str, object]:
    if mlp is None:
        return {}
    overrides: dict[str, object] = {"mlp_bias": True} if mlp.bias else {}
    if mlp.activation != "silu":
        overrides["hidden_act"] = mlp.activation
    return overrides


def _sliding_rope_overrides(design: ModelDesign, rope: dict[str, RopeSpec]) -> dict[str, object]:
    """The sliding layers' own RoPE fields (rope.py), so the library's tests build their
    table and rotated width as the real config does."""
    local = design.text.sliding_rope if design.text else None
    if local is None:
        return {}
    full, sliding = rope["full_attention"], rope["sliding_attention"]
    overrides: dict[str, object] = {}
    if local.scaled:
        overrides["rope_local_type"] = sliding.rope_type
        overrides["rope_local_scaling"] = {
            "rope_type": sliding.rope_type,
            "rope_theta": sliding.theta,
            **dict(sliding.scaling),
        }
    if local.partial:
        overrides["partial_rotary_factor"] = full.partial_rotary_factor
        overrides["local_partial_rotary_factor"] = sliding.partial_rotary_factor
    return overrides


def _literal(value: object) -> str:
    """A Python literal with double-quoted strings, as the upstream file writes them."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _formatted_element(element: str) -> str:
    """``element`` as ruff formats it as an item of a module-level, one-per-line list.

    Continuation lines keep the list's 4-space item indent, so the codemod can insert the text
    as is; ``dedented`` gives the stand-alone form.
    """
    formatted = format_python(f"_ = [\n    {element},\n]\n", style=STYLE)
    lines = formatted.splitlines()[1:-1]
    return "\n".join([lines[0].removeprefix("    "), *lines[1:]]).removesuffix(",")


def dedented(element: str) -> str:
    return "\n".join(line.removeprefix("    ") for line in element.splitlines())


def needs_own_config_class(design: ModelDesign) -> bool:
    """Whether the model reads config fields a plain ArchitectureConfig does not have."""
    return bool(design.extra_fields) or design.base.config_class != "CausalLMConfig"


def entry_config_class(design: ModelDesign) -> str:
    """The config class the test-config entry names (``_config_cls``), or "" for none."""
    if design.vision:
        return design.vision.config_class
    return design.config_class if needs_own_config_class(design) else ""


def _test_config_change(
    design: ModelDesign, spec: ArchitectureSpec, library: Library, registry: str
) -> FileChange:
    path = library.root / TEST_CONFIGS
    original = text = path.read_text(encoding="utf-8")
    try:
        if design.vision and not re.search(r"^import dataclasses$", text, re.MULTILINE):
            raise CodemodError("it does not `import dataclasses` as mobius' own always has")
        config_class = entry_config_class(design)
        if config_class:
            text = add_from_import(text, "mobius._configs", config_class)
        text = upsert_tuple_in_list(
            text,
            test_config_list(design),
            design.model_type,
            test_config_entry(design, spec),
            neighbour_keys(design, registry),
        )
        # earlier entries of the type go: the config classes they named may be unused now
        text = drop_orphaned_imports(original, text, "mobius")
    except CodemodError as exc:
        raise TargetRepoError(f"cannot edit {TEST_CONFIGS}: {exc.message}") from None
    return FileChange(TEST_CONFIGS, text, False, "tiny test config")


def _patch(library: Library, shared: dict[str, tuple[str, str]]) -> str:
    chunks = []
    for path, (new, _why) in sorted(shared.items()):
        old = _read(library, path.removeprefix("src/mobius/"))
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"a/{path}",
                tofile=f"b/{path}",
            )
        )
    return "".join(chunks)
