from __future__ import annotations

from onboard.analysis.ancestry import ancestry, chain, closest_per_role, role_chain


def test_modular_parents_per_role() -> None:
    roles = {role: link.parent_model for role, link in ancestry("qwen3").by_role().items()}
    assert roles["attention"] == "llama"
    assert roles["mlp"] == "gemma"
    assert roles["norm"] == "qwen2"
    link = ancestry("qwen3").by_role()["attention"]
    assert (link.child_class, link.parent_class) == ("Qwen3Attention", "LlamaAttention")
    assert link.where.startswith("modular_qwen3.py:")


def test_primary_chains_end_at_llama() -> None:
    assert chain("gemma3") == ("gemma3", "gemma2", "gemma", "llama")
    assert chain("qwen3_5")[-1] == "llama"
    assert role_chain("qwen3", "mlp") == ("gemma", "llama")


def test_copied_from_comments_for_models_without_modular_files() -> None:
    links = ancestry("falcon").parents
    assert links and all(link.where.startswith("modeling_falcon.py:") for link in links)


def test_closest_registered_ancestor_per_role() -> None:
    known = frozenset({"llama", "gemma", "qwen2"})
    assert closest_per_role("qwen3", known) == {
        "attention": "llama",
        "mlp": "gemma",
        "moe": "llama",
        "norm": "qwen2",
        "decoder_layer": "llama",
        "model": "llama",
    }
