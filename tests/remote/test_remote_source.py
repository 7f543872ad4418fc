"""Remote code is fetched with the config, as text, from a folder, the HF cache or the Hub."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from onboard.errors import InvalidConfigError, ModelNotFoundError
from onboard.source import load_source
from tests.hub_cache import fixture_config
from tests.remote.conftest import REMOTE


def test_local_checkpoint_reads_the_auto_map_files_with_their_hashes() -> None:
    source = load_source(str(REMOTE / "ember-tiny"))
    assert source.is_remote_code and source.hf_files == ()
    assert [f.name for f in source.remote_files] == ["configuration_ember.py", "modeling_ember.py"]
    for file in source.remote_files:
        assert file.sha256 == hashlib.sha256(file.path.read_bytes()).hexdigest()
    assert source.remote_causal_lm == "EmberForCausalLM"


def test_hf_cache_snapshot_serves_the_remote_files(seeded) -> None:
    folder = REMOTE / "quill-tiny"
    files = {n: (folder / n).read_bytes() for n in ("configuration_quill.py", "modeling_quill.py")}
    commit = seeded("acme/quill-tiny", (folder / "config.json").read_bytes(), files)
    source = load_source("acme/quill-tiny")
    assert str(source.origin) == "cache" and source.revision == commit
    assert {f.name: f.text.encode() for f in source.remote_files} == files


def test_cache_without_the_modeling_file_is_a_clear_error(seeded) -> None:
    folder = REMOTE / "quill-tiny"
    seeded("acme/quill-tiny", (folder / "config.json").read_bytes())
    with pytest.raises(ModelNotFoundError, match=r"configuration_quill\.py"):
        load_source("acme/quill-tiny")


def test_a_type_transformers_knows_ignores_auto_map_with_a_notice(tmp_path: Path) -> None:
    config = json.loads(fixture_config("Qwen/Qwen3-0.6B").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_qwen3.Qwen3Config"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    source = load_source(str(tmp_path))
    assert not source.is_remote_code and source.hf_files
    assert any("auto_map ignored" in notice for notice in source.notices)


@pytest.mark.parametrize(
    ("auto_map", "message"),
    [
        ({"AutoConfig": "other/repo--configuration_x.XConfig"}, "own repository"),
        ({"AutoConfig": "../../etc/passwd.X"}, "not module.Class"),
        ({"AutoModelForCausalLM": "modeling_x.X"}, "no AutoConfig"),
        ("configuration_x.XConfig", "must be an object"),
    ],
)
def test_hostile_auto_map_is_refused_before_any_file_is_read(
    checkpoint, auto_map: object, message: str
) -> None:
    folder = checkpoint("ember-tiny")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = auto_map
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidConfigError, match=message):
        load_source(str(folder))


def test_a_modeling_file_that_is_not_text_is_refused(checkpoint) -> None:
    folder = checkpoint("ember-tiny")
    (folder / "modeling_ember.py").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InvalidConfigError, match="not UTF-8"):
        load_source(str(folder))
