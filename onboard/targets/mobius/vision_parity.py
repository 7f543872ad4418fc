"""Parity of a mobius vision-language class: three graphs built, weights proved, run in onnxruntime.

The ``vision-language`` task builds ``vision_encoder``, ``embedding`` and ``decoder`` from one
module; their initializer names keep the part's prefix, so one weight proof covers all three.
Checkpoint tensors HF's VLM never reads the result of (tower layers past the selected state, a
post norm the selection skips) may be left out, by name, and the proof lists them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from onboard.hf_config import make_hf_config
from onboard.parity.harness import split_cache
from onboard.parity.reference import build_reference, saved_checkpoint
from onboard.parity.report import Check, ParityReport, Status, TargetBug
from onboard.parity.vision import (
    HFVisionRunner,
    VisionBatch,
    VisionStep,
    run_vision_scenarios,
    scenario_batches,
)
from onboard.parity.vision_qwen import QwenHFVisionRunner, qwen_vl_batches
from onboard.targets.mobius.parity import (
    EXECUTION_PROVIDERS,
    blame_known_bugs,
    empty_state,
    first_line,
    library_versions,
    past_inputs,
    quiet_mobius,
    scratch_dir,
    weights_check,
)
from onboard.targets.mobius.token_block_bugs import causal_decoder_defects
from onboard.targets.mobius.vision_bugs import (
    grid_tower_defects,
    linear_patch_defects,
    llava_tile_defects,
    perceiver_defects,
    pixtral_defects,
    qwen3_5_defects,
    qwen_vl_defects,
)
from onboard.tiny_vision import is_qwen_vl_tower
from onboard.weightmap import WeightMapProof, prove

PARTS = ("vision_encoder", "embedding", "decoder")


@dataclass(frozen=True)
class VisionCase:
    """What one parity run of a vision-language class needs, passed to every re-run."""

    module_class: type
    tiny_config: Mapping[str, Any]
    unread: Collection[str] = ()  # checkpoint tensors HF never reads the result of (saved names)
    # The token types the mask reads (MergeSpec.token_blocks): the prompt carries them as the
    # processor makes them, and the decoder takes them (or input_ids, for image blocks)
    token_blocks: str = ""
    # (published, saved) prefixes: the checkpoint is fed under its published names
    published_aliases: tuple[tuple[str, str], ...] = ()
    # the least prompt length: past every chunk a hybrid text model's prefill scans in
    prompt_len: int = 0

    def with_text_config(self, text_config: Mapping[str, Any]) -> VisionCase:
        return replace(self, tiny_config={**self.tiny_config, "text_config": dict(text_config)})

    def published(self, name: str) -> str:
        for published, saved in self.published_aliases:
            if name.startswith(saved) and not name.startswith(published):
                return published + name.removeprefix(saved)
        return name


def run_vision_parity(
    case: VisionCase,
    *,
    model_type: str,
    generated: bool = True,
    bug_ids: tuple[str, ...] = (),
) -> ParityReport:
    """``generated``: the class is onboard's output; else the library's own, whose weight map a
    known defect may explain. A failure one of ``bug_ids`` (the text decoder's) explains, as its
    counterfactual on the tiny text config confirms, becomes xfail."""
    start = time.perf_counter()
    checks: list[Check] = []
    bugs: list[TargetBug] = []
    proof: WeightMapProof | None = None
    for provider in EXECUTION_PROVIDERS:
        provider_checks, provider_proof = _provider_checks(case, provider)
        proof = proof or provider_proof
        if any(c.status is Status.FAIL for c in provider_checks):

            def rerun(text_config: Mapping[str, Any], on: str) -> list[Check]:
                return _provider_checks(case.with_text_config(text_config), on)[0]

            provider_checks, confirmed = blame_known_bugs(
                case.tiny_config["text_config"], provider, provider_checks, bug_ids, rerun
            )
            bugs.extend(b for b in confirmed if b not in bugs)
        checks.extend(provider_checks)
    if not generated and proof is not None:
        bugs.extend(_weights_never_load(case.module_class, proof))
        bugs.extend(_deepstack_dropped(case.module_class, proof))
    if not generated:
        bugs.extend(causal_decoder_defects(case.module_class, case.token_blocks))
        bugs.extend(pixtral_defects(case.module_class, case.tiny_config))
        bugs.extend(llava_tile_defects(case.module_class, case.tiny_config))
        failed = {c.name for c in checks if c.status is Status.FAIL}
        bugs.extend(qwen3_5_defects(case.module_class, failed))
        bugs.extend(qwen_vl_defects(case.module_class, failed))
        bugs.extend(grid_tower_defects(model_type, case.module_class, case.tiny_config))
        bugs.extend(perceiver_defects(model_type, case.module_class, case.tiny_config))
        bugs.extend(linear_patch_defects(model_type, case.module_class, case.tiny_config))
    return ParityReport(
        target="mobius",
        model_type=model_type,
        model_class=case.module_class.__name__,
        checks=tuple(checks),
        weights=proof,
        bugs=tuple(bugs),
        versions=library_versions(),
        seconds=time.perf_counter() - start,
    )


def _provider_checks(case: VisionCase, provider: str) -> tuple[list[Check], WeightMapProof | None]:
    """Every vision check on one execution provider, and the weight proof."""
    hf_config = make_hf_config(case.tiny_config)
    reference = build_reference(hf_config)
    checkpoint = {case.published(k): v for k, v in saved_checkpoint(reference).items()}
    text = hf_config.text_config
    qwen_vl = is_qwen_vl_tower(getattr(hf_config, "vision_config", None))
    if qwen_vl:
        batch, prompt = qwen_vl_batches(hf_config, length=case.prompt_len)
    else:
        batch, prompt = scenario_batches(reference, hf_config, case.token_blocks)
    with scratch_dir() as workdir:
        try:
            unread = [case.published(name) for name in case.unread]
            sessions, proof = _build(
                case.module_class, hf_config, checkpoint, provider, Path(workdir), unread
            )
        except _WeightsFailed as exc:
            return [weights_check(provider, exc.proof)], exc.proof
        except Exception as exc:  # the graph does not build or load: a failed check
            detail = f"{type(exc).__name__}: {first_line(exc)}"
            return [Check("build", provider, Status.FAIL, detail=detail)], None
        candidate = OnnxVisionRunner(provider, sessions, text.hidden_size)
        hf_runner = QwenHFVisionRunner(reference) if qwen_vl else HFVisionRunner(reference)
        scenarios = run_vision_scenarios(hf_runner, candidate, batch, prompt)
    return [weights_check(provider, proof), *scenarios], proof


def _weights_never_load(module_class: type, proof: WeightMapProof) -> tuple[TargetBug, ...]:
    """Hybrid notes M1: mobius' LLaVA family renames no checkpoint tensor into its parts'
    initializer names, so not one weight reaches a graph (mobius logs it at INFO only)."""
    if proof.ok or any(row.placed for row in proof.rows):
        return ()
    return (
        TargetBug(
            "hybrid M1",
            f"{module_class.__name__}.preprocess_weights maps no checkpoint tensor into the "
            "decoder, vision_encoder or embedding graphs: the model runs on empty weights",
            f"{proof.checkpoint_tensors} checkpoint tensors, 0 placed in {proof.parameters} "
            "parameters (shared/notes/target-vlm-hybrid.md M1: mobius/models/llava.py:218-232)",
        ),
    )


def _deepstack_dropped(module_class: type, proof: WeightMapProof) -> tuple[TargetBug, ...]:
    """mobius' 3-model Qwen3-VL builds no DeepStack merger (its docstring: "not used in the
    3-model split"), so image prompts lose what they add to the first text layers."""
    dropped = [p for p in proof.problems if "deepstack_merger_list" in p]
    if not dropped or len(dropped) != len(proof.problems):
        return ()
    return (
        TargetBug(
            "qwen3-vl Q1",
            f"{module_class.__name__}'s vision encoder returns the merged features only and its "
            "decoder adds no DeepStack features: every DeepStack merger's weights are dropped "
            "and image prompts compute something else than HF's",
            f"{len(dropped)} DeepStack checkpoint tensors fill no parameter (mobius/models/"
            "qwen_vl.py:737-750, Qwen3VLVisionEncoderModel.forward keeps outputs[0])",
        ),
    )


def _tied_head(checkpoint: Mapping[str, Any], parameters: Mapping[str, Any]) -> tuple[str, ...]:
    """The decoder's head, when the checkpoint has none (HF ties it to the embeddings): the
    embedding graph and the decoder graph each need a copy of the table."""
    head = "decoder.lm_head.weight"
    if head in parameters and not any(k.endswith("lm_head.weight") for k in checkpoint):
        return (head,)
    return ()


class _WeightsFailed(Exception):
    def __init__(self, proof: WeightMapProof) -> None:
        super().__init__(proof.summary())
        self.proof = proof


def _build(
    module_class: type,
    hf_config: Any,
    checkpoint: Mapping[str, Any],
    provider: str,
    workdir: Path,
    unread: Collection[str],
) -> tuple[dict[str, Any], WeightMapProof]:
    import mobius
    import onnx_ir as ir
    import onnxruntime as ort
    from mobius._config_resolver import _config_from_hf

    config = _config_from_hf(
        hf_config.text_config, parent_config=hf_config, module_class=module_class
    )
    config = dataclasses.replace(config, dtype=ir.DataType.FLOAT)
    module = module_class(config)
    with quiet_mobius():
        package = mobius.build_from_module(
            module, config, module_class.default_task, execution_provider=provider
        )
    # Read before apply_weights, which folds transposes into new initializers.
    parameters = {
        name: tuple(int(d) for d in value.shape)
        for part in PARTS
        for name, value in package[part].graph.initializers.items()
        if value.const_value is None
    }
    tied = bool(getattr(config, "tie_word_embeddings", False))
    proof = prove(
        {k: tuple(v.shape) for k, v in checkpoint.items()},
        module.preprocess_weights,
        parameters,
        derived_ok=("decoder.lm_head.weight",) if tied else _tied_head(checkpoint, parameters),
        unread=unread,
    )
    if not proof.ok:
        raise _WeightsFailed(proof)
    with quiet_mobius():
        package.apply_weights(module.preprocess_weights(dict(checkpoint)))
        package.save(str(workdir), progress_bar=False, check_weights=False)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sessions = {
        part: ort.InferenceSession(
            str(workdir / part / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        for part in PARTS
    }
    return sessions, proof


DEEPSTACK = "deepstack_features"


def _tile_sizes(batch: VisionBatch) -> list[dict[str, np.ndarray]]:
    """What each image's run takes beside its pixels: tiles (LLaVA-NeXT) take the image's
    original size, ``image_sizes [1, 2]``; other images nothing."""
    if batch.tiles is None or batch.image_sizes is None:
        return [{} for _ in batch.images]
    return [{"image_sizes": size[None]} for size in batch.image_sizes]


class OnnxVisionRunner:
    """The three sessions chained as a host runs them: features, merged embeddings, decoder."""

    def __init__(self, provider: str, sessions: Mapping[str, Any], hidden_size: int) -> None:
        self.provider = provider
        self.sessions = sessions
        self.hidden_size = hidden_size
        decoder = sessions["decoder"]
        self._inputs = {i.name for i in decoder.get_inputs()}
        self._outputs = [o.name for o in decoder.get_outputs()]
        self._past = past_inputs({i.name: i for i in decoder.get_inputs()})
        # DeepStack (Qwen3-VL): the encoder's second output goes to the decoder, [mergers,
        # tokens, hidden], and no rows at a decode step or for a text-only prompt
        deepstack = next((i for i in decoder.get_inputs() if i.name == DEEPSTACK), None)
        self._no_deepstack = (
            np.zeros((deepstack.shape[0], 0, hidden_size), np.float32) if deepstack else None
        )

    def prefill(self, batch: VisionBatch) -> VisionStep:
        features = deepstack = None
        if batch.image_grid_thw is not None:  # Qwen-VL: every image's patches in one run
            features, *rest = self.sessions["vision_encoder"].run(
                None, {"pixel_values": batch.pixel_values, "image_grid_thw": batch.image_grid_thw}
            )
            deepstack = rest[0] if rest else None
        elif batch.image_patches is not None:  # no tower: every image's patches in one run
            encoder = self.sessions["vision_encoder"]
            features = encoder.run(None, {"image_patches": batch.image_patches})[0]
        elif batch.pixel_values is not None:
            # One image per run, as onnxruntime-genai feeds the vision encoder (mobius' own
            # gemma3 and pixtral encoders squeeze a batch of one), each cropped to its size
            encoder = self.sessions["vision_encoder"]
            features = np.concatenate(
                [
                    encoder.run(None, {"pixel_values": image, **sized})[0]
                    for image, sized in zip(batch.images, _tile_sizes(batch), strict=True)
                ]
            )
        rows = batch.input_ids.shape[0]
        empty = tuple(
            {name: empty_state(shape, rows) for name, shape in layer.items()}
            for layer in self._past
        )
        return self._run(batch, features, empty, deepstack)

    def decode(self, previous: VisionStep, batch: VisionBatch) -> VisionStep:
        return self._run(batch, None, previous.state)

    def _run(
        self, batch: VisionBatch, features: Any, past: Any, deepstack: Any = None
    ) -> VisionStep:
        image_features = (
            features if features is not None else np.zeros((0, self.hidden_size), np.float32)
        )
        (embeddings,) = self.sessions["embedding"].run(
            None, {"input_ids": batch.input_ids, "image_features": image_features}
        )
        feeds = {
            "inputs_embeds": embeddings,
            "attention_mask": batch.attention_mask,
            "position_ids": batch.position_ids,
            "input_ids": batch.input_ids,  # a decoder that finds image blocks takes them
            "token_type_ids": batch.token_type_ids,  # one that reads a prefix, these
            DEEPSTACK: deepstack if deepstack is not None else self._no_deepstack,
        }
        for i, layer in enumerate(past):
            feeds.update({f"past_key_values.{i}.{name}": value for name, value in layer.items()})
        feeds = {k: v for k, v in feeds.items() if k in self._inputs}
        results = dict(
            zip(self._outputs, self.sessions["decoder"].run(self._outputs, feeds), strict=True)
        )
        present = tuple(
            {name: results[f"present.{i}.{name}"] for name in layer}
            for i, layer in enumerate(self._past)
        )
        states = split_cache(present)[1]  # a hybrid's, beside any keys and values
        return VisionStep(results["logits"], features, embeddings, present, states)
