"""How a model_type and architecture become a Python module name and a class prefix.

Every target names generated code the same way, so a model onboarded into two libraries is
recognisable in both.
"""

from __future__ import annotations

import keyword
import re


def module_name(model_type: str) -> str:
    name = re.sub(r"\W", "_", model_type).strip("_").lower() or "model"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"model_{name}"
    return name


def class_prefix(architecture: str, model_type: str) -> str:
    stem = re.sub(r"(ForCausalLM|ForConditionalGeneration|LMHeadModel|Model)$", "", architecture)
    if not stem or not stem.isidentifier():
        stem = "".join(part.capitalize() for part in re.split(r"\W|_", model_type) if part)
    return stem if stem[:1].isalpha() else f"Model{stem}"


def spelled_as(prefix: str, library: str) -> str:
    """``prefix`` spelled the way ``library`` names its classes. mobius writes ``MoE`` and no
    underscores (``Qwen2MoECausalLMModel``, ``Qwen35MoECausalLMModel`` for HF's ``Qwen3_5Moe``);
    AutoModel keeps HF's class names."""
    if library != "mobius":
        return prefix
    return re.sub(r"Moe(?=[A-Z0-9]|$)", "MoE", prefix.replace("_", ""))


def chosen_module_name(name: str) -> str:
    """A ``--name`` as given, refused unless it already is a module name: silently renaming
    ``../../x`` to ``x`` or ``class`` to ``model_class`` writes files the user did not ask for."""
    from onboard.errors import BadInputError

    if module_name(name) != name:
        raise BadInputError(
            f"--name {name!r} is not a module name: use lowercase letters, digits and '_', "
            f"not a Python keyword (for example {module_name(name)!r})"
        )
    return name
