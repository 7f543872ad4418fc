"""What a checkpoint's own code (2024 remote code) needs before a tiny model of it can run.

Remote code was written against the transformers of its day. Three of its habits break a tiny
build under transformers 5, and each is repaired here and said (``NOTES`` on the model):

- a weight created as ``torch.empty`` and never initialised, because the checkpoint always
  supplies it (norm weights): the build poisons uninitialised memory (NaN) so these are found
  exactly, then gives them the value the layer's own class would start from;
- ``_tied_weights_keys`` as a list, transformers 4's form (transformers 5's ``save_pretrained``
  calls ``.keys()`` on it): read as the mapping it stands for;
- the code itself raising (a removed transformers utility, a config field read the old way):
  reported as the checkpoint's failure, at its own file and line, never as onboard's.

RoPE tables computed in ``__init__`` need nothing: the tiny model is built with ``from_config``
on real memory, not on transformers' meta device, so ``__init__`` runs as written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from onboard.errors import RemoteCodeError
from onboard.failures import REMOTE_PACKAGE_PREFIX, failure

NOTES = "onboard_build_notes"  # attribute of a built model: what was repaired, one line each
# Classes whose listed tied keys were cleared (each import of a revision is cleared once), with
# the list, which every later build of the class ties again
_CLEARED: dict[type, list[str]] = {}


def is_remote(hf_config: Any) -> bool:
    return type(hf_config).__module__.startswith(REMOTE_PACKAGE_PREFIX)


def build_remote(build: Callable[[], Any], hf_config: Any) -> Any:
    """``build()`` with uninitialised memory poisoned; the model, its repairs in ``NOTES``.
    An exception from the checkpoint's code is a ``RemoteCodeError`` naming its line."""
    listed = _listed_tied_keys(type(hf_config).__module__.split(".")[0])
    try:
        with _poisoned_empty():
            model = build()
    except Exception as exc:
        raise RemoteCodeError(
            failure(exc, f"building a tiny {hf_config.model_type} model")
        ) from None
    notes = (*_initialise_left_empty(model), *_tied_keys_as_mapping(model, listed))
    setattr(model, NOTES, notes)
    return model


def notes_of(model: Any) -> tuple[str, ...]:
    return tuple(getattr(model, NOTES, ()))


@contextmanager
def _poisoned_empty() -> Iterator[None]:
    """``torch.empty`` fills floats with NaN while this lasts (torch's deterministic mode)."""
    import torch

    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = fill
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _initialise_left_empty(model: Any) -> tuple[str, ...]:
    """Parameters still NaN after the build: a norm's weight starts at one, a bias at zero,
    anything else as ``initializer_range`` says (the classes' usual starting points)."""
    import torch

    std = float(getattr(model.config, "initializer_range", 0.02) or 0.02)
    owners = dict(model.named_modules())
    left: list[str] = []
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not param.is_floating_point() or not torch.isnan(param).any():
                continue
            module_name, _, leaf = name.rpartition(".")
            owner = type(owners.get(module_name, model)).__name__
            if leaf == "bias":
                param.zero_()
            elif "norm" in owner.lower() and param.dim() == 1:
                param.fill_(1.0)
            else:
                param.normal_(0.0, std)
            left.append(name)
    if not left:
        return ()
    shown = ", ".join(left[:4]) + (f" and {len(left) - 4} more" if len(left) > 4 else "")
    return (
        f"the checkpoint's code leaves {len(left)} parameter(s) uninitialised (torch.empty; the "
        f"checkpoint supplies them): {shown}; the tiny model starts them at one (norm weights), "
        "zero (biases) or N(0, initializer_range)",
    )


def _listed_tied_keys(package: str) -> dict[type, list[str]]:
    """The checkpoint's model classes that list their tied keys, transformers 4's form; their
    attribute is cleared (in onboard's private import of the code) so transformers 5 can build
    them, and ``_tied_keys_as_mapping`` ties what the list stood for."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(f"{package}.") or module is None:
            continue
        for value in vars(module).values():
            keys = vars(value).get("_tied_weights_keys") if isinstance(value, type) else None
            if isinstance(keys, list | tuple):
                _CLEARED[value] = list(keys)
                value._tied_weights_keys = None
    return {cls: keys for cls, keys in _CLEARED.items() if cls.__module__.startswith(package)}


def _tied_keys_as_mapping(model: Any, listed: dict[type, list[str]]) -> tuple[str, ...]:
    """Each listed key becomes ``{key: input embedding}`` when the config ties the embeddings
    (and is tied), else nothing; set on the built instance."""
    notes = []
    tie = bool(getattr(model.config, "tie_word_embeddings", False))
    for module_name, module in model.named_modules():
        keys = next((k for cls, k in listed.items() if type(module) is cls), None)
        if keys is None:
            continue
        mapping = {key: _input_embedding_name(module) for key in keys} if tie else {}
        if mapping:
            module.get_output_embeddings().weight = module.get_input_embeddings().weight
        module._tied_weights_keys = mapping
        notes.append(
            f"{type(module).__name__}._tied_weights_keys is a list, transformers 4's form "
            f"({', '.join(map(str, keys))}); read as {mapping or '{}'} "
            f"(tie_word_embeddings={tie}){f' in {module_name}' if module_name else ''}"
        )
    return tuple(notes)


def _input_embedding_name(module: Any) -> str:
    embeddings = module.get_input_embeddings()
    for name, found in module.named_modules():
        if found is embeddings:
            return f"{name}.weight"
    raise RemoteCodeError(
        f"{type(module).__name__} ties its head to embeddings get_input_embeddings() does not "
        "hold as a submodule"
    )
