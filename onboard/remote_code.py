"""Importing a checkpoint's own code (config.json ``auto_map``) for the parity reference only.

Analysis reads remote code as text. Running it needs the user's explicit ``--trust-remote-code``
and happens once, for the HF reference of a parity run. What runs is exactly the text that was
analysed: each file's sha256 must equal the hash recorded when it was analysed (and, for a model
onboarded before, the hash in its answers file or generated header), and the files are imported
from a private package named by their combined hash, so two revisions never share a module.
Transformers pins remote code to a commit in the same spirit.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from onboard.errors import RefusedError, RemoteCodeError
from onboard.failures import REMOTE_PACKAGE_PREFIX, failure
from onboard.source import ModelSource, SourceFile, remote_modules

TRUST_FLAG = "--trust-remote-code"


def require_trust(model_type: str, files: Sequence[SourceFile], trusted: bool) -> None:
    """Parity runs the checkpoint's code: refuse unless the user said so."""
    if not trusted:
        raise RefusedError(untrusted(model_type, files))


def untrusted(model_type: str, files: Sequence[SourceFile]) -> str:
    """Why the checkpoint's code does not run (the parity reference, the tiny model)."""
    names = ", ".join(f.name for f in files)
    return (
        f"parity refused: {model_type} exists only as remote code ({names}), and running it "
        f"needs {TRUST_FLAG} (read those files first)"
    )


def check_hashes(files: Sequence[SourceFile], recorded: Mapping[str, str], where: str) -> None:
    """Refuse code whose bytes differ from the hashes recorded in ``where``."""
    current = {f.name: hashlib.sha256(f.text.encode("utf-8")).hexdigest() for f in files}
    for name, digest in sorted(recorded.items()):
        now = current.get(name)
        if now is None or not now.startswith(digest):  # headers record a 16-hex prefix
            state = f"now sha256:{now[:16]}" if now else "now missing"
            raise RefusedError(
                f"{name} changed since it was analysed (sha256:{digest[:16]} recorded in "
                f"{where}, {state}); review the new code and onboard it again"
            )


def import_if_trusted(
    source: ModelSource,
    trusted: bool,
    recorded: Mapping[str, str] | None = None,
    where: str = "",
) -> bool:
    """Register the checkpoint's classes when its code is remote and trusted, after checking
    the hashes ``where`` recorded (an answers file, a generated header); whether they were."""
    if not (source.is_remote_code and trusted):
        return False
    if recorded:
        check_hashes(source.remote_files, recorded, where)
    register_remote_classes(source.config, source.remote_files)
    return True


def register_remote_classes(config: Mapping[str, Any], files: Sequence[SourceFile]) -> type:
    """Import the analysed files and register their config and causal-LM classes with the
    transformers Auto classes (what ``AutoConfig.from_pretrained(..., trust_remote_code=True)``
    would do); returns the causal-LM class."""
    from transformers import AutoConfig, AutoModelForCausalLM

    references = remote_modules(config)
    package = _import_package(files)
    config_class = _class(package, references["AutoConfig"])
    model_reference = references.get("AutoModelForCausalLM")
    if model_reference is None:
        raise RefusedError("config.json auto_map has no AutoModelForCausalLM to import")
    model_class = _class(package, model_reference)
    model_type = config["model_type"]
    if getattr(config_class, "model_type", None) != model_type:
        raise RefusedError(
            f"{config_class.__name__}.model_type is {getattr(config_class, 'model_type', None)!r}, "
            f"config.json says {model_type!r}"
        )
    AutoConfig.register(model_type, config_class, exist_ok=True)
    AutoModelForCausalLM.register(config_class, model_class, exist_ok=True)
    return model_class


def _import_package(files: Sequence[SourceFile]) -> str:
    """Write the analysed texts into a private package and import it; returns its name."""
    digest = hashlib.sha256()
    for file in sorted(files, key=lambda f: f.name):
        digest.update(f"{file.name}\0{file.sha256}\0".encode())
    name = f"{REMOTE_PACKAGE_PREFIX}{digest.hexdigest()[:16]}"
    if name in sys.modules:
        return name
    scratch = Path(tempfile.mkdtemp(prefix="onboard-remote-"))
    # Imported modules keep running from there until the process ends, so it goes at exit.
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    folder = scratch / name
    folder.mkdir()
    (folder / "__init__.py").write_text("", encoding="utf-8")
    for file in files:
        (folder / file.name).write_text(file.text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return name


def _class(package: str, reference: str) -> type:
    module_name, _, class_name = reference.rpartition(".")
    try:
        module = importlib.import_module(f"{package}.{module_name}")
        return getattr(module, class_name)
    except Exception as exc:  # the checkpoint's code itself fails: report, do not trace back
        raise RemoteCodeError(failure(exc, f"importing {reference}")) from None
