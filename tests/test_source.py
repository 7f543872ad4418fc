from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from onboard.errors import InvalidConfigError, ModelNotFoundError
from onboard.source import Origin, load_source, read_config
from tests.hub_cache import fixture_config


def test_local_directory_and_config_path() -> None:
    directory = fixture_config("Qwen/Qwen3-0.6B").parent
    for given in (directory, directory / "config.json"):
        source = load_source(str(given))
        assert source.origin is Origin.LOCAL
        assert source.model_type == "qwen3"
        assert source.architecture == "Qwen3ForCausalLM"
        assert source.revision is None


def test_hf_cache_in_real_layout(seeded) -> None:
    commit = seeded("Qwen/Qwen3-0.6B")
    source = load_source("Qwen/Qwen3-0.6B")
    assert source.origin is Origin.CACHE
    assert source.revision == commit
    assert source.config_path.parent.name == commit
    assert not source.notices


def test_hf_source_files_come_from_installed_transformers(seeded) -> None:
    seeded("google/gemma-3-1b-it")
    source = load_source("google/gemma-3-1b-it")
    names = [f.name for f in source.hf_files]
    assert "modeling_gemma3.py" in names and "modular_gemma3.py" in names
    modeling = source.hf_file("modeling_")
    assert modeling is not None and "class Gemma3Attention" in modeling.text
    assert len(modeling.sha256) == 64


def test_bundled_snapshot_used_offline_with_notice(hf_cache) -> None:
    source = load_source("Qwen/Qwen3-0.6B")
    assert source.origin is Origin.BUNDLED
    assert source.revision is None
    assert any("bundled snapshot" in n and "HF_HUB_OFFLINE" in n for n in source.notices)


def _readme_hub_ids() -> set[str]:
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    found = re.findall(r"onboard (?:new|inspect|parity|diff) ([\w.-]+/[\w.-]+)(?![\w./-])", readme)
    return {i for i in found if not i.startswith(("path", "out", "my-org"))}


def test_every_hub_id_in_the_readme_resolves_offline(hf_cache) -> None:
    """A newcomer without network can run every README example that names a Hub id."""
    ids = _readme_hub_ids()
    assert {"google/gemma-3-1b-it", "mistralai/Mistral-7B-v0.1", "Qwen/Qwen3-0.6B"} <= ids
    for repo_id in sorted(ids):
        assert load_source(repo_id).origin is Origin.BUNDLED, repo_id


def test_cache_wins_over_bundled_snapshot(seeded) -> None:
    seeded("Qwen/Qwen3-0.6B")
    assert load_source("Qwen/Qwen3-0.6B").origin is Origin.CACHE


def test_unknown_id_offline_is_a_clear_error(hf_cache) -> None:
    with pytest.raises(ModelNotFoundError, match=r"not in the HF cache and HF_HUB_OFFLINE is set"):
        load_source("nobody/no-such-model")


@pytest.mark.parametrize("bad", ["../../no/such/model", "a/b/c", "", "org/"])
def test_malformed_ids_rejected(hf_cache, bad: str) -> None:
    with pytest.raises(ModelNotFoundError):
        load_source(bad)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"hidden_size": 8}', "no model_type"),
        ('{"model_type": 3}', "no model_type"),
        ('{"model_type": "../evil"}', "invalid model_type"),
        ("[" * 100000 + "]" * 100000, "not valid JSON"),
        ('{"model_type": "llama", "rope_theta": NaN}', "holds NaN"),
        # found by the 10,000-case config fuzz: a dict reached float() in the attention reader
        ('{"model_type": "qwen3", "attn_logit_softcapping": {"a": 1}}', "must be a number"),
        ('{"model_type": "x", "text_config": {"final_logit_softcapping": "30"}}', "must be a num"),
        ('{"model_type": "gemma2", "final_logit_softcapping": true}', "must be a number"),
    ],
)
def test_hostile_configs(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(InvalidConfigError, match=message):
        read_config(path)


def test_infinity_is_kept_as_transformers_writes_it(tmp_path: Path) -> None:
    """transformers' own Mamba-2 config serialises ``time_step_limit`` as ``[0.0, Infinity]``."""
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "mamba2", "time_step_limit": [0.0, Infinity]}')
    assert read_config(path)["time_step_limit"] == [0.0, float("inf")]


def test_oversized_config_rejected(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "pad": "x" * (5 * 1024 * 1024)}))
    with pytest.raises(InvalidConfigError, match="larger than"):
        read_config(path)


def test_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"has no config\.json"):
        load_source(str(tmp_path))


def test_a_revision_that_cannot_be_honoured_is_said(hf_cache, tmp_path) -> None:
    from onboard.source import load_source

    bundled = load_source("Qwen/Qwen3-0.6B", revision="abc123")
    assert any("--revision abc123 cannot be honoured" in n for n in bundled.notices)
    assert not any("--revision" in n for n in load_source("Qwen/Qwen3-0.6B").notices)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    local = load_source(str(folder), revision="abc123")
    assert local.notices == (f"--revision abc123 ignored: {folder} is a local folder",)
