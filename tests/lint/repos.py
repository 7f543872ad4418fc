"""Tiny synthetic target repositories for the lint tests, laid out like the real checkouts.

``mobius_files()`` / ``automodel_files()`` return ``{path: text}`` for a clean repository; a test
changes or adds a few entries and writes the tree with ``write_tree``. Registry keys are real
transformers model types / architectures, so the transformers-backed rules have real sources.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

MOBIUS_REGISTRY = "src/mobius/_registry.py"
AUTOMODEL_REGISTRY = "nemo_automodel/_transformers/registry.py"


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def line_of(text: str, fragment: str, start: int = 1) -> int:
    """1-based number of the first line at or after ``start`` containing ``fragment``."""
    for number, line in enumerate(textwrap.dedent(text).lstrip("\n").splitlines(), 1):
        if number >= start and fragment in line:
            return number
    raise AssertionError(f"{fragment!r} not found")


def mobius_registry(entries: str, *, imports: str = "", family: str = "", variant: str = "") -> str:
    """A ``_registry.py`` with the given ``_REGISTRATIONS`` body (one entry per line)."""
    return (
        textwrap.dedent(
            """
            from __future__ import annotations

            import dataclasses

            from mobius._configs import CausalLMConfig, QKNormConfig
            from mobius.models import CausalLMModel, MoECausalLMModel, Qwen3CausalLMModel
            {imports}

            @dataclasses.dataclass(frozen=True)
            class ModelRegistration:
                module_class: type
                task: str | None = None
                config_class: type | None = None
                test_model_id: str | None = None
                family: str | None = None
                variant: str | None = None


            _REGISTRATIONS: dict[str, ModelRegistration] = {{
            {entries}
            }}

            _TEXT_ONLY_MODEL_TYPE: dict[str, str] = {{}}

            _TEST_MODEL_IDS: dict[str, str] = {{
                "llama": "meta-llama/Llama-2-7b-hf",
            }}

            _FAMILY_OVERRIDES: dict[str, str] = {{
                "llama": "llama",
            {family}
            }}

            _VARIANT_LABELS: dict[str, str] = {{
            {variant}
            }}
            """
        )
        .format(
            imports=imports,
            entries=textwrap.indent(textwrap.dedent(entries).strip("\n"), "    "),
            family=textwrap.indent(textwrap.dedent(family).strip("\n"), "    "),
            variant=textwrap.indent(textwrap.dedent(variant).strip("\n"), "    "),
        )
        .replace("\n\n}", "\n}")
        .replace("{\n\n", "{\n")
    )


CLEAN_ENTRIES = """
"llama": ModelRegistration(CausalLMModel),
"qwen3": ModelRegistration(Qwen3CausalLMModel),
"""

# mobius' config extraction, reduced to the two flag expressions the alias rules read.
MOBIUS_CONFIG_BASE = '''
"""Config extraction (trimmed): flags from config fields or model_type lists."""


class ArchitectureConfig:
    pass


class CausalLMConfig(ArchitectureConfig):
    @classmethod
    def from_transformers(cls, config, parent_config=None):
        model_type = config.model_type
        return dict(
            attn_qkv_bias=getattr(
                config, "attention_bias", model_type in ("gpt2", "qwen2", "qwen2_moe")
            ),
            attn_qk_norm=(
                model_type in ("olmo2", "qwen3", "qwen3_moe")
                or getattr(config, "use_qk_norm", False)
            ),
        )


class QKNormConfig(CausalLMConfig):
    pass
'''


def mobius_files(entries: str = CLEAN_ENTRIES, **registry: str) -> dict[str, str]:
    return {
        "src/mobius/__init__.py": "",
        MOBIUS_REGISTRY: mobius_registry(entries, **registry),
        "src/mobius/_configs/__init__.py": """
            from mobius._configs._base import ArchitectureConfig, CausalLMConfig, QKNormConfig
            """,
        "src/mobius/_configs/_base.py": MOBIUS_CONFIG_BASE,
        "src/mobius/models/__init__.py": """
            from mobius.models.base import CausalLMModel
            from mobius.models.moe import MoECausalLMModel
            from mobius.models.qwen import Qwen3CausalLMModel

            __all__ = ["CausalLMModel", "MoECausalLMModel", "Qwen3CausalLMModel"]
            """,
        "src/mobius/models/base.py": """
            from onnxscript import nn

            from mobius._configs import CausalLMConfig


            class CausalLMModel(nn.Module):
                default_task = "text-generation"
                config_class: type = CausalLMConfig
            """,
        "src/mobius/models/moe.py": """
            from mobius.models.base import CausalLMModel


            class MoECausalLMModel(CausalLMModel):
                pass
            """,
        "src/mobius/models/qwen.py": """
            from mobius.models import base


            class Qwen3CausalLMModel(base.CausalLMModel):
                pass
            """,
    }


def automodel_registry(entries: str, configs: str = "") -> str:
    return textwrap.dedent(
        """
        from collections import OrderedDict

        MODEL_ARCH_MAPPING = OrderedDict(
            [
        {entries}
            ]
        )

        _CUSTOM_CONFIG_REGISTRATIONS = {{
        {configs}
        }}
        """
    ).format(
        entries=textwrap.indent(textwrap.dedent(entries).strip("\n"), "        "),
        configs=textwrap.indent(textwrap.dedent(configs).strip("\n"), "    "),
    )


AUTOMODEL_CLEAN_ENTRIES = """
(
    "LlamaForCausalLM",
    ("nemo_automodel.components.models.llama.model", "LlamaForCausalLM"),
),
"""

LLAMA_MODEL = """
from dataclasses import dataclass

from torch import nn

from nemo_automodel.components.models.common import TieSupport


class LlamaPreTrainedModel(nn.Module):
    pass


class LlamaForCausalLM(LlamaPreTrainedModel):
    tie_word_embeddings_support = TieSupport.BOTH

    @dataclass(frozen=True)
    class ModelCapabilities:
        supports_tp: bool = True

    def tie_weights(self):
        pass


ModelClass = LlamaForCausalLM
"""


def automodel_files(entries: str = AUTOMODEL_CLEAN_ENTRIES, configs: str = "") -> dict[str, str]:
    package = "nemo_automodel/components/models"
    return {
        "nemo_automodel/__init__.py": "",
        "nemo_automodel/_transformers/__init__.py": "",
        AUTOMODEL_REGISTRY: automodel_registry(entries, configs),
        "nemo_automodel/components/__init__.py": "",
        f"{package}/__init__.py": "",
        f"{package}/common/__init__.py": """
            import enum


            class TieSupport(enum.Enum):
                BOTH = "both"
                TIED_ONLY = "tied_only"
                UNTIED_ONLY = "untied_only"
            """,
        f"{package}/llama/__init__.py": "",
        f"{package}/llama/model.py": LLAMA_MODEL,
    }
