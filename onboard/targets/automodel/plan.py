"""Turn a ``ModelDesign`` into the files of an AutoModel pull request.

With ``--repo`` the plan edits the checkout: the new model package, its generated tests, an
example recipe, the model-coverage page, and a libcst upsert of the ``MODEL_ARCH_MAPPING`` entry.
Without it the plan writes a folder laid out like the repo, with the registry edit as
``onboard.patch`` (against the installed package) and the remaining steps in ``ONBOARD.md``.
"""

from __future__ import annotations

import difflib
import math
import pprint
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard import STAMP
from onboard.codegen import CodeStyle, format_python, format_shared, render_template
from onboard.codemods import CodemodError, upsert_ordereddict_entry
from onboard.errors import BadInputError, TargetRepoError, UnsupportedFeatureError
from onboard.hf_config import make_hf_config
from onboard.plan import FileChange, Plan
from onboard.provenance import header_for
from onboard.spec import ArchitectureSpec
from onboard.targets.automodel.design import HFLayout, ModelDesign
from onboard.targets.automodel.registry import (
    ARCH_MAPPING,
    REGISTRY,
    custom_config_types,
    library_version,
)
from onboard.targets.base import Library

DEVICE_ENV = "AUTOMODEL_TEST_DEVICE"
MODELS_DIR = "nemo_automodel/components/models"
TESTS_DIR = "tests/unit_tests/models"
# Fields of onboard's tiny config.json the generated tests set themselves, or that only describe
# the file the config came from.
# Automodel's own ruff settings (pyproject.toml): line length 120 (E501 left to the formatter),
# nemo_automodel imports in the first-party block.
STYLE = CodeStyle(line_length=120, first_party=("nemo_automodel",), ignore=("E501",))
_TEST_CONFIG_DROP = frozenset(
    {
        "architectures",
        "auto_map",
        "dtype",
        "model_type",
        "torch_dtype",
        "transformers_version",
        "use_cache",
        "_name_or_path",
    }
)


@dataclass(frozen=True)
class Paths:
    """Where each generated file goes, relative to the repo root."""

    package: str
    tests: str
    recipe: str | None  # None: a VLM, whose recipe (FinetuneRecipeForVLM) is not generated yet
    card: str

    @property
    def model(self) -> str:
        return f"{self.package}/model.py"


@dataclass(frozen=True)
class HubName:
    """How docs and recipes name the checkpoint: a Hub id, or a local folder."""

    repo_id: str  # org/name for the Hub, or the local path
    org: str
    name: str


def paths_for(design: ModelDesign, hub: HubName) -> Paths:
    slug = re.sub(r"[^a-z0-9]+", "_", hub.name.lower().replace(".", "p")).strip("_")
    if design.vision:
        return Paths(
            package=f"{MODELS_DIR}/{design.module}",
            tests=f"{TESTS_DIR}/{design.module}",
            recipe=None,
            card=f"docs/model-coverage/vlm/{hub.org}/{hub.name}.mdx",
        )
    return Paths(
        package=f"{MODELS_DIR}/{design.module}",
        tests=f"{TESTS_DIR}/{design.module}",
        recipe=f"examples/llm_finetune/{design.module}/{slug or design.module}_hellaswag.yaml",
        card=f"docs/model-coverage/llm/{hub.org}/{hub.name}.mdx",
    )


def hub_name(spec: ArchitectureSpec) -> HubName:
    source = spec.source
    if source.hub_id:
        org, name = source.hub_id.split("/")
        return HubName(source.hub_id, org.lower(), name)
    return HubName(source.public_name, "local", source.public_name or spec.model_type)


def plan_files(
    design: ModelDesign,
    spec: ArchitectureSpec,
    tiny_config: dict[str, Any],
    library: Library,
    *,
    out: Path | None,
    command: str,
    checkpoint: ArchitectureSpec | None = None,
) -> Plan:
    """Every file of the pull request; ``out`` None means edit the checkout's registry.

    ``spec`` is what the code is generated from (the analysis with the config flags flipped,
    where that passes parity); ``checkpoint`` the checkpoint's own, which its docs page and
    recipe describe."""
    if spec.model_type in custom_config_types(library.root):
        raise UnsupportedFeatureError(
            f"{spec.model_type} has a custom config class in AutoModel's "
            "_CUSTOM_CONFIG_REGISTRATIONS; onboard does not generate config classes yet"
        )
    hub = hub_name(spec)
    paths = paths_for(design, hub)
    header = _header(spec, design, command, library_version(library.root))
    owned = _owned_files(design, spec, tiny_config, paths, hub, header, checkpoint or spec)
    closest = (design.closest.variant.key,) if design.closest else ()
    registry = registry_with_entry(
        library, design.arch, f"{design.package}.model", design.model_class, closest
    )
    notes = (f"registered as {design.arch!r} -> {design.package}.model.{design.model_class}",)
    if out is None:
        changes = (*owned, FileChange(REGISTRY, registry, False, "MODEL_ARCH_MAPPING entry"))
    else:
        patch = registry_patch(library, registry)
        readme = render_template(
            "automodel/ONBOARD.md.j2",
            d=design,
            spec=spec,
            stamp=STAMP,
            command=command,
            automodel_version=library_version(library.root),
            registry=REGISTRY,
            patched=bool(patch),
            paths=paths,
            device_env=DEVICE_ENV,
        )
        # No patch file when the registry already maps the architecture to this class.
        patch_file = (FileChange("onboard.patch", patch, True, "registry edit"),) if patch else ()
        changes = (
            *owned,
            *patch_file,
            FileChange("ONBOARD.md", readme, True, "summary and manual steps"),
        )
    return Plan("automodel", design.model_type, changes, notes, paths.model, design.model_class)


