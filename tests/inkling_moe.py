"""A GLM-4-MoE decoder whose MoE blocks are Inkling's (transformers' ``InklingMoE``).

Inkling is the only architecture in transformers 5.18 whose router also scores the shared
experts (and multiplies every weight by a learned scale); ``inkling_text`` itself is refused for
its attention (short convolutions, a relative position bias), so its MoE block is proven
inside a decoder onboard generates end to end. Only the tests patch transformers so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.new_types import default_config_dir

# The Inkling MoE keys GLM-4-MoE's config lacks or sets otherwise (Inkling's defaults)
INKLING_MOE_KEYS = {"route_scale": 8.0, "n_shared_experts": 2}


def glm4_moe_with_inkling_moe(monkeypatch: pytest.MonkeyPatch, root: Path) -> Path:
    """Make transformers build GLM-4-MoE layers with Inkling's MoE block, and return a
    checkpoint folder of GLM-4-MoE's default config with Inkling's MoE keys."""
    from transformers.models.glm4_moe import modeling_glm4_moe as glm
    from transformers.models.inkling import modeling_inkling as inkling

    own = glm.Glm4MoePreTrainedModel._init_weights
    parts = (inkling.InklingExperts, inkling.InklingTopkRouter, inkling.InklingSharedExperts)

    def init_weights(self, module) -> None:
        """GLM-4-MoE initialises its own modules only: Inkling's as InklingPreTrainedModel does."""
        from transformers import initialization as init

        if not isinstance(module, parts):
            own(self, module)
            return
        for name, parameter in module.named_parameters(recurse=False):
            if name == "global_scale":
                init.ones_(parameter)
            else:
                init.normal_(parameter, mean=0.0, std=self.config.initializer_range)
        for buffer in module.buffers(recurse=False):
            init.zeros_(buffer)

    monkeypatch.setattr(glm, "Glm4MoeMoE", inkling.InklingMoE)
    monkeypatch.setattr(glm.Glm4MoePreTrainedModel, "_init_weights", init_weights)
    return default_config_dir("glm4_moe", root, **INKLING_MOE_KEYS)
