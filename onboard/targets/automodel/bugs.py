"""Known nemo-automodel 0.7.0 bugs in the library's own classes, each with its counterfactual.

A failure of a registered class is blamed on the library only when a bug listed for that class
explains it: the build fails the way the bug says and succeeds with its workaround, or the
scenarios fail as built and pass once the workaround is applied to the loaded model. Anything
else stays a failure. Generated classes are never excused: they must not have these bugs.

Ids follow ``shared/notes/target-automodel.md`` (T<n>) and the hybrid notes (cited "hybrid A<n>").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# How a bug's counterfactual is applied in the parity subprocess.
CUDA_CONSTRUCTION = "cuda_construction"  # the constructor asks for CUDA: build with a CPU shim
FINAL_NORM_OFFSET = "final_norm_offset"  # a plain RMSNorm where HF scales by (1 + w)

_MODELS = "nemo_automodel.components.models"


@dataclass(frozen=True)
class LibraryBug:
    id: str
    title: str
    classes: tuple[str, ...]  # module.Class of the library classes it affects
    workaround: str  # CUDA_CONSTRUCTION or FINAL_NORM_OFFSET
    trigger: str  # what the counterfactual changes, for the report


KNOWN_BUGS = (
    LibraryBug(
        "T3",
        "Qwen3MoeForCausalLM's constructor builds its RoPE on cuda:{current_device()}",
        (f"{_MODELS}.qwen3_moe.model.Qwen3MoeForCausalLM",),
        CUDA_CONSTRUCTION,
        "torch.cuda.current_device patched to 0 during construction, RoPE moved to the CPU",
    ),
    LibraryBug(
        "hybrid A2",
        "Qwen3NextForCausalLM's constructor builds its RoPE on cuda:{current_device()}",
        (f"{_MODELS}.qwen3_next.model.Qwen3NextForCausalLM",),
        CUDA_CONSTRUCTION,
        "torch.cuda.current_device patched to 0 during construction, RoPE moved to the CPU",
    ),
    LibraryBug(
        "hybrid A1",
        "Qwen3NextForCausalLM's final norm is a plain RMSNorm (w * x); HF's scales by (1 + w) "
        "and the adapter does not add the 1",
        (f"{_MODELS}.qwen3_next.model.Qwen3NextForCausalLM",),
        FINAL_NORM_OFFSET,
        "model.norm.weight += 1 after loading",
    ),
)
BY_ID = {bug.id: bug for bug in KNOWN_BUGS}


def bugs_for(module: str, class_name: str) -> tuple[str, ...]:
    """Ids of the known bugs of a library class (none for anything onboard generated)."""
    return tuple(bug.id for bug in KNOWN_BUGS if f"{module}.{class_name}" in bug.classes)


def asks_for_cuda(exc: BaseException) -> bool:
    """Whether a constructor failed because this torch has no CUDA."""
    text = str(exc)
    return "not compiled with CUDA" in text or "no NVIDIA driver" in text


@contextlib.contextmanager
def cpu_construction() -> Iterator[None]:
    """``torch.cuda.current_device`` answers 0 while a constructor runs (T3's workaround)."""
    import torch

    original = torch.cuda.current_device
    torch.cuda.current_device = lambda: 0
    try:
        yield
    finally:
        torch.cuda.current_device = original


def move_cuda_devices_to_cpu(model: Any) -> None:
    """Point every module's stored ``device`` (only used to build RoPE tables) at the CPU."""
    import torch

    for module in model.modules():
        device = vars(module).get("device")
        if isinstance(device, torch.device) and device.type == "cuda":
            module.device = torch.device("cpu")


def add_final_norm_offset(model: Any) -> None:
    """What the checkpoint's final norm means under HF: ``(1 + w)``, stored in the plain norm."""
    import torch

    with torch.no_grad():
        model.model.norm.weight += 1
