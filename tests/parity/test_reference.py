"""The HF reference runner, with and without a KV cache."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from transformers.modeling_outputs import CausalLMOutputWithPast

from onboard.analysis import analyse
from onboard.hf_config import make_hf_config
from onboard.parity.harness import PROMPT_LEN, Batch, prompt_batch
from onboard.parity.reference import HFRunner, _Seen, build_reference
from onboard.source import load_source
from tests.new_types import default_config_dir


def _runner(model_type: str, tmp_path) -> HFRunner:
    analysis = analyse(load_source(str(default_config_dir(model_type, tmp_path))))
    return HFRunner(build_reference(make_hf_config(analysis.tiny.config)))


def _next(step, prompt: Batch) -> Batch:
    token = step.logits[:, -1:].argmax(-1).astype(np.int64)
    mask = np.concatenate([prompt.attention_mask, np.ones((1, 1), dtype=np.int64)], axis=1)
    return Batch(token, mask, np.full((1, 1), PROMPT_LEN, dtype=np.int64))


def test_a_model_without_a_cache_reruns_every_token(tmp_path) -> None:
    """OpenAI GPT returns no cache: the step is empty of keys and values and decodes by rerunning
    the prompt and the new token."""
    runner = _runner("openai-gpt", tmp_path)
    prompt = prompt_batch(runner.model.config.vocab_size)
    step = runner.prefill(prompt)
    assert step.kv == () and isinstance(step.state, _Seen)
    decoded = runner.decode(step, _next(step, prompt))
    assert decoded.logits.shape[1] == 1 and decoded.state.input_ids.shape[1] == PROMPT_LEN + 1


def test_rerunning_decodes_as_the_cache_does(tmp_path) -> None:
    """The rerun path gives a cached model (Llama) the logits its cache gives."""
    runner = _runner("llama", tmp_path)
    prompt = prompt_batch(runner.model.config.vocab_size)
    step = runner.prefill(prompt)
    batch = _next(step, prompt)
    cached = runner.decode(step, batch)
    seen = dataclasses.replace(step, state=_Seen(prompt.input_ids, prompt.position_ids))
    rerun = runner.decode(seen, batch)
    np.testing.assert_allclose(rerun.logits, cached.logits, atol=1e-5)
    assert not np.allclose(rerun.logits, step.logits[:, -1:], atol=1e-3)  # a new position


def test_mamba_decodes_as_generate_does(tmp_path) -> None:
    """HF's Mamba mixer multiplies its one new position by the whole mask, which broadcasts it
    over every past position; generate drops the mask in decode steps, and so does the
    reference (for Mamba, not for Llama). Its cached decode then matches a rerun."""
    runner = _runner("mamba", tmp_path)
    prompt = prompt_batch(runner.model.config.vocab_size)
    step = runner.prefill(prompt)
    batch = _next(step, prompt)
    cached = runner.decode(step, batch)
    assert runner._decode_mask_dropped is True
    seen = dataclasses.replace(step, state=_Seen(prompt.input_ids, prompt.position_ids))
    np.testing.assert_allclose(runner.decode(seen, batch).logits, cached.logits, atol=1e-5)
    llama = _runner("llama", tmp_path)
    llama.decode(llama.prefill(prompt), batch)
    assert llama._decode_mask_dropped is False


def test_a_prompt_crosses_every_fixed_chunk(tmp_path) -> None:
    """HF's DeltaNet prefill runs in chunks of 64 whatever the config: Qwen3-Next's parity
    prompt crosses one; a model without such a mixer keeps the short prompt."""
    from onboard.parity.harness import PROMPT_LEN, scenarios_for
    from tests.analyses import analysis_of

    deltanet = scenarios_for(analysis_of("Qwen/Qwen3-Next-80B-A3B-Instruct").spec.text)
    assert deltanet.prompt_len == 64 + PROMPT_LEN and deltanet.compare_kv
    assert scenarios_for(analysis_of("Qwen/Qwen3-0.6B").spec.text).prompt_len == PROMPT_LEN


class _Cacheless(torch.nn.Module):
    """A training forward, as AutoModel's own classes have: no cache argument, no cache back."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model, self.config = model, model.config

    def forward(self, input_ids, *, attention_mask=None, position_ids=None, **kwargs):
        out = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        return CausalLMOutputWithPast(logits=out.logits)


class _DropsCache(_Cacheless):
    """Takes a cache argument and still returns none: a cache it should have kept."""

    def forward(
        self, input_ids, *, attention_mask=None, position_ids=None, past_key_values=None, **kwargs
    ):
        return super().forward(input_ids, attention_mask=attention_mask, position_ids=position_ids)


def test_a_forward_without_a_cache_argument_skips_only_the_cache_check(tmp_path) -> None:
    from onboard.parity.harness import run_scenarios
    from onboard.parity.report import Status

    reference = _runner("llama", tmp_path)
    vocab = reference.model.config.vocab_size
    checks = {
        c.name: c for c in run_scenarios(reference, HFRunner(_Cacheless(reference.model)), vocab)
    }
    assert checks["kv-cache"].status is Status.SKIP
    assert all(c.status is Status.PASS for n, c in checks.items() if n != "kv-cache")
    dropped = {
        c.name: c for c in run_scenarios(reference, HFRunner(_DropsCache(reference.model)), vocab)
    }
    assert dropped["kv-cache"].status is Status.FAIL
