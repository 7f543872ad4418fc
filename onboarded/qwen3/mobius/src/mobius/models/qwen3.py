# Copyright (c) Microsoft Corporation.
# Licensed under the MIT License.
#
# onboard 0.1.0: generated from Qwen/Qwen3-0.6B (revision unknown), transformers 5.18.0
# modeling_qwen3.py sha256:849d80c7674793b3.
# Closest mobius class: CausalLMModel (registry key llama).
# Regenerate: onboard new Qwen/Qwen3-0.6B --target mobius --treat-as-new

"""Qwen3 causal language model.

Like :class:`~mobius.models.base.CausalLMModel`, with the changes listed below.

- q_norm / k_norm over each head before RoPE (modeling_qwen3.py:237)

Replicates HuggingFace's ``Qwen3ForCausalLM``.
"""

from __future__ import annotations

import dataclasses

from mobius._configs import CausalLMConfig
from mobius.models.base import CausalLMModel


@dataclasses.dataclass
class Qwen3Config(CausalLMConfig):
    """Qwen3 config, with every graph-changing flag set explicitly.

    Flags that mobius derives from model_type lists would not follow a new model_type, so each
    one is read from the HF config here, or fixed where the HF source fixes it.
    """

    @classmethod
    def from_transformers(cls, config, parent_config=None) -> Qwen3Config:
        base = super().from_transformers(config, parent_config)
        return dataclasses.replace(
            base,
            # q_norm / k_norm on each head (modeling_qwen3.py:237)
            attn_qk_norm=True,
            # q_norm / k_norm on each head (modeling_qwen3.py:237)
            attn_qk_norm_full=False,
            # q/k/v bias from config.attention_bias (modeling_qwen3.py:225)
            attn_qkv_bias=bool(config.attention_bias),
            # o_proj bias from config.attention_bias (modeling_qwen3.py:234)
            attn_o_bias=bool(config.attention_bias),
            # MLP bias always off (modeling_qwen3.py:78)
            mlp_bias=False,
            # MLP activation (config.json:hidden_act)
            hidden_act=config.hidden_act,
            # norm epsilon (config.json:rms_norm_eps)
            rms_norm_eps=config.rms_norm_eps,
            # lm_head tied to the embeddings or not (config.json:tie_word_embeddings)
            tie_word_embeddings=bool(config.tie_word_embeddings),
            # RoPE rotates halves (config.json:rope_parameters)
            rope_interleave=False,
            # no layer slides
            sliding_window=None,
        )


class Qwen3CausalLMModel(CausalLMModel):
    """Qwen3 causal LM.

    Replicates HuggingFace's ``Qwen3ForCausalLM``.
    """

    config_class = Qwen3Config
