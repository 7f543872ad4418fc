"""Read what becomes the first layer's input: the token embeddings' scale, absolute positions
added to them (a learned table, or a sinusoidal one recognised by its values) and a norm of the
embeddings. The layout view names these modules ``model.embed_positions`` and
``model.embed_norm`` whatever HF calls them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from onboard.analysis.reader import Read, Reader
from onboard.analysis.whole_model import SCALE_CANDIDATES
from onboard.spec import PositionsSpec
from onboard.tiny import is_number


@dataclass(frozen=True)
class EmbeddingReading:
    scale: Literal["none", "sqrt_hidden"]
    positions: PositionsSpec | None
    norm: bool  # a norm of the embeddings (BLOOM)


class EmbeddingReader(Reader):
    def read(self) -> Read[EmbeddingReading]:
        scale = self.embedding_scale()
        return self.done(EmbeddingReading(scale, self.positions(), self.embedding_norm()))

    def positions(self) -> PositionsSpec | None:
        """Absolute positions (the layout view names the module ``model.embed_positions``): a
        learned table, or a sinusoidal one recognised by its values; the offset is the one HF's
        module adds (OPT, BioGPT, XGLM). The spec check then runs them."""
        if self.model is None or not hasattr(self.model.model, "embed_positions"):
            return None
        module = self.model.model.embed_positions
        offset = module.offset if isinstance(getattr(module, "offset", None), int) else 0
        if offset:
            self._source("text.positions", r"self\.offset = \d+")
        shape = self.probe.param_shape("model.embed_positions.weight")
        if shape is None:
            return self._sinusoidal_positions(module, offset)
        self._probe("text.positions", "model.embed_positions", f"{shape[0]} rows, offset {offset}")
        expected = self.tiny.max_position_embeddings + offset
        if shape[0] != expected:
            self._delta(
                "position table is not max_position_embeddings + offset rows",
                "model.embed_positions",
                f"{shape[0]} rows, expected {expected}",
            )
        return PositionsSpec(offset=offset)

    def _sinusoidal_positions(self, module: Any, offset: int) -> PositionsSpec | None:
        import torch

        from onboard.analysis.spec_check import sinusoidal_table

        table = getattr(module, "weights", None)
        where = f"model.embed_positions ({type(module).__name__})"
        if not isinstance(table, torch.Tensor) or table.dim() != 2:
            self._delta("positions module not understood", where, "no table of weights")
            return None
        if table.shape[1] % 2:
            self._delta("sinusoidal positions of an odd width", where, str(table.shape[1]))
            return None
        zero_row = getattr(module, "padding_idx", None)
        zero_row_key = None
        if isinstance(zero_row, int):
            zero_row_key = "pad_token_id"
            if getattr(self.tiny, zero_row_key, None) != zero_row:
                self._delta("a zeroed positions row no config key names", where, str(zero_row))
        for divisor in ("half-1", "half"):  # XGLM's frequencies, CTRL's
            expected = sinusoidal_table(torch.arange(table.shape[0]), table.shape[1], divisor)
            if isinstance(zero_row, int):
                expected[zero_row] = 0.0
            if torch.allclose(table.float(), expected, atol=1e-5):
                break
        else:
            self._delta("positions table is not the sinusoidal one onboard knows", where)
            return None
        self._probe(
            "text.positions",
            where,
            f"sinusoidal table, f_i = 10000 ** (-i / ({divisor} of {table.shape[1]})), "
            f"offset {offset}",
        )
        self._source("text.positions", r"torch\.cat\(\[(torch\.sin\(emb\)|sines), ")
        return PositionsSpec(
            offset=offset, kind="sinusoidal", zero_row_key=zero_row_key, divisor=divisor
        )

    def embedding_norm(self) -> bool:
        """BLOOM normalises the embeddings (the layout view names it ``model.embed_norm``); the
        spec check runs it with the layers' norm kind and epsilon."""
        present = self.probe.has_module("model.embed_norm")
        if present:
            kind = dict(self.probe.modules)["model.embed_norm"]
            self._probe("text.embedding_norm", "model.embed_norm", f"{kind} of the embeddings")
        return present

    def embedding_scale(self) -> str:
        measured = self.probe.embed_scale
        if measured is None:
            return "none"
        self._probe(
            "text.embedding_scale", "model.embed_tokens", f"output = weight x {measured:.6g}"
        )
        if math.isclose(measured, self.tiny.hidden_size**0.5, rel_tol=1e-5):
            self._source("text.embedding_scale", r"hidden_size\s*\*\*\s*0\.5")
            return "sqrt_hidden"
        for key, uses in SCALE_CANDIDATES.items():
            value = getattr(self.tiny, key, None)
            if ("embedding", "times") in uses and is_number(value):
                if math.isclose(measured, value, rel_tol=1e-5):
                    return "none"  # a config multiplier: _with_scales verifies it
                if math.isclose(measured, value * self.tiny.hidden_size**0.5, rel_tol=1e-5):
                    return "sqrt_hidden"
        self._delta("embedding scale not explained", "model.embed_tokens", f"x {measured:.6g}")
        return "none"
