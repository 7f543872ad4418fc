"""config.json files for architectures transformers knows and mobius 0.1.0 does not."""

from __future__ import annotations

import json
from pathlib import Path

from tests.hub_cache import FIXTURES


def default_config_dir(
    model_type: str,
    root: Path,
    vision_config: dict | None = None,
    text_config: dict | None = None,
    **overrides,
) -> Path:
    """A checkpoint folder whose config.json is transformers' default config for ``model_type``
    (``vision_config`` and ``text_config`` keys update its sub-configs)."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    config = CONFIG_MAPPING[model_type]().to_dict()
    architectures = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    config["architectures"] = [
        architectures or MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES[model_type]
    ]
    config.update(overrides)
    if vision_config:
        config["vision_config"] = {**config["vision_config"], **vision_config}
    if text_config:
        config["text_config"] = {**config["text_config"], **text_config}
    folder = root / model_type
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


# The keys of nvidia/NVIDIA-Nemotron-Nano-9B-v2 that two sources agree on (a partial config,
# see tests/fixtures/hub/SOURCES.md): Mamba-2, attention and MLP layers, one block each.
NEMOTRON_NANO = "nvidia/NVIDIA-Nemotron-Nano-9B-v2"


def nemotron_nano_dir(root: Path) -> Path:
    """transformers' default NemotronH config with the partial Nemotron-Nano-9B-v2 keys."""
    partial = json.loads((FIXTURES / NEMOTRON_NANO / "config.partial.json").read_text())
    partial.pop("model_type")
    folder = default_config_dir("nemotron_h", root, **partial)
    config = json.loads((folder / "config.json").read_text())
    del config["layers_block_type"]  # derived from the default pattern; the Hub's has none
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder
