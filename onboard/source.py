"""Resolve a model id or path to a ``ModelSource``: its config.json and the HF source behind it.

Order: a local path, the Hugging Face cache, the Hub (huggingface_hub; honours HF_HUB_OFFLINE),
then onboard's bundled snapshot of the configs behind ``generated_examples`` and the README's
examples (with a visible notice). The modeling source of the architecture is read as text
from the installed transformers; nothing here imports or runs model code.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from onboard.errors import BadInputError, InvalidConfigError, ModelNotFoundError, one_line

MAX_CONFIG_BYTES = 4 * 1024 * 1024
BUNDLED_ROOT = Path(__file__).parent / "data" / "hub"
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")


class Origin(StrEnum):
    LOCAL = "local"
    CACHE = "cache"
    HUB = "hub"
    BUNDLED = "bundled"
    DEFAULT = "transformers-default"


@dataclass(frozen=True)
class SourceFile:
    """An HF source file read as text, with its hash (recorded in generated headers)."""

    name: str
    path: Path
    sha256: str
    text: str

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        data = path.read_bytes()
        return cls(path.name, path, hashlib.sha256(data).hexdigest(), data.decode("utf-8"))


@dataclass(frozen=True)
class ModelSource:
    model_id: str
    origin: Origin
    config_path: Path
    config: dict[str, Any]
    revision: str | None
    hf_files: tuple[SourceFile, ...]
    notices: tuple[str, ...] = ()
    # The checkpoint's own code (config.json auto_map), read as text and never imported here.
    remote_files: tuple[SourceFile, ...] = ()
    # The Hub id library files name the model by (test ids, docs); a local folder has one only
    # when the user says it (--hub-id)
    hub_id: str | None = None

    @property
    def is_remote_code(self) -> bool:
        return bool(self.remote_files)

    @property
    def model_type(self) -> str:
        return self.config["model_type"]

    @property
    def architecture(self) -> str:
        archs = self.config.get("architectures") or []
        return archs[0] if archs else ""

    def hf_file(self, prefix: str) -> SourceFile | None:
        """The first HF source file whose name starts with ``prefix`` (modeling_, modular_)."""
        return next((f for f in self.hf_files if f.name.startswith(prefix)), None)

    def remote_file(self, prefix: str) -> SourceFile | None:
        return next((f for f in self.remote_files if f.name.startswith(prefix)), None)

    @property
    def remote_causal_lm(self) -> str | None:
        """The causal-LM class auto_map names (``modeling_x.XForCausalLM`` -> ``XForCausalLM``)."""
        if not self.remote_files:
            return None
        reference = remote_modules(self.config).get("AutoModelForCausalLM")
        return reference.rpartition(".")[2] if reference else None


def load_source(model: str, *, revision: str | None = None) -> ModelSource:
    """Resolve ``model`` (a local dir, a config.json path or a Hub id) to a ``ModelSource``."""
    path = Path(model).expanduser()
    if path.exists():
        config_path = path / "config.json" if path.is_dir() else path
        if not config_path.is_file():
            raise ModelNotFoundError(f"{path} has no config.json")
        ignored = (f"--revision {revision} ignored: {model} is a local folder",) if revision else ()
        return _finish(
            model,
            Origin.LOCAL,
            config_path,
            revision=None,
            notices=ignored,
            folder=config_path.parent,
        )
    if not _REPO_ID.match(model):
        raise ModelNotFoundError(
            f"{model!r} is neither an existing path nor a Hugging Face model id (org/name)"
        )
    return _resolve_hub_id(model, revision)


def _resolve_hub_id(repo_id: str, revision: str | None) -> ModelSource:
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        cached = hf_hub_download(repo_id, "config.json", revision=revision, local_files_only=True)
    except (LocalEntryNotFoundError, EntryNotFoundError, OSError):
        cached = None
    if cached is not None:
        cached_path = Path(cached)
        commit = cached_path.parent.name
        fetch = _hub_fetcher(repo_id, commit, local_only=True)
        return _finish(repo_id, Origin.CACHE, cached_path, commit, (), fetch=fetch)

    why_not_hub = _hub_unreachable_reason(constants)
    if why_not_hub is None:
        try:
            downloaded = Path(hf_hub_download(repo_id, "config.json", revision=revision))
        except (RepositoryNotFoundError, GatedRepoError) as exc:
            raise ModelNotFoundError(
                f"{repo_id} is not a model on the Hugging Face Hub you can access "
                f"({type(exc).__name__})"
            ) from None
        except RevisionNotFoundError:
            raise ModelNotFoundError(f"{repo_id} has no revision {revision!r}") from None
        except EntryNotFoundError:
            raise ModelNotFoundError(f"{repo_id} has no config.json") from None
        except OSError as exc:
            why_not_hub = f"the Hub request failed ({type(exc).__name__})"
        else:
            commit = downloaded.parent.name
            fetch = _hub_fetcher(repo_id, commit, local_only=False)
            return _finish(repo_id, Origin.HUB, downloaded, commit, (), fetch=fetch)

    bundled = BUNDLED_ROOT / repo_id / "config.json"
    if bundled.is_file():
        notice = (
            f"{why_not_hub} and {repo_id} is not in the HF cache: using onboard's bundled "
            "snapshot of its config.json (revision unknown; pin one before merging)"
        )
        if revision:
            notice += f"; --revision {revision} cannot be honoured without the Hub"
        return _finish(repo_id, Origin.BUNDLED, bundled, None, (notice,))
    raise ModelNotFoundError(
        f"{repo_id} is not in the HF cache and {why_not_hub}; download it once "
        f"(`hf download {repo_id} config.json`) or pass a local checkpoint directory"
    )


def _hub_unreachable_reason(constants: Any) -> str | None:
    """Why the Hub cannot be asked right now, or None; fails fast instead of retrying for 20 s."""
    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=3):
            return None
    except OSError:
        return f"the Hub ({host}) cannot be reached"


def _finish(
    model_id: str,
    origin: Origin,
    config_path: Path,
    revision: str | None,
    notices: tuple[str, ...],
    *,
    folder: Path | None = None,
    fetch: Callable[[str], Path] | None = None,
) -> ModelSource:
    config = read_config(config_path)
    hf_files = transformers_source_files(config["model_type"])
    remote: tuple[SourceFile, ...] = ()
    if "auto_map" in config and hf_files:
        notices = (
            *notices,
            f"config.json auto_map ignored: transformers {_transformers_version()} implements "
            f"{config['model_type']} itself, and that implementation is what onboard analyses",
        )
    elif "auto_map" in config:
        if fetch is None and folder is not None:
            fetch = functools.partial(_local_file, folder)
        remote = _remote_files(config, fetch)
    return ModelSource(
        model_id=model_id,
        origin=origin,
        config_path=config_path,
        config=config,
        revision=revision,
        hf_files=hf_files,
        notices=notices,
        remote_files=remote,
        hub_id=None if origin is Origin.LOCAL else model_id,
    )


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


_AUTO_CLASSES = ("AutoConfig", "AutoModelForCausalLM", "AutoModel")
_MODULE_NAME = re.compile(r"^[A-Za-z_]\w{0,100}$")


def remote_modules(config: dict[str, Any]) -> dict[str, str]:
    """auto_map's ``{auto class: "module.Class"}`` for the classes onboard reads, validated."""
    auto_map = config.get("auto_map")
    if not isinstance(auto_map, dict):
        raise InvalidConfigError("config.json auto_map must be an object")
    found = {}
    for auto_class in _AUTO_CLASSES:
        reference = auto_map.get(auto_class)
        if reference is None:
            continue
        if not isinstance(reference, str) or "--" in reference:
            raise InvalidConfigError(
                f"auto_map {auto_class} = {reference!r}: onboard reads code from the checkpoint's "
                "own repository only"
            )
        module, _, class_name = reference.rpartition(".")
        if not (_MODULE_NAME.match(module) and _MODULE_NAME.match(class_name)):
            raise InvalidConfigError(f"auto_map {auto_class} = {reference!r} is not module.Class")
        found[auto_class] = reference
    if "AutoConfig" not in found:
        raise InvalidConfigError("config.json auto_map has no AutoConfig entry")
    return found


