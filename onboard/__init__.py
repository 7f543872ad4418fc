"""onboard: turn a new Hugging Face architecture into registered, parity-tested library code."""

from __future__ import annotations

__version__ = "0.1.0"
STAMP = f"onboard {__version__}"
