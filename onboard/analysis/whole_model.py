"""Readings only the whole tiny model tells: config multipliers and where they enter, the
embeddings scaled after their module (CTRL), the final norm reused on the embeddings (NanoChat).

Each candidate reading is kept when, and only when, the whole tiny model then computes what HF
computes and did not without it. A spec with other deltas cannot be run: its multipliers are
then reported, not guessed.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
from collections.abc import Sequence

from onboard.analysis.reader import Context, Read, Reader
from onboard.analysis.source_lines import find_line
from onboard.spec import ScaleSpec, TextDecoderSpec
from onboard.tiny import MULTIPLIER_KEYS, is_number

# How each multiplier key may enter the computation, most likely first; the analysis keeps the
# combination with which the whole tiny model matches HF (None: HF does not use the key).
SCALE_CANDIDATES: dict[str, tuple[tuple[str, str] | None, ...]] = {
    "embedding_multiplier": (("embedding", "times"), None),
    "scale_emb": (("embedding", "times"), None),
    "embedding_scale": (("embedding", "times"), None),
    "residual_multiplier": (("residual", "times"), None),
    "scale_depth": (("residual", "times_over_sqrt_layers"), ("residual", "times"), None),
    "logits_scaling": (("logits", "divided_by"), ("logits", "times"), None),
    "logit_scale": (("logits", "times"), ("logits", "divided_by"), None),
}


class WholeModelReader(Reader):
    """``read(text)``: the spec with the readings the whole model proves; ``blocked`` when other
    deltas leave the spec incomplete (nothing is run then)."""

    def __init__(self, context: Context, *, blocked: bool) -> None:
        super().__init__(context)
        self.blocked = blocked

    def read(self, text: TextDecoderSpec) -> Read[TextDecoderSpec]:
        return self.done(self._with_whole_model_reading(self._with_scales(text)))

    def _with_whole_model_reading(self, text: TextDecoderSpec) -> TextDecoderSpec:
        """Readings only the whole tiny model tells, each kept when, and only when, the model
        then matches HF and did not without it: embeddings x sqrt(hidden) after the embedding
        module (CTRL), where the probe does not see it; with norms that learn nothing, the final
        norm applied to the embeddings too (NanoChat: one module, called twice)."""
        if self.blocked or self.deltas or self.model is None:
            return text
        readings = []
        if text.embedding_scale == "none":
            readings.append(
                (
                    dataclasses.replace(text, embedding_scale="sqrt_hidden"),
                    "text.embedding_scale",
                    "matches HF only with the embeddings x sqrt(hidden)",
                    r"(inputs_embeds|hidden_states) \*=? ?(np|math|torch)\.sqrt\(",
                )
            )
        if not text.norm.weight and not text.embedding_norm:
            readings.append(
                (
                    dataclasses.replace(text, embedding_norm=True),
                    "text.embedding_norm",
                    "matches HF only with the embeddings normed",
                    r"norm\(hidden_states\).*before the layers",
                )
            )
        if not readings:
            return text
        from onboard.analysis.spec_check import find_mismatches
        from onboard.tiny_model import perturb

        model = perturb(copy.deepcopy(self.model))
        plain = find_mismatches(text, model, self.tiny)
        if not plain or any(m.module != "model" for m in plain):  # fine, or another module
            return text
        for reading, path, observation, source in readings:
            if find_mismatches(reading, model, self.tiny) == []:
                self._probe(path, "model", observation)
                self._source(path, source)
                return reading
        return text

    def _with_scales(self, text: TextDecoderSpec) -> TextDecoderSpec:
        """Config multipliers, verified: each present key's known uses are tried, and the one
        combination with which the whole tiny model computes what HF computes is kept."""
        keys = [
            k
            for k in MULTIPLIER_KEYS
            if is_number(getattr(self.tiny, k, None))
            and (text.attention is None or k != text.attention.scale_key)
        ]
        if not keys:
            return text
        if self.blocked or self.model is None:  # an incomplete spec cannot be run: report them
            self._check_multipliers(keys)
            return text
        from onboard.analysis.spec_check import find_mismatches
        from onboard.tiny_model import perturb

        model = perturb(copy.deepcopy(self.model))
        options = [SCALE_CANDIDATES.get(k, (None,)) for k in keys]
        # Every key's options end with None, so the last combination is "no multiplier": its
        # mismatches are kept for the report below.
        plain = None
        for combination in itertools.product(*options):
            scales = tuple(
                ScaleSpec(use[0], key, use[1])
                for key, use in zip(keys, combination, strict=True)
                if use is not None
            )
            if len({s.site for s in scales}) < len(scales):
                continue
            candidate = dataclasses.replace(text, scales=scales)
            plain = find_mismatches(candidate, model, self.tiny)
            if plain == []:
                self._record_scales(keys, scales)
                return candidate
        # Only a mismatch of the whole model or the embeddings is the multipliers' doing; a
        # module mismatch is reported by the full spec check.
        if plain and all(m.module in ("model", "model.embed_tokens") for m in plain):
            for key in keys:
                found = find_line(self.files, rf"\b{re.escape(key)}\b")
                self._delta(
                    f"config multiplier {key}: no known use of it reproduces HF",
                    found.where if found else f"config.json:{key}",
                    found.detail if found else repr(getattr(self.cfg, key, None)),
                )
        return text

    def _record_scales(self, keys: list[str], scales: tuple[ScaleSpec, ...]) -> None:
        used = {s.key for s in scales}
        for scale in scales:
            path = f"text.scales.{scale.site}"
            self._config(path, scale.key, getattr(self.cfg, scale.key, None))
            self._source(path, rf"\b{re.escape(scale.key)}\b")
            self._probe(path, "model", f"{scale.describe()}: the tiny model then matches HF")
        for key in keys:
            if key not in used:
                self._probe("text.scales", f"config.json:{key}", "HF does not use it (tiny check)")

    def _check_multipliers(self, keys: Sequence[str]) -> None:
        """Where other deltas keep the spec from running, no multiplier can be verified: each
        is reported (even at 1.0, other checkpoints of the architecture may set it)."""
        for key in keys:
            value = getattr(self.cfg, key, None)
            self._delta(
                f"config multiplier {key} (not checked: the spec is incomplete)",
                f"config.json:{key}",
                repr(value),
            )
