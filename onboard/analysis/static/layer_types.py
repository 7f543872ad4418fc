"""Layer types: full and sliding-window attention layers, and the window."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from onboard.analysis.static.source_model import mentions
from onboard.spec import Evidence

if TYPE_CHECKING:
    from onboard.analysis.static.reader import StaticReader


def read_layer_types(
    reader: StaticReader, attention_class: str, model_class: str
) -> tuple[tuple[str, ...], int | None, str | None]:
    """The layer kinds, the window of sliding ones, and the config key listing the kinds."""
    count = int(reader.cfg.get("num_hidden_layers", 0))
    key = None
    declared = reader.cfg.get("layer_types")
    window = reader.cfg.get("sliding_window")
    model = reader.src.classes[model_class]
    uses_window = mentions(model, "sliding_window") or mentions(
        reader.src.classes[attention_class], "sliding_window"
    )
    pattern = reader.cfg.get("sliding_window_pattern")
    if declared is None and isinstance(pattern, int) and pattern > 0 and window:
        # Gemma's rule: every pattern-th layer attends fully, the others slide.
        declared = [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(count)
        ]
    if isinstance(declared, list) and len(declared) == count:
        kinds, key = tuple(str(k) for k in declared), "layer_types"
        reader.log.add(
            "text.layer_types", Evidence("config", "config.json:layer_types", str(set(kinds)))
        )
    elif window and uses_window and reader.cfg.get("use_sliding_window") is False:
        kinds = ("full_attention",) * count
        reader.log.add(
            "text.layer_types",
            Evidence("config", "config.json:use_sliding_window", "false: no layer slides"),
        )
    elif window and uses_window and "max_window_layers" in reader.cfg.config:
        kinds = ("full_attention",) * count
        reader.delta(
            "sliding window on some layers by max_window_layers: which ones is not readable",
            None,
            f"max_window_layers={reader.cfg.get('max_window_layers')}",
        )
    elif window and uses_window:
        kinds = ("sliding_attention",) * count
        node = next(
            n
            for n in ast.walk(model)
            if isinstance(n, ast.Name | ast.Attribute) and "sliding_window" in ast.unparse(n)
        )
        reader.cite("text.layer_types", node)
    else:
        kinds = ("full_attention",) * count
    if "sliding_attention" in kinds and window:
        reader.log.add(
            "text.sliding_window", Evidence("config", "config.json:sliding_window", str(window))
        )
        return kinds, int(window), key
    reader.log.add(
        "text.sliding_window",
        Evidence("config", "config.json:sliding_window", f"{window}; every layer attends fully"),
    )
    return kinds, None, key