def _header(spec: ArchitectureSpec, design: ModelDesign, command: str, version: str) -> str:
    h = header_for(spec, command)
    closest = design.closest.variant.key if design.closest else "none"
    return (
        f"{h.generator}: generated from {h.model_id} (revision {h.revision}), {h.hf_source}, "
        f"for nemo-automodel {version}. Closest AutoModel class: {closest}."
    )


def _owned_files(
    design: ModelDesign,
    spec: ArchitectureSpec,
    tiny_config: dict[str, Any],
    paths: Paths,
    hub: HubName,
    header: str,
    checkpoint: ArchitectureSpec,
) -> tuple[FileChange, ...]:
    def python(template: str, path: str, why: str, **extra: Any) -> FileChange:
        text = render_template(f"automodel/{template}", d=design, header=header, **extra)
        formatted = format_python(text, filename=Path(path).name, style=STYLE)
        return FileChange(path, formatted, True, why)

    layer_summary = _layer_summary(checkpoint.text.layer_types)
    # A VLM's dense tests run on its text model, with the text sub-config
    text_config = tiny_config["text_config"] if design.vision else tiny_config
    files = [
        python("__init__.py.j2", f"{paths.package}/__init__.py", "package exports"),
        python(_model_template(design), paths.model, "model"),
        python(
            "state_dict_adapter.py.j2",
            f"{paths.package}/state_dict_adapter.py",
            "HF checkpoint adapter",
        ),
    ]
    if design.has_layers_module:
        files.append(python("layers.py.j2", f"{paths.package}/layers.py", "scaled embedding"))
    if design.per_kind_rope:
        files.append(python("rope_utils.py.j2", f"{paths.package}/rope_utils.py", "RoPE per kind"))
    if design.vision and design.vision.qwen:
        files.append(python("mrope.py.j2", f"{paths.package}/mrope.py", "M-RoPE"))
    files.append(
        python(
            "test_model.py.j2",
            f"{paths.tests}/test_{design.module}_model.py",
            "generated tests",
            tiny=_literal(test_config(text_config)),
            norms=_literal(list(norm_attributes(spec, design.layout))),
            mlp_labels=_literal(feed_forward_labels(spec, text_config)),
            layer_summary=_layer_summary(text_config.get("layer_types") or ()) or "full attention",
            device_env=DEVICE_ENV,
            mixer_attributes=_literal({m.label: m.attribute for m in design.mixers}),
            chunk=scan_chunk(spec, text_config),
        )
    )
    if design.vision and design.vision.qwen:
        files.append(
            python(
                "test_vlm_qwen.py.j2",
                f"{paths.tests}/test_{design.module}_vision.py",
                "generated vision tests",
                tiny=_literal(vision_test_config(tiny_config)),
                device_env=DEVICE_ENV,
                row_grids=_literal(qwen_row_grids(tiny_config)),
            )
        )
    elif design.vision:
        files.append(
            python(
                "test_vlm.py.j2",
                f"{paths.tests}/test_{design.module}_vision.py",
                "generated vision tests",
                tiny=_literal(vision_test_config(tiny_config)),
                device_env=DEVICE_ENV,
                image_sizes=_literal(test_image_sizes(design, tiny_config)),
            )
        )
    context = {
        "d": design,
        "spec": checkpoint,
        "header": header,
        "hub_id": hub.repo_id,
        "org": hub.org,
        "model_name": hub.name,
        "layer_summary": layer_summary,
        "recipe_path": paths.recipe,
        "path": paths.recipe,
    }
    if paths.recipe is not None:
        recipe = render_template("automodel/recipe.yaml.j2", **context)
        files.append(FileChange(paths.recipe, recipe, True, "recipe"))
    files.append(
        FileChange(
            paths.card, render_template("automodel/model_card.mdx.j2", **context), True, "docs"
        )
    )
    return tuple(files)


def _model_template(design: ModelDesign) -> str:
    """HF's base model kept whole (a tree not Llama's), or the generated Llama-shaped model."""
    return "model_kept_base.py.j2" if design.kept_base else "model.py.j2"


