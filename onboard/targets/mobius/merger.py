"""The steps of a generated Qwen-VL or GLM-4V patch merger."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MergerLayer:
    """One merger step as the generated merger writes it, widths as config expressions."""

    name: str  # HF's attribute under the merger: ln_q, mlp.0, mlp.1, mlp.2
    op: str  # linear, layer_norm, rms_norm, activation, gate_up (GLM-4V's)
    in_expr: str = ""
    out_expr: str = ""
    bias: bool = False
    activation: str = ""
    eps: float = 0.0
    up: str = ""  # op gate_up: the second linear's attribute
