"""Which AutoModel classes a known bug can excuse: the library's own, never generated ones."""

from __future__ import annotations

import torch

from onboard.targets.automodel.bugs import (
    BY_ID,
    asks_for_cuda,
    bugs_for,
    cpu_construction,
    move_cuda_devices_to_cpu,
)

MODELS = "nemo_automodel.components.models"


def test_bugs_belong_to_the_library_classes_they_were_measured_on() -> None:
    assert bugs_for(f"{MODELS}.qwen3_moe.model", "Qwen3MoeForCausalLM") == ("T3",)
    assert bugs_for(f"{MODELS}.qwen3_next.model", "Qwen3NextForCausalLM") == (
        "hybrid A2",
        "hybrid A1",
    )
    assert bugs_for(f"{MODELS}.qwen3.model", "Qwen3ForCausalLM") == ()
    # onboard's own output for the same architecture is imported under another module name
    assert bugs_for(f"{MODELS}.qwen3_next_onboard.model", "Qwen3NextForCausalLM") == ()


def test_every_bug_names_its_trigger() -> None:
    for bug in BY_ID.values():
        assert bug.classes and bug.trigger and bug.title


def test_only_a_missing_cuda_is_excused_at_build_time() -> None:
    assert asks_for_cuda(AssertionError("Torch not compiled with CUDA enabled"))
    assert not asks_for_cuda(ValueError("hidden_size must be divisible by num_heads"))


class _Rope(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.device = torch.device("cuda", torch.cuda.current_device())


def test_the_cuda_shim_builds_on_cpu_and_restores_torch() -> None:
    original = torch.cuda.current_device
    with cpu_construction():
        rope = _Rope()
    assert torch.cuda.current_device is original
    assert rope.device == torch.device("cuda", 0)
    move_cuda_devices_to_cpu(rope)
    assert rope.device == torch.device("cpu")
