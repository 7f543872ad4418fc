"""mobius' static-cache build of a generated causal LM, as one more parity check.

``CausalLMTask(static_cache=True)`` (pre-allocated KV buffers, for onnxruntime-genai) builds only
models whose decoder layers hand a ``StaticCacheState`` to the library's attention, as its
``DecoderLayer`` does, or say they do (``_supports_static_cache``). Generated layers around
mobius' own attention do; a generated attention has no static-cache path, nor has a generated
text model whose forward needs the attention mask (it raises NotImplementedError): both are
said, not failed. The check builds the graph and checks that every cache buffer is read; it
does not run it.
"""

from __future__ import annotations

import warnings
from typing import Any

from onboard.parity.report import Check, Status

GENERATED_MODULES = "_onboard_generated."  # where onboard imports generated modules from
_LIBRARY_ATTENTIONS = ("Attention", "Qwen35Attention")
_CACHES = ("key_cache.", "value_cache.")


def static_cache_check(module_class: type, hf_config: Any, provider: str) -> Check | None:
    """The static-cache build of a generated text-generation class on ``provider``; None for
    the library's own classes and other tasks."""
    import mobius
    from mobius.tasks import CausalLMTask

    from onboard.targets.mobius.parity import DEFAULT_TASK, first_line, mobius_config, quiet_mobius

    if not module_class.__module__.startswith(GENERATED_MODULES):
        return None
    if getattr(module_class, "default_task", DEFAULT_TASK) != DEFAULT_TASK:
        return None
    config = mobius_config(module_class, hf_config)
    module = module_class(config)
    try:
        with quiet_mobius(), warnings.catch_warnings():
            # on the cpu EP mobius expects a GroupQueryAttention the static path never emits
            warnings.simplefilter("ignore", UserWarning)
            package = mobius.build_from_module(
                module, config, CausalLMTask(static_cache=True), execution_provider=provider
            )
    except NotImplementedError as exc:  # the generated text model says it has no such path
        return Check("static-cache", provider, Status.SKIP, detail=first_line(exc))
    except Exception as exc:
        detail = f"{type(exc).__name__}: {first_line(exc)}"
        if isinstance(exc, TypeError) and not _library_attention(module):
            return Check("static-cache", provider, Status.SKIP, detail=_NO_PATH)
        return Check("static-cache", provider, Status.FAIL, detail=detail)
    unread = _unread_caches(package["model"].graph)
    if unread:
        detail = f"the graph never reads {', '.join(unread)}: a layer drops the static cache"
        return Check("static-cache", provider, Status.FAIL, detail=detail)
    return Check("static-cache", provider, Status.PASS, detail="builds, reads every cache")


_NO_PATH = "the generated attention has no static-cache path (mobius' Attention has one)"


def _unread_caches(graph: Any) -> list[str]:
    """The static cache buffers the graph updates but never reads: a layer that took the cache
    and dropped it (the builder leaves such inputs out of the graph)."""
    read = {value.name for value in graph.inputs if value.uses()}
    updated = [o.name.removeprefix("updated_") for o in graph.outputs]
    return [name for name in updated if name.startswith(_CACHES) and name not in read]


def _library_attention(module: Any) -> bool:
    """Whether every decoder layer's attention is one of mobius' own (which take a static
    cache), so a failed static build is the generated layer's fault."""
    layers = getattr(getattr(module, "model", module), "layers", ())
    attentions = [getattr(layer, "self_attn", None) for layer in layers]
    return bool(attentions) and all(
        type(a).__name__ in _LIBRARY_ATTENTIONS and type(a).__module__.startswith("mobius.")
        for a in attentions
    )
