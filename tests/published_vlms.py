"""Published values for VLMs whose transformers default config cannot run as it is (a tower
whose patch grid the projector cannot fold, a merger narrower or wider than the text, no M-RoPE
sections) or is not the published model's (PaliGemma): the re-onboarding benchmark and the tests
build the default config with these."""

from __future__ import annotations

from pathlib import Path

from tests.new_types import default_config_dir

# Tower keys: the published towers where the default one cannot be built at its real sizes
VISION_OVERRIDES = {
    # 224 / 16 = 14 patches a side cannot pool to mm_tokens_per_image 256 (16 x 16); Gemma 3
    # 4B's tower sees 896-pixel images in 14-pixel patches
    "gemma3": {"image_size": 896, "patch_size": 14},
    "shieldgemma2": {"image_size": 896, "patch_size": 14},
    # 224 / 32 = 7 patches a side, which the pixel shuffle's scale factor 2 cannot fold (HF's
    # reshape fails); Idefics3-8B-Llama3's tower sees 364-pixel tiles in 14-pixel patches (26)
    "idefics3": {"image_size": 364, "patch_size": 14},
    # the same 7 patches; SmolVLM-Instruct's tower sees 384-pixel tiles in 14-pixel patches,
    # folded 3 x 3 (scale_factor below): 81 tokens a tile
    "smolvlm": {"image_size": 384, "patch_size": 14},
    # 384 / 14 = 27 patches a side, which the downsample_factor 2 cannot fold; Aya Vision 8B's
    # tower sees 364-pixel tiles in 14-pixel patches (26)
    "aya_vision": {"image_size": 364, "patch_size": 14},
    # the merger's width is the text's in every published checkpoint (the default's 3584
    # against 8192 cannot run); Qwen2-VL-72B's tower is 8192 wide
    "qwen2_vl": {"hidden_size": 8192},
    # the same for 3584 against 2048; Qwen3-VL-30B-A3B's merger is 2048 wide
    "qwen3_vl_moe": {"out_hidden_size": 2048},
    # the same for 3584 against 4096 (Qwen3.5-9B's merger is 4096 wide) and against 2048
    # (Qwen3.5-35B-A3B's is 2048 wide)
    "qwen3_5": {"out_hidden_size": 4096},
    "qwen3_5_moe": {"out_hidden_size": 2048},
    # google/paligemma-3b-pt-224's SigLIP So400m tower: 4304 wide MLPs (the default's 4096)
    "paligemma": {"intermediate_size": 4304},
    # the aligner projects to the text's width in every published checkpoint (the default's
    # 2048 against 4096 cannot run); Janus-Pro-7B's projects to 4096
    "janus": {"projection_dim": 4096},
}
_QWEN3_5_ROPE = {
    "rope_type": "default",
    "rope_theta": 10000000,
    "partial_rotary_factor": 0.25,
    "mrope_section": [11, 11, 10],
    "mrope_interleaved": True,
}
_GLM4V_ROPE = {
    "rope_type": "default",
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.5,
    "mrope_section": [8, 12, 12],
}
# Text-config keys of the published checkpoints that go with a tower above: the M-RoPE
# sections, which the default configs leave to the rotary module's fallback
VISION_TEXT_OVERRIDES = {
    "qwen2_vl": {  # Qwen2-VL-72B-Instruct
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1000000.0,
            "mrope_section": [16, 24, 24],
        }
    },
    "qwen3_vl_moe": {  # Qwen3-VL-30B-A3B-Instruct
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 5000000,
            "mrope_section": [24, 20, 20],
            "mrope_interleaved": True,
        }
    },
    # Qwen3.5-9B and Qwen3.5-35B-A3B: the default sets no sections (HF's rotary module falls back
    # to [11, 11, 10] at modeling_qwen3_5.py:159, which the generated config cannot read)
    "qwen3_5": {"rope_parameters": _QWEN3_5_ROPE},
    "qwen3_5_moe": {"rope_parameters": _QWEN3_5_ROPE},
    # google/paligemma-3b-pt-224: Gemma 2B with 64 more rows than the tokenizer's 257152
    "paligemma": {"vocab_size": 257216},
    # GLM-4.1V-9B-Thinking turns half of each 128-wide head; the default config turns all of it
    # against HF's fallback sections [8, 12, 12], which cover half (HF's split_with_sizes fails)
    "glm4v": {"rope_parameters": {**_GLM4V_ROPE}},
    # GLM-4.5V: 128-wide heads (the default's 4096 / 96 is not a width HF can run)
    "glm4v_moe": {"head_dim": 128, "rope_parameters": {**_GLM4V_ROPE}},
}
# Composite-config keys that go with a tower above (the published model's)
VISION_TOP_OVERRIDES = {
    "smolvlm": {"scale_factor": 3},
    # transformers maps these types to a text-only causal LM as well, which default_config_dir
    # names first; the published checkpoints name the VLM class
    "qwen3_5": {"architectures": ["Qwen3_5ForConditionalGeneration"]},
    "qwen3_5_moe": {"architectures": ["Qwen3_5MoeForConditionalGeneration"]},
    # google/paligemma-3b-pt-224's placeholder, the first id past the tokenizer's text tokens
    "paligemma": {"image_token_index": 257152},
    # Janus-Pro-7B's image-generation heads, at the text's width as the aligner above
    "janus": {"vq_config": {"projection_dim": 4096, "image_token_embed_dim": 4096}},
}


def published_vlm_dir(model_type: str, root: Path) -> Path:
    """transformers' default config for ``model_type`` with the published values above."""
    return default_config_dir(
        model_type,
        root,
        vision_config=VISION_OVERRIDES.get(model_type),
        text_config=VISION_TEXT_OVERRIDES.get(model_type),
        **VISION_TOP_OVERRIDES.get(model_type, {}),
    )
