"""Where generated code came from: a short header in each file, the rest in the answers file.

A reviewer must be able to tell, from the file alone, which checkpoint revision and which exact
source text (transformers' modeling file, or the checkpoint's own remote code) it was derived from.
The citations behind each choice (HF source lines, config keys) go stale as transformers moves
and are onboard's business, not the library's: they live in the answers file under ``.onboard/``
(:func:`record`), never in the library's code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from onboard import STAMP
from onboard.spec import ArchitectureSpec


@dataclass(frozen=True)
class Header:
    generator: str
    model_id: str
    revision: str
    hf_source: str
    command: str


def header_for(spec: ArchitectureSpec, command: str) -> Header:
    source = spec.source
    if source.remote_files:
        hashes = ", ".join(f"{name} sha256:{digest[:16]}" for name, digest in source.remote_files)
        hf = f"remote code {hashes} (transformers {source.transformers_version})"
    else:
        modeling = next(((n, h) for n, h in source.hf_files if n.startswith("modeling_")), None)
        hf = f"transformers {source.transformers_version}"
        if modeling:
            hf += f" {modeling[0]} sha256:{modeling[1][:16]}"
    # the command as typed, but no path of this machine goes into the library's files
    public_command = command.replace(source.model_id, source.public_name) if command else command
    return Header(STAMP, source.public_name, source.revision or "unknown", hf, public_command)


def record(spec: ArchitectureSpec, command: str) -> dict[str, object]:
    """The answers file's provenance: the header's facts and, for each spec value the code
    follows, where it was read (HF source lines and config keys; probes are onboard's own)."""
    header = header_for(spec, command)
    cited = {
        path: sorted({e.where for e in evidence if e.kind in ("source", "config")})
        for path, evidence in spec.evidence
    }
    return {
        "command": header.command,
        "model_id": header.model_id,
        "revision": header.revision,
        "source": header.hf_source,
        "evidence": {path: wheres for path, wheres in cited.items() if wheres},
    }


_REMOTE_HASH = re.compile(r"([\w.-]+\.py) sha256:([0-9a-f]{16,64})")


def header_remote_hashes(path: Path) -> dict[str, str]:
    """The remote-code file hashes a generated file's header records (hash prefixes)."""
    try:
        head = path.read_text(encoding="utf-8")[:4000]
    except (OSError, UnicodeDecodeError):
        return {}
    joined = " ".join(line.lstrip("# ").strip() for line in head.splitlines())
    marker = joined.find("remote code ")
    if marker < 0:
        return {}
    return dict(_REMOTE_HASH.findall(joined[marker : marker + 1000]))
