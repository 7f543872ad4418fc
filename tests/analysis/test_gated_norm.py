"""Gated norms as a norm kind of their own (onboard/analysis/gated_norm.py), on hand-built
modules: what counts as one, and a gate read whatever it reads and whichever activation it
runs, not only AXK2's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from onboard.analysis.gated_norm import GatedNormReader, is_gated_norm, parts
from onboard.analysis.probe import is_norm
from onboard.analysis.reader import Context
from onboard.block_specs import NormSpec

HIDDEN, RANK = 12, 4


class PlainRMSNorm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(HIDDEN) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class InputGatedNorm(torch.nn.Module):
    """The gate of the norm's input, through GELU, its linears on the norm itself."""

    def __init__(self, bias: bool = False) -> None:
        super().__init__()
        self.inner = PlainRMSNorm()
        self.down = torch.nn.Linear(HIDDEN, RANK, bias=bias)
        self.up = torch.nn.Linear(RANK, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.up(torch.nn.functional.gelu(self.down(x)))
        return self.inner(x) * torch.sigmoid(gate)


def _reader(tiny: SimpleNamespace) -> GatedNormReader:
    context = Context(cfg=tiny, tiny=tiny, probe=None, files=())  # type: ignore[arg-type]
    return GatedNormReader(context, NormSpec("rms", 1e-6, 0.0, "pre"))


def test_a_gated_norm_is_a_norm_holding_a_norm_and_two_bias_free_linears() -> None:
    torch.manual_seed(0)
    module = InputGatedNorm()
    assert parts(module) == ("inner", "down", "up")
    assert is_gated_norm(module) and is_norm(module)
    assert not is_gated_norm(InputGatedNorm(bias=True))  # a bias: not a low-rank gate
    assert not is_gated_norm(PlainRMSNorm())  # a weight of its own


def test_the_gate_of_the_input_through_gelu_is_read_with_its_config_key() -> None:
    torch.manual_seed(0)
    reader = _reader(SimpleNamespace(norm_gate_rank=RANK, kv_lora_rank=RANK + 1))
    spec = reader._read_gate("model.layers.0.input_layernorm", InputGatedNorm())
    assert spec is not None
    assert (spec.reads, spec.activation, spec.rank, spec.rank_key) == (
        "input",
        "gelu",
        RANK,
        "norm_gate_rank",
    )
    assert (spec.norm, spec.down, spec.up) == ("inner", "down", "up")


def test_a_gate_no_candidate_reproduces_is_a_delta() -> None:
    class DoubledGatedNorm(InputGatedNorm):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return 2 * super().forward(x)

    torch.manual_seed(0)
    reader = _reader(SimpleNamespace())
    assert reader._read_gate("model.layers.0.input_layernorm", DoubledGatedNorm()) is None
    assert [d.what for d in reader.deltas] == ["gated norm whose gate onboard cannot read"]


@pytest.mark.parametrize("reads", ["normed", "input"])
def test_the_spec_gate_runs_what_it_says(reads: str) -> None:
    from onboard.analysis.gated_norm import gate
    from onboard.block_specs import NormGateSpec

    torch.manual_seed(0)
    x, down, up = torch.randn(3, HIDDEN), torch.randn(RANK, HIDDEN), torch.randn(HIDDEN, RANK)
    y = x * 2
    spec = NormGateSpec(RANK, None, "silu", reads, "norm", "fc1", "fc2")  # type: ignore[arg-type]
    z = y if reads == "normed" else x
    wanted = y * torch.sigmoid(torch.nn.functional.silu(z @ down.T) @ up.T)
    assert torch.allclose(gate(y, x, down, up, spec), wanted)
