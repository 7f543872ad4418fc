"""mobius' own VLM decoders whose mask cannot see the token types HF's mask reads.

HF widens the causal mask by ``token_type_ids`` (``MergeSpec.token_blocks``): Gemma 3's image
blocks, PaliGemma's bidirectional prefix. mobius registers ``gemma3`` to ``Gemma3MultiModalModel``
and ``paligemma`` to ``LLaVAModel``, whose decoder graphs take neither ``token_type_ids`` nor
``input_ids`` (the decoder's ``forward`` is read, so a mobius that adds them is no longer
blamed): every image prompt attends causally where HF's does not. The generated module's decoder
takes what its rule needs; breaking its blocks the same way fails parity (the tests' sabotage).
"""

from __future__ import annotations

import inspect
import re
import sys

from onboard.parity.report import TargetBug

# What a decoder must take to rebuild HF's blocks (or be given them)
_READS_TYPES = {"token_type_ids", "input_ids", "block_sequence_ids"}
_DECODER = re.compile(r"self\.decoder = (\w+)\(")
# The id and HF's rule, per rule
_RULES = {
    "images": (
        "hybrid M13",
        "each image's placeholders attend to each other both ways "
        "(transformers/models/gemma3/modeling_gemma3.py get_block_sequence_ids_for_mask)",
    ),
    "prefix": (
        "paligemma B1",
        "the tokens typed 0, the image and the prompt, attend to each other both ways "
        "(transformers/models/paligemma/modeling_paligemma.py, torch.where(token_type_ids == 0, "
        "0, -1)); the generated module with its prefix made causal: prefill 1.08 off, decode "
        "0.12, text-only 1.05 (google/paligemma-3b-pt-224's shape, tiny)",
    ),
}


def causal_decoder_defects(module_class: type, token_blocks: str) -> tuple[TargetBug, ...]:
    """The defect of ``module_class`` when HF's mask reads token types (``token_blocks``) and
    the class's decoder takes nothing to read them from."""
    if not token_blocks:
        return ()
    decoder = _decoder_class(module_class)
    if decoder is None:
        return ()
    taken = set(inspect.signature(decoder.forward).parameters)
    if taken & _READS_TYPES:
        return ()
    bug_id, rule = _RULES[token_blocks]
    path = inspect.getsourcefile(decoder) or ""
    line = inspect.getsourcelines(decoder.forward)[1]
    where = f"mobius/{path.rsplit('/mobius/', 1)[-1]}:{line}"
    return (
        TargetBug(
            bug_id,
            f"{module_class.__name__}'s decoder takes no token_type_ids or input_ids, so its "
            f"mask is causal on every image prompt, where HF's is not: {rule.split(' (')[0]}",
            f"{where} {decoder.__name__}.forward({', '.join(sorted(taken - {'self', 'op'}))}) "
            f"vs HF: {rule}",
        ),
    )


def _decoder_class(module_class: type) -> type | None:
    """The class ``module_class.__init__`` builds its decoder from (``self.decoder = X(...)``)."""
    try:
        source = inspect.getsource(module_class.__init__)
    except (OSError, TypeError):
        return None
    found = _DECODER.search(source)
    module = sys.modules.get(module_class.__module__)
    return getattr(module, found.group(1), None) if found and module else None
