"""Recognise HF's training-time router behaviour, which the generated AutoModel MoE reproduces.

HF MoE models switch two behaviours on from the config: with ``output_router_logits`` the causal
LM adds ``router_aux_loss_coef * load_balancing_loss_func(router logits, ..., attention_mask)``
to its loss, and with ``router_jitter_noise`` (Mixtral) the sparse block scales its input by
uniform noise in training. AutoModel's ``Gate`` has neither in HF's form: its auxiliary loss is
per layer (Switch's f * P over one layer, divided by top-k), where HF pools the router
statistics of every sparse layer into one loss, and it has no jitter. The generated model writes
both the way HF computes them, but only where HF's source reads exactly as recognised here;
anything else stays a refused switch (``design.SWITCHES``).
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from typing import Any

from onboard.targets.automodel.hf_facts import flat, method_source

AUX_LOSS = "output_router_logits"
JITTER = "router_jitter_noise"
LOSS_FUNCTION = "load_balancing_loss_func"
LOSS_PARAMETERS = ["gate_logits", "num_experts", "top_k", "attention_mask"]


@dataclass(frozen=True)
class RouterTraining:
    """What the generated MoE does in training as HF does; "" where HF's source has no such
    behaviour or one not recognised (then its config flag stays refused)."""

    aux_loss: str = ""  # modeling_x.py:N where HF's causal LM adds the load-balancing loss
    coef_key: str = ""  # the config key of its coefficient (router_aux_loss_coef)
    jitter: str = ""  # modeling_x.py:N where HF's sparse block scales its input by noise

    @property
    def handled(self) -> tuple[str, ...]:
        """The config switches the generated code implements."""
        return tuple(k for k, on in ((AUX_LOSS, self.aux_loss), (JITTER, self.jitter)) if on)


def router_training(
    module_path: str,
    source_file: str,
    classes: dict[str, str],
    keys: tuple[str, str],
    aliases: dict[str, str] | None = None,
) -> RouterTraining:
    """HF's router training behaviour for one architecture.

    ``classes``: role -> HF class name (causal_lm, pretrained, sparse_block, router); ``keys``:
    the config keys of the routed-expert count and top-k, which HF's loss must read too, under
    these names or ones the config class' ``aliases`` (its ``attribute_map``) maps to them.
    """
    module = importlib.import_module(module_path)
    found = {role: getattr(module, name, None) for role, name in classes.items()}
    aux = _aux_loss(module, found, keys, aliases or {})
    jitter = _jitter_line(found.get("sparse_block"))
    return RouterTraining(
        aux_loss=f"{source_file}:{aux[0]}" if aux else "",
        coef_key=aux[1] if aux else "",
        jitter=f"{source_file}:{jitter}" if jitter else "",
    )


def _aux_loss(
    module: Any, found: dict[str, Any], keys: tuple[str, str], aliases: dict[str, str]
) -> tuple[int, str] | None:
    """(line, coefficient key) where HF's causal LM adds the load-balancing loss, or None.

    Recognised: the module's ``load_balancing_loss_func(gate_logits, num_experts, top_k,
    attention_mask)``, called by the causal LM on ``outputs.router_logits`` with the expert
    count and top-k read from ``keys`` and the 2-D ``attention_mask``, the coefficient times it
    added to the loss, and ``router_logits`` recorded as the router's raw logits.
    """
    function, causal_lm = getattr(module, LOSS_FUNCTION, None), found.get("causal_lm")
    if function is None or causal_lm is None:
        return None
    if list(inspect.signature(function).parameters) != LOSS_PARAMETERS:
        return None
    init, forward = flat(method_source(causal_lm.__init__)), flat(method_source(causal_lm.forward))
    count, top_k = keys
    coef = re.search(r"self\.router_aux_loss_coef = config\.(\w+)\b", init)
    for name, key in (("num_experts", count), ("num_experts_per_tok", top_k)):
        read = re.search(rf"self\.{name} = config\.(\w+)\b", init)
        if read is None or aliases.get(read.group(1), read.group(1)) != aliases.get(key, key):
            return None
    if coef is None:
        return None
    call = (
        f"aux_loss = {LOSS_FUNCTION}(outputs.router_logits, self.num_experts, "
        "self.num_experts_per_tok, attention_mask)"
    )
    if call not in forward or "loss += self.router_aux_loss_coef * aux_loss" not in forward:
        return None
    if not _records_raw_logits(found.get("pretrained"), found.get("router")):
        return None
    lines, start = inspect.getsourcelines(causal_lm.forward)
    offset = next(i for i, line in enumerate(lines) if f"{LOSS_FUNCTION}(" in line)
    return start + offset, coef.group(1)


def _records_raw_logits(pretrained: Any, router: Any) -> bool:
    """Whether HF records ``router_logits`` as the router's first output, ``F.linear(hidden,
    weight)`` and nothing more: the logits AutoModel's Gate computes from the same weight."""
    if pretrained is None or router is None:
        return False
    recorder = (getattr(pretrained, "_can_record_outputs", None) or {}).get("router_logits")
    if getattr(recorder, "target_class", None) is not router or getattr(recorder, "index", 0):
        return False
    forward = method_source(router.forward)
    returned = re.search(r"^\s*return (\w+)\b", forward, re.MULTILINE)
    if returned is None:
        return False
    name = returned.group(1)
    assignments = re.findall(rf"^\s*{name}\s*(?:[-+*/]?=)(.*)$", forward, re.MULTILINE)
    raw = r"\s*F\.linear\(hidden_states(\.to\(self\.weight\.dtype\))?, self\.weight\)\s*(#.*)?"
    return len(assignments) == 1 and re.fullmatch(raw, assignments[0]) is not None


def _jitter_line(block: Any) -> int | None:
    """The line where HF's sparse block scales its input by U(1 - j, 1 + j) in training, j read
    from ``config.router_jitter_noise``, before anything else reads the input; else None."""
    if block is None:
        return None
    attribute = re.search(rf"self\.(\w+) = config\.{JITTER}\b", method_source(block.__init__))
    if attribute is None:
        return None
    name = attribute.group(1)
    lines, start = inspect.getsourcelines(block.forward)
    body = flat("".join(lines))
    jitter = (
        f"if self.training and self.{name} > 0: hidden_states *= torch.empty_like(hidden_states)"
        f".uniform_(1.0 - self.{name}, 1.0 + self.{name})"
    )
    at = body.find(jitter)
    # only reading the shape may come first: the router and experts must see the jittered input
    before = body[:at]
    if at < 0 or re.search(r"self\.\w+\(|hidden_states =", before):
        return None
    offset = next(i for i, line in enumerate(lines) if ".uniform_(" in line)
    return start + offset
