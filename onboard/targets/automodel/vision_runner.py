"""The VLM scenarios inside the parity subprocess: a generated VLM class against HF's VLM.

The weights go through the same proof as a text model's (every checkpoint tensor, the tower's
and the projector's included, placed once through the adapter; the export equal to the
checkpoint); then the shared vision scenarios of ``onboard.parity.vision`` run on both models. A
Qwen-VL model runs the Qwen-VL scenarios of ``onboard.parity.vision_qwen``: flattened patches
with ``image_grid_thw`` and host-computed M-RoPE ``position_ids [3, B, S]``, as the mobius path
feeds its decoder, while HF computes its own positions from the grids.
"""

from __future__ import annotations

from typing import Any

from onboard.parity.reference import cache_states
from onboard.parity.vision import (
    TorchVisionRunner,
    VisionBatch,
    VisionStep,
    _numpy,
)


class GeneratedVisionRunner(TorchVisionRunner):
    """The generated class, in AutoModel's VLM layout: ``model.language_model`` and
    ``model.get_image_features`` (the tower's features, projected, image after image)."""

    def __init__(self, model: Any, provider: str) -> None:
        super().__init__(model)
        self.provider = provider

    def language_model(self) -> Any:
        return self.model.model.language_model

    def image_features(self, pixel_values: Any, **sized: Any) -> Any:
        return self.model.model.get_image_features(pixel_values, **sized)


class QwenGeneratedVisionRunner(TorchVisionRunner):
    """The generated Qwen-VL class fed as a host feeds it: the patches with their grids, and
    the M-RoPE positions of the host rule (``parity/mrope.py``) at prefill and every decode
    step, so the class never computes positions of its own. A hybrid text model's conv and
    recurrent states are read from its cache after the prefill, as after every decode step."""

    def __init__(self, model: Any, provider: str) -> None:
        super().__init__(model)
        self.provider = provider

    def language_model(self) -> Any:
        return self.model.model.language_model

    def prefill(self, batch: VisionBatch) -> VisionStep:
        from onboard.parity.vision_qwen import qwen_prefill

        positions = self._tensor(batch.position_ids)
        out, features, embeddings = qwen_prefill(self, batch, position_ids=positions)
        states = cache_states(self.model.config, out.past_key_values)
        return VisionStep(_numpy(out.logits), features, embeddings, out.past_key_values, states)


def vision_scenarios(cls: type, request: Any) -> tuple[list[Any], dict[str, Any] | None]:
    """The weights check, then image features, merged embeddings, prefill and decode on two rows
    with an image each, and a text-only prompt. A Qwen-VL model's rows run to the request's
    prompt length at least (past the chunks a hybrid text model's prefill scans in)."""
    import torch

    from onboard.hf_config import make_hf_config
    from onboard.parity.reference import build_reference, saved_checkpoint
    from onboard.parity.vision import HFVisionRunner, run_vision_scenarios, scenario_batches
    from onboard.targets.automodel.runner import construct, load_checked
    from onboard.tiny_vision import is_qwen_vl_tower

    hf_config = make_hf_config(request.tiny_config)
    reference = build_reference(hf_config, device=request.device)
    checkpoint = saved_checkpoint(reference)
    config = make_hf_config(request.tiny_config)
    config._attn_implementation = "eager"  # as the reference runs
    config.dtype = torch.float32
    model = construct(cls, config).to(request.device).eval()
    weights, proof = load_checked(model, checkpoint)
    if proof["problems"]:
        return [weights], proof
    if is_qwen_vl_tower(hf_config.vision_config):
        from onboard.parity.vision_qwen import QwenHFVisionRunner, qwen_vl_batches

        batch, prompt = qwen_vl_batches(hf_config, length=request.prompt_len)
        qwen = QwenGeneratedVisionRunner(model, request.device)
        checks = run_vision_scenarios(QwenHFVisionRunner(reference), qwen, batch, prompt)
        return [weights, *checks], proof
    batch, prompt = scenario_batches(reference, hf_config)
    candidate = GeneratedVisionRunner(model, request.device)
    checks = run_vision_scenarios(HFVisionRunner(reference), candidate, batch, prompt)
    return [weights, *checks], proof
