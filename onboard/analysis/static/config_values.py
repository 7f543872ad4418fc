"""config.json values, with the remote config class's ``__init__`` defaults behind them."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from onboard.source import SourceFile


class ConfigValues:
    """config.json values, falling back to the remote config class's ``__init__`` defaults."""

    def __init__(self, config: Mapping[str, Any], files: Sequence[SourceFile]) -> None:
        self.config = config
        self.defaults = _config_defaults(files)

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.config:
            return self.config[key]
        return self.defaults.get(key, default)

    def has(self, key: str) -> bool:
        return key in self.config or key in self.defaults


def _config_defaults(files: Sequence[SourceFile]) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for file in files:
        if not file.name.startswith("configuration_"):
            continue
        tree = ast.parse(file.text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                args = node.args.args[-len(node.args.defaults) :] if node.args.defaults else []
                for arg, value in zip(args, node.args.defaults, strict=True):
                    try:
                        defaults[arg.arg] = ast.literal_eval(value)
                    except ValueError:
                        continue
                for arg, value in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True):
                    if value is not None:
                        try:
                            defaults[arg.arg] = ast.literal_eval(value)
                        except ValueError:
                            continue
    return defaults
