"""A causal-LM view of a text backbone that transformers runs only inside its VLM.

Qwen2.5-VL's ``qwen2_5_vl_text`` has a base model (``Qwen2_5_VLTextModel``) but no causal-LM
class: the VLM puts the head on it. The text analysis builds, probes and checks a causal LM, so
the view is that base model with a linear head, registered for the backbone's config class.
Nothing of HF's computation is replaced: the view's logits are ``lm_head(text_model(...))`` as the
VLM's are (``Qwen2_5_VLForConditionalGeneration.forward``), and on 2-D ``position_ids`` the text
model rotates every M-RoPE section by the same positions, which is what text-only input gets.

What the view cannot show (the M-RoPE sections, which only differ on image positions) the
vision analysis reads from the config and the parity run proves with image tokens.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["causal_lm_from_config", "is_causal_view", "register_causal_view"]

# config class -> its view. transformers' AutoModelForCausalLM.register skips its own config
# classes, so onboard keeps the table and builds through ``causal_lm_from_config``.
_VIEWS: dict[type, type] = {}


def register_causal_view(text_config: Any) -> bool:
    """Register a causal-LM view for ``text_config``'s type when transformers has none and its
    base model exists; False when there is nothing to view."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    config_class = type(text_config)
    if config_class in _VIEWS:
        return True
    try:
        base_class = MODEL_MAPPING[config_class]
    except KeyError:
        return False
    _VIEWS[config_class] = _view_class(base_class, config_class)
    return True


def is_causal_view(class_name: str) -> bool:
    """Whether ``class_name`` is one of the registered views, not a class transformers has (a
    generator that imports HF's causal LM builds the view's base model with a head instead)."""
    return any(view.__name__ == class_name for view in _VIEWS.values())


def causal_lm_from_config(hf_config: Any, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM.from_config``, or the registered view of a backbone without one."""
    from transformers import AutoModelForCausalLM

    view = _VIEWS.get(type(hf_config))
    if view is not None:
        return view._from_config(hf_config, **kwargs)
    return AutoModelForCausalLM.from_config(hf_config, **kwargs)


def _view_class(base_class: type, config_class: type) -> type:
    import torch.nn as nn
    from transformers import GenerationMixin
    from transformers.modeling_outputs import CausalLMOutputWithPast

    pretrained = base_class.__mro__[1]  # the family's PreTrainedModel

    class CausalView(pretrained, GenerationMixin):  # type: ignore[misc, valid-type]
        _tied_weights_keys: ClassVar[dict[str, str]] = {
            "lm_head.weight": "model.embed_tokens.weight"
        }

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.model = base_class(config)
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
            self.post_init()

        def forward(
            self,
            input_ids: Any = None,
            attention_mask: Any = None,
            position_ids: Any = None,
            past_key_values: Any = None,
            inputs_embeds: Any = None,
            use_cache: Any = None,
            **kwargs: Any,
        ) -> Any:
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=past_key_values,
                inputs_embeds=inputs_embeds,
                use_cache=use_cache,
                **kwargs,
            )
            return CausalLMOutputWithPast(
                logits=self.lm_head(out.last_hidden_state),
                past_key_values=out.past_key_values,
                hidden_states=out.hidden_states,
            )

    CausalView.config_class = config_class
    CausalView.__name__ = CausalView.__qualname__ = base_class.__name__.replace(
        "Model", "ForCausalLM"
    )
    return CausalView