def _remote_files(
    config: dict[str, Any], fetch: Callable[[str], Path] | None
) -> tuple[SourceFile, ...]:
    if fetch is None:  # the bundled snapshots never carry remote code
        raise ModelNotFoundError("remote code cannot be read from onboard's bundled snapshot")
    names = sorted(
        {reference.rpartition(".")[0] + ".py" for reference in remote_modules(config).values()}
    )
    return tuple(_read_remote(fetch(name)) for name in names)


_REMOTE_FILE_LIMIT = 4 * 1024 * 1024


def _read_remote(path: Path) -> SourceFile:
    if path.stat().st_size > _REMOTE_FILE_LIMIT:
        raise InvalidConfigError(f"{path.name} is over 4 MiB: not a modeling file onboard reads")
    try:
        return SourceFile.read(path)
    except UnicodeDecodeError:
        raise InvalidConfigError(f"{path.name} is not UTF-8 text") from None


def _local_file(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        raise ModelNotFoundError(f"config.json auto_map names {name}, which is not in {folder}")
    return path


def _hub_fetcher(repo_id: str, commit: str, *, local_only: bool) -> Callable[[str], Path]:
    from huggingface_hub import hf_hub_download

    def fetch(name: str) -> Path:
        try:
            return Path(
                hf_hub_download(repo_id, name, revision=commit, local_files_only=local_only)
            )
        except Exception as exc:  # missing file, offline cache without it
            raise ModelNotFoundError(
                f"{repo_id}@{commit[:12]} has no {name} ({type(exc).__name__})"
            ) from None

    return fetch


def default_config_source(model_type: str) -> ModelSource:
    """A source built from transformers' default config of ``model_type`` (for ``onboard diff``).

    Default configs are not always representative (the landscape notes list cases), so the
    origin says so: ``transformers-default``.
    """
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    try:
        config = CONFIG_MAPPING[model_type]().to_dict()
    except Exception as exc:  # some default configs do not build
        raise InvalidConfigError(
            f"transformers' default {model_type} config does not build ({type(exc).__name__})"
        ) from None
    architecture = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if architecture:
        config["architectures"] = [architecture]
    config["model_type"] = model_type
    return ModelSource(
        model_id=model_type,
        origin=Origin.DEFAULT,
        config_path=Path(f"<transformers default {model_type} config>"),
        config=config,
        revision=None,
        hf_files=transformers_source_files(model_type),
        notices=(f"{model_type}: transformers' default config, not a real checkpoint's",),
    )


def read_config(path: Path) -> dict[str, Any]:
    """Parse config.json defensively: size-capped, must be an object with a string model_type."""
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise InvalidConfigError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes; not a config")
    try:
        config = json.loads(path.read_bytes(), parse_constant=_no_constant)
    except _NonFiniteError:
        raise InvalidConfigError(f"{path} holds NaN: no config value is not a number") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise InvalidConfigError(f"{path} is not valid JSON: {_short(exc)}") from None
    if not isinstance(config, dict):
        raise InvalidConfigError(f"{path} must hold a JSON object, not {type(config).__name__}")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise InvalidConfigError(f"{path} has no model_type: cannot tell which architecture it is")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", model_type):
        raise InvalidConfigError(f"{path} has an invalid model_type {model_type[:40]!r}")
    _check_architectures(config.get("architectures"), path)
    _check_softcaps(config, path)
    for key, sub_config in config.items():  # text_config's is the text backbone's source
        if isinstance(sub_config, dict):
            _check_architectures(sub_config.get("architectures"), path, f"{key}.")
            _check_softcaps(sub_config, path, f"{key}.")
    if "auto_map" in config and not isinstance(config["auto_map"], dict):
        raise InvalidConfigError(
            f"{path}: auto_map must be an object, got {config['auto_map']!r:.60}"
        )
    return config


_CLASS_NAME = re.compile(r"[A-Za-z_]\w{0,100}", re.ASCII)


def _check_architectures(architectures: Any, path: Path, where: str = "") -> None:
    """architectures names classes (generated code derives its class names from the first), so
    it is null or a list of Python class names."""
    if architectures is None:
        return
    if not isinstance(architectures, list) or not all(
        isinstance(name, str) and _CLASS_NAME.fullmatch(name) for name in architectures
    ):
        raise InvalidConfigError(
            f"{path}: {where}architectures must be a list of class names, got {architectures!r:.60}"
        )


_SOFTCAP_KEYS = ("attn_logit_softcapping", "final_logit_softcapping")


def _check_softcaps(config: dict[str, Any], path: Path, where: str = "") -> None:
    """A soft-cap is a number (or null, off): the generated code divides and multiplies by it,
    and the readers take whatever the key holds."""
    for key in _SOFTCAP_KEYS:
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InvalidConfigError(f"{path}: {where}{key} must be a number, got {value!r:.60}")


class _NonFiniteError(Exception):
    pass


def _no_constant(name: str) -> Any:
    """NaN is refused; Infinity is kept, because transformers writes it itself (Mamba-2's
    ``time_step_limit`` is ``[0.0, Infinity]`` in its default config)."""
    if name == "NaN":
        raise _NonFiniteError(name)
    return float(name)


def _short(exc: Exception) -> str:
    return one_line(str(exc), 200)


def transformers_source_files(model_type: str) -> tuple[SourceFile, ...]:
    """The installed transformers' modeling / modular / configuration files of ``model_type``."""
    from transformers.models.auto.configuration_auto import (
        CONFIG_MAPPING_NAMES,
        model_type_to_module_name,
    )

    if model_type not in CONFIG_MAPPING_NAMES:
        return ()
    import transformers

    module_dir = (
        Path(transformers.__file__).parent / "models" / model_type_to_module_name(model_type)
    )
    names = sorted(
        p
        for p in module_dir.glob("*.py")
        if p.name.startswith(("modeling_", "modular_", "configuration_"))
    )
    return tuple(SourceFile.read(p) for p in names)


def with_hub_id(source: ModelSource, hub_id: str) -> ModelSource:
    """``source`` named by ``hub_id`` in the files written for the library (``--hub-id``)."""
    if not _REPO_ID.match(hub_id) or "/" not in hub_id:
        raise BadInputError(f"--hub-id {hub_id!r} is not a Hub model id (org/name)")
    return dataclasses.replace(source, hub_id=hub_id)
