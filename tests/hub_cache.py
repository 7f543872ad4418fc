"""Seed real config.json fixtures into a Hugging Face cache laid out as huggingface_hub writes it.

``models--{org}--{name}/blobs/<sha256>`` holds the bytes, ``snapshots/<commit>/config.json`` links
to the blob and ``refs/main`` names the commit, so the real offline lookup code runs in tests.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "hub"


def fixture_config(repo_id: str) -> Path:
    return FIXTURES / repo_id / "config.json"


def fake_commit(data: bytes) -> str:
    return hashlib.sha1(b"onboard-fixture\0" + data).hexdigest()


def seed(
    cache: Path,
    repo_id: str,
    config: bytes | None = None,
    files: dict[str, bytes] | None = None,
) -> str:
    """Put ``repo_id``'s config.json (fixture or ``config``) and any other ``files`` in
    ``cache``; return the commit."""
    data = config if config is not None else fixture_config(repo_id).read_bytes()
    repo_dir = cache / f"models--{repo_id.replace('/', '--')}"
    commit = fake_commit(data)
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, content in {"config.json": data, **(files or {})}.items():
        blob = repo_dir / "blobs" / hashlib.sha256(content).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        link = snapshot / name
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, snapshot))
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    return commit