def test_config(tiny_config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in tiny_config.items() if k not in _TEST_CONFIG_DROP}


def vision_test_config(tiny_config: dict[str, Any]) -> dict[str, Any]:
    """A VLM's tiny config for its tests, its sub-configs trimmed like the top level."""
    top = test_config(tiny_config)
    for key in ("text_config", "vision_config"):
        if isinstance(top.get(key), dict):
            top[key] = {k: v for k, v in test_config(top[key]).items() if k != "_name_or_path"}
            top[key]["model_type"] = tiny_config[key]["model_type"]
    return top


def test_image_sizes(design: ModelDesign, tiny_config: dict[str, Any]) -> list[list[int]]:
    """The sizes of the generated tests' two images, for a tower that takes images of any size:
    the parity run's (a wide one and a square one), so a model that ignores them fails."""
    from onboard.tiny_vision import dynamic_image_sizes

    if design.vision is None or not design.vision.tower_sizes:
        return []
    return [list(size) for size in dynamic_image_sizes(make_hf_config(tiny_config))]


def qwen_row_grids(tiny_config: dict[str, Any]) -> list[list[list[int]]]:
    """The generated Qwen-VL tests' image grids per row, the parity run's: one image in the
    first row, two of other grids in the second."""
    from onboard.parity.vision_qwen import qwen_vl_grids

    first, *rest = (list(grid) for grid in qwen_vl_grids(make_hf_config(tiny_config)))
    return [[first], rest]


def norm_attributes(spec: ArchitectureSpec, layout: HFLayout) -> tuple[str, ...]:
    """Every norm of a decoder layer, by HF's attribute path (layer norms, then q/k norms)."""
    if spec.text.blocks is not None:  # one norm a layer, whatever its block
        names: tuple[str, ...] = (spec.text.blocks.norm,)
    else:
        names = tuple(name for _, name in spec.text.norm.names)
    if spec.text.attention.qk_norm != "none":
        names += tuple(f"{layout.attention}.{layout.attr(n)}" for n in ("q_norm", "k_norm"))
    return names


def feed_forward_labels(spec: ArchitectureSpec, tiny_config: dict[str, Any]) -> list[str]:
    """HF's labels of one-block layers that hold an MLP (NemotronH: mlp); none otherwise."""
    if spec.text.blocks is None:
        return []
    labels = dict.fromkeys(getattr(make_hf_config(tiny_config), "layer_types", None) or ())
    return [label for label in labels if spec.text.kind_of_label(label) == "mlp"]


def registry_with_entry(
    library: Library, arch: str, module: str, class_name: str, closest: tuple[str, ...] = ()
) -> str:
    """The registry's text with ``arch -> (module, class_name)`` upserted (libcst), placed as
    the mapping's order and its ``closest`` architectures say (``codemods._placement``)."""
    path = library.root / REGISTRY
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TargetRepoError(f"cannot read {path}: {exc.strerror}") from None
    try:
        value = f'("{module}", "{class_name}")'
        edited = upsert_ordereddict_entry(source, ARCH_MAPPING, arch, value, closest)
    except CodemodError as exc:
        raise TargetRepoError(f"cannot edit {REGISTRY}: {exc.message}") from None
    return format_shared(source, edited, filename=Path(REGISTRY).name, style=STYLE)


def registry_patch(library: Library, new: str) -> str:
    old = (library.root / REGISTRY).read_text(encoding="utf-8")
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{REGISTRY}",
            tofile=f"b/{REGISTRY}",
        )
    )


def scan_chunk(spec: ArchitectureSpec, tiny_config: dict[str, Any]) -> int:
    """The tokens HF's chunked prefill scans at once: the generated tests' prompts cross it.

    DeltaNet's chunk is fixed in HF's code; Mamba-2's is the (shrunk) config's chunk_size.
    """
    fixed = spec.text.mixers.fixed_chunks()
    return max(fixed) if fixed else int(tiny_config.get("chunk_size") or 16)


def _layer_summary(kinds: Any) -> str:
    counts = Counter(kinds)
    return ", ".join(f"{n} x {kind}" for kind, n in counts.items())


def _literal(value: Any) -> str:
    """``value`` as Python source (an infinite float as ``float("inf")``, not ``inf``)."""
    return pprint.pformat(_spelt(value), width=88, sort_dicts=False)


class _Infinity(float):
    def __repr__(self) -> str:
        return 'float("inf")' if self > 0 else '-float("inf")'


def _spelt(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return _Infinity(value)
    if isinstance(value, dict):
        return {k: _spelt(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_spelt(v) for v in value)
    return value


def model_class_in(path: Path) -> str:
    """The name bound by ``ModelClass = X`` in a model file, read without importing it."""
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read {path}: {exc}") from None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "ModelClass" for t in node.targets)
            and isinstance(node.value, ast.Name)
        ):
            return node.value.id
    raise BadInputError(f"{path} has no `ModelClass = <class>` (AutoModel's model-file convention)")
