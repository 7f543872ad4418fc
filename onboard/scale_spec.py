"""``ScaleSpec``: a config multiplier and the place it enters the computation.

Its own module so that the text spec and the vision spec (a VLM's text backbone whose causal LM
scales the logits its VLM's head leaves as they are) both hold one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ScaleSite = Literal["embedding", "residual", "logits"]
ScaleForm = Literal["times", "divided_by", "times_over_sqrt_layers"]


@dataclass(frozen=True)
class ScaleSpec:
    """A constant from the config that HF multiplies into one place of the computation.

    ``embedding``: the token embeddings; ``residual``: each attention and MLP output before its
    residual add; ``logits``: the final logits. ``form`` says how the factor follows from
    ``config.<key>`` (Granite divides logits by ``logits_scaling``; MiniCPM3 scales residuals by
    ``scale_depth / sqrt(num_hidden_layers)``).
    """

    site: ScaleSite
    key: str
    form: ScaleForm = "times"

    def factor(self, config: Any) -> float:
        value = float(getattr(config, self.key))
        if self.form == "divided_by":
            return 1.0 / value
        if self.form == "times_over_sqrt_layers":
            return value / config.num_hidden_layers**0.5
        return value

    def expression(self, config: str = "config") -> str:
        """The factor as Python source over an HF config named ``config``."""
        value = f"{config}.{self.key}"
        if self.form == "divided_by":
            return f"1.0 / {value}"
        if self.form == "times_over_sqrt_layers":
            return f"{value} / math.sqrt({config}.num_hidden_layers)"
        return value

    def describe(self) -> str:
        what = {
            "embedding": "token embeddings",
            "residual": "attention and MLP outputs (before the residual add)",
            "logits": "final logits",
        }[self.site]
        return f"{what} x {self.expression()}"
