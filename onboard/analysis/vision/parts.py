"""Find a tiny VLM's parts (tower, projector, language model, head) and where each lives on disk.

Parts are found by what they are, not by their names: the tower is the sub-model built from
``vision_config``, the language model the one built from ``text_config``, the projector the one
other child with weights. A VLM without ``vision_config`` (Fuyu) has no tower and no projector:
its one other child with weights is what turns patches into features (a linear patch
embedding), read as the tower, and the projector is none (""). On-disk prefixes are found by
matching every saved tensor to the parameter it holds (the tiny weights are random, so values
identify them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from onboard.errors import UnsupportedFeatureError


@dataclass(frozen=True)
class VLMParts:
    base: str  # the VLM's base model attribute (model)
    tower: str  # attribute names on the base model
    projector: str  # "": none (a linear patch embedding writes the text's width itself)
    language_model: str
    head: str  # on the VLM itself (lm_head)

    def module(self, model: Any, part: str) -> Any:
        if part == "head":
            return model.get_submodule(self.head)
        return model.get_submodule(f"{self.base}.{getattr(self, part)}")


def find_parts(model: Any, hf_config: Any) -> VLMParts:
    base_name = model.base_model_prefix
    base = getattr(model, base_name, None)
    if base is None:
        raise UnsupportedFeatureError(
            f"{type(model).__name__} holds its tower and language model itself, not under "
            f"{base_name!r}: onboard reads VLMs with a base model (LLaVA's layout) so far"
        )
    vision_config = getattr(hf_config, "vision_config", None)
    by_config = {"language_model": hf_config.text_config}
    if vision_config is not None:
        by_config["tower"] = vision_config
    found: dict[str, list[str]] = {role: [] for role in by_config}
    others = []
    for name, child in base.named_children():
        role = next((r for r, c in by_config.items() if getattr(child, "config", None) is c), None)
        if role:
            found[role].append(name)
        elif any(True for _ in child.parameters()):
            others.append(name)
    # a part other paths read (a second tower, image generation) is not the image path's
    if vision_config is not None:
        found["tower"] = _image_path(base, found["tower"])
    others = _image_path(base, others)
    if any(len(names) != 1 for names in found.values()) or len(others) != 1:
        shape = "a tower, one projector" if vision_config is not None else "one patch embedding"
        raise UnsupportedFeatureError(
            f"{type(base).__name__} is not {shape} and a language model "
            f"(children {', '.join(n for n, _ in base.named_children())}): onboard reads "
            "vision-language models of that shape so far"
        )
    language_model = found["language_model"][0]
    head = model.get_output_embeddings()
    head_name = next(n for n, m in model.named_modules() if m is head)
    if vision_config is None:  # the one other child turns patches into features itself
        return VLMParts(base_name, others[0], "", language_model, head_name)
    return VLMParts(base_name, found["tower"][0], others[0], language_model, head_name)


def _image_path(base: Any, names: list[str]) -> list[str]:
    """Of several candidate children, those ``get_image_features`` names (``self.<name>``):
    the others are read by other paths (a video tower, image generation)."""
    if len(names) < 2:
        return names
    import inspect

    try:
        source = inspect.getsource(type(base).get_image_features)
    except (AttributeError, OSError, TypeError):
        return names
    read = set(re.findall(r"self\.(\w+)", source))
    return [n for n in names if n in read] or names


def disk_prefixes(
    model: Any, parts: VLMParts, saved: dict[str, Any]
) -> tuple[tuple[str, str], ...]:
    """Role -> on-disk prefix (text, lm_head, tower, projector): each saved tensor is matched to
    the parameter with its value whose name it ends with; a part whose tensors do not share one
    prefix is refused."""
    memory = {n: p.detach() for n, p in model.named_parameters()}
    # the projector before the tower: Qwen-VL's merger lives inside its tower
    roots = {
        "text": f"{parts.base}.{parts.language_model}.",
        "lm_head": f"{parts.head}.",
        "projector": f"{parts.base}.{parts.projector}.",
        "tower": f"{parts.base}.{parts.tower}.",
    }
    if not parts.projector:  # none: nothing of the checkpoint is the projector's
        del roots["projector"]
    prefixes: dict[str, set[str]] = {role: set() for role in roots}
    for disk_name, tensor in saved.items():
        for name, value in memory.items():
            role = next((r for r, root in roots.items() if name.startswith(root)), None)
            relative = name[len(roots[role]) :] if role else ""
            if (
                role
                and disk_name.endswith(relative)
                and value.shape == tensor.shape
                and value.equal(tensor)
            ):
                prefixes[role].add(disk_name[: len(disk_name) - len(relative)])
                break
    head, embeddings = model.get_output_embeddings(), model.get_input_embeddings()
    if not prefixes["lm_head"] and head.weight is embeddings.weight:
        del prefixes["lm_head"]  # tied: the head is the embeddings, saved once
    for role, found in prefixes.items():
        if len(found) != 1:
            raise UnsupportedFeatureError(
                f"the checkpoint keeps the {role} under {len(found)} prefixes ({sorted(found)})"
            )
    return tuple((role, found.pop()) for role, found in prefixes.items())


_PREFIX_CHANGE = re.compile(r"^\^(\w+)\\\.\(\.\+\)\$$")


def published_aliases(tower: Any, tower_prefix: str) -> tuple[tuple[str, str], ...]:
    """(published, saved) prefixes: transformers 5 drops a wrapper level the published
    checkpoints keep (CLIP's ``vision_model.``) and says so in its conversion mapping."""
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping

    aliases = []
    for transform in get_checkpoint_conversion_mapping(type(tower).__name__) or ():
        for pattern in getattr(transform, "source_patterns", ()):
            if match := _PREFIX_CHANGE.match(pattern):
                aliases.append((f"{tower_prefix}{match.group(1)}.", tower_prefix))
    return tuple(aliases)
