"""Fuzzing ``onboard new`` and ``onboard inspect`` with mutated bundled configs (issue 20).

A case is one bundled config.json with a few mutations (values of other types, NaN and
infinities, huge, negative and zero numbers, dropped and added keys, unicode, deep nesting,
another model_type) and the command line to run on it. ``run_case`` runs ``onboard`` in this
process (a subprocess per case would cost a second of imports) in a fresh folder, and
``problems`` lists every way the run broke the CLI's promise: a documented exit code that is not
internal_error, an error that is one ``error: ...`` line on stderr with its reason, and nothing
written by a run that failed. The test (``tests/test_fuzz_configs.py``) and the benchmark
(``benchmarks/fuzz_configs.py``) share both.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from onboard.errors import OUTCOMES, ExitCode
from tests.time_limit import time_limit

HUB = Path(__file__).parents[1] / "onboard" / "data" / "hub"
BUNDLED = {
    path.parent.relative_to(HUB).as_posix(): json.loads(path.read_text())
    for path in sorted(HUB.glob("*/*/config.json"))
}
# Keys worth adding where a config lacks them: each steers transformers or the analysis
ADDED_KEYS = (
    "auto_map",
    "head_dim",
    "layer_types",
    "rope_parameters",
    "rope_scaling",
    "sliding_window",
    "use_sliding_window",
    "sliding_window_pattern",
    "num_experts",
    "num_experts_per_tok",
    "partial_rotary_factor",
    "tie_word_embeddings",
    "text_config",
    "vision_config",
    "per_layer_config",
    "hidden_size",
    "num_hidden_layers",
    "intermediate_size",
    "architectures",
)
OTHER_MODEL_TYPES = ("llama", "gpt2", "mamba2", "bert", "t5", "whisper", "qwen3", "llava", "")
SPECIAL_NUMBERS = (
    float("nan"),
    float("inf"),
    float("-inf"),
    0,
    -1,
    -0.0,
    1e-300,
    1e308,
    -1e308,
    2**31,
    2**63,
    -(2**63),
    10**30,
    True,
    False,
)
# The documented codes a fuzzed run may end with: parity is off, nothing conflicts, nothing
# runs remote code, so failed (1), conflict (3), refused (5) and remote_code_failed (6) have no
# cause, and internal_error (8) is a bug by definition.
EXPECTED_CODES = frozenset({ExitCode.OK, ExitCode.BAD_INPUT, ExitCode.UNSUPPORTED})


def _scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(SPECIAL_NUMBERS),
        st.integers(),
        st.floats(),
        st.text(max_size=12),
        st.none(),
    )


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value Python's json writes, NaN and infinities included, nested a little."""
    return st.recursive(
        _scalars(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=8,
    )


def _paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every key path in a config; of a list, only its first and last items."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list) and value:
        for index in sorted({0, len(value) - 1}):
            yield (*prefix, index)
            yield from _paths(value[index], (*prefix, index))


def _dict_paths(config: dict) -> list[tuple]:
    found = [()]
    found += [p for p in _paths(config) if isinstance(_get(config, p), dict)]
    return found


def _get(config: Any, path: tuple) -> Any:
    for step in path:
        config = config[step]
    return config


def _retyped(value: Any) -> list[Any]:
    """The same value in other JSON types: 1024 as 1024.0, "1024", [1024], {"value": 1024}."""
    shifted: list[Any] = [[value], {"value": value}, str(value)]
    if isinstance(value, bool):
        shifted += [int(value), "true" if value else "false"]
    elif isinstance(value, int | float):
        shifted += [float(value), -value, value * 1000, 0, int(value) if value == value else 0]
    elif isinstance(value, str):
        shifted += [value * 50, value.upper(), "\u00e9\u4e2d\U0001f600" + value, "", 0]
    elif isinstance(value, list):
        shifted += [value * 8, value[:1], value[::-1], []]
    return shifted


@st.composite
def mutation(draw: st.DrawFn, config: dict) -> tuple[str, tuple, Any]:
    """One edit of ``config``: (what, where, new value)."""
    what = draw(
        st.sampled_from(("replace", "replace", "retype", "delete", "add", "nest", "model_type"))
    )
    paths = list(_paths(config))
    if what == "add" or not paths:
        where = draw(st.sampled_from(_dict_paths(config)))
        key = draw(st.sampled_from(ADDED_KEYS) | st.text(min_size=1, max_size=8))
        return "add", (*where, key), draw(json_values())
    where = draw(st.sampled_from(paths))
    if what == "model_type":
        return "replace", ("model_type",), draw(st.sampled_from(OTHER_MODEL_TYPES))
    if what == "delete":
        return "delete", where, None
    if what == "retype":
        return "replace", where, draw(st.sampled_from(_retyped(_get(config, where))))
    if what == "nest":
        depth = draw(st.integers(1, 60))
        value: Any = _get(config, where)
        for _ in range(depth):
            value = [value]
        return "replace", where, value
    return "replace", where, draw(json_values())


def apply(config: dict, edit: tuple[str, tuple, Any]) -> dict:
    """``config`` with one edit applied (a copy); an edit whose place is gone is skipped."""
    what, where, value = edit
    changed = copy.deepcopy(config)
    try:
        parent = _get(changed, where[:-1])
        if what == "delete":
            del parent[where[-1]]
        else:
            parent[where[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass
    return changed


TEXT_EDITS = ("none",) * 12 + ("truncate", "bom", "latin1", "deep", "array", "empty")


def _text(config: dict, edit: str) -> bytes:
    """config.json's bytes, spoiled as a whole by ``edit`` now and then."""
    text = json.dumps(config, indent=2)  # NaN and Infinity as Python writes them
    if edit == "truncate":
        return text[: len(text) // 2].encode()
    if edit == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if edit == "latin1":
        return text.replace('"', '"\xe9', 1).encode("latin-1", "replace")
    if edit == "deep":  # deeper than Python's recursion limit
        return ('{"model_type": "qwen3", "x": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    if edit == "array":
        return f"[{text}]".encode()
    if edit == "empty":
        return b""
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Case:
    """A mutated bundled config and the command line to run on it."""

    bundled: str
    edits: tuple[tuple[str, tuple, Any], ...]
    text_edit: str
    command: str  # new or inspect
    target: str
    treat_as_new: bool
    as_json: bool

    def config_bytes(self) -> bytes:
        config = BUNDLED[self.bundled]
        for edit in self.edits:
            config = apply(config, edit)
        return _text(config, self.text_edit)

    def argv(self, folder: Path, out: Path) -> list[str]:
        args = [self.command, str(folder), "--target", self.target]
        if self.command == "new":
            args += ["--out", str(out), "--no-parity"]
        if self.treat_as_new:
            args.append("--treat-as-new")
        if self.as_json:
            args.append("--json")
        return args

    def describe(self) -> str:
        edits = "; ".join(f"{w} {'.'.join(map(str, p))}={v!r:.60}" for w, p, v in self.edits)
        return f"{self.bundled} [{edits}] text={self.text_edit} -> onboard {self.command}"


@st.composite
def cases(draw: st.DrawFn) -> Case:
    bundled = draw(st.sampled_from(sorted(BUNDLED)))
    config = BUNDLED[bundled]
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        edit = draw(mutation(config))
        edits.append(edit)
        config = apply(config, edit)
    return Case(
        bundled=bundled,
        edits=tuple(edits),
        text_edit=draw(st.sampled_from(TEXT_EDITS)),
        command=draw(st.sampled_from(("inspect", "inspect", "new"))),
        target=draw(st.sampled_from(("mobius", "mobius", "automodel"))),
        treat_as_new=draw(st.booleans()),
        as_json=draw(st.booleans()),
    )


@dataclass(frozen=True)
class Outcome:
    case: Case
    code: int | None  # None: an exception escaped main()
    stdout: str
    stderr: str
    written: tuple[str, ...]  # paths the run left beside the config, relative to its folder
    escaped: str = ""  # the exception main() let through, if any
    traceback: str = ""  # the log an internal error wrote, read before its folder goes


@contextlib.contextmanager
def _captured() -> Iterator[dict[str, str]]:
    """stdout and stderr of this process, at the Python and at the file-descriptor level (a
    logging handler keeps the stderr it was made with), encoded as a UTF-8 terminal would."""
    result: dict[str, str] = {}
    saved = sys.stdout, sys.stderr
    buffers = io.BytesIO(), io.BytesIO()
    sys.stdout = io.TextIOWrapper(buffers[0], encoding="utf-8", errors="strict")
    sys.stderr = io.TextIOWrapper(buffers[1], encoding="utf-8", errors="backslashreplace")
    with tempfile.TemporaryFile() as raw:
        saved_fd = os.dup(2)
        os.dup2(raw.fileno(), 2)
        try:
            yield result
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            out, err = (buffer.getvalue().decode("utf-8", "replace") for buffer in buffers)
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            sys.stdout, sys.stderr = saved
            raw.seek(0)
            result.update(stdout=out, stderr=err + raw.read().decode("utf-8", "replace"))


def _listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


# A case that runs longer than this broke a promise of its own (inspect and new without parity
# take about a second); stopping it names the case, where a hang would stall the whole run.
CASE_SECONDS = 120


def run_case(case: Case) -> Outcome:
    """Run the case's command on its config in a fresh folder, as ``onboard`` would."""
    from onboard.cli import main

    with tempfile.TemporaryDirectory(prefix="onboard-fuzz-") as tmp:
        root = Path(tmp)
        folder = root / "model"
        folder.mkdir()
        (folder / "config.json").write_bytes(case.config_bytes())
        before = _listing(root)
        argv = case.argv(folder, root / "out")
        saved_argv, saved_cwd = sys.argv, Path.cwd()
        saved_env = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "HF_HUB_OFFLINE")}
        sys.argv = ["onboard", *argv]
        os.environ.update(XDG_CACHE_HOME=str(root / "cache"), HF_HUB_OFFLINE="1")
        os.chdir(root)
        code: int | None = None
        escaped = ""
        try:
            with _captured() as streams, time_limit(CASE_SECONDS):
                try:
                    main()
                except SystemExit as exited:
                    code = exited.code if isinstance(exited.code, int) else 0
                except BaseException as exc:  # what main() must never let through
                    escaped = f"{type(exc).__name__}: {exc}"
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        written = tuple(sorted(_listing(root) - before))
        logs = sorted((root / "cache").glob("onboard/logs/*.log"))
        trace = logs[0].read_text() if logs else ""
    return Outcome(case, code, streams["stdout"], streams["stderr"], written, escaped, trace)


# An error line shorter than a sentence, or one that ends in a bare exception name: the reason
# the validator gave was dropped on the way ("... does not build (ValueError)")
_NO_REASON = re.compile(r"^.{0,11}$|\(\w+(Error|Exception)\)$")


def _error_lines(outcome: Outcome) -> list[str]:
    return [line for line in outcome.stderr.splitlines() if line.strip()]


def problems(outcome: Outcome) -> list[str]:
    """Every broken promise of this run (empty when the run kept them all)."""
    found = []
    code = outcome.code
    if code is None:
        return [f"exception escaped main(): {outcome.escaped}"]
    if code not in {int(c) for c in EXPECTED_CODES}:
        found.append(f"exit {code}, not ok/bad_input/unsupported")
    lines = _error_lines(outcome)
    if "Traceback" in outcome.stderr:
        found.append("a traceback on stderr")
    if code == ExitCode.OK:
        if lines:
            found.append(f"exit 0 but stderr says {lines[0]!r:.200}")
    else:
        # one error line; exit 4 lists the unsupported items above it ("  - item")
        items = [line for line in lines[:-1] if line.startswith("  - ")]
        if not lines or not lines[-1].startswith("error: ") or len(items) != len(lines) - 1:
            found.append(f"stderr is not one error line: {outcome.stderr!r:.300}")
        elif _NO_REASON.search(lines[-1].removeprefix("error: ")):
            found.append(f"the error gives no reason: {lines[-1]!r}")
        if outcome.written:
            found.append(f"exit {code} but wrote {', '.join(outcome.written[:5])}")
    if outcome.case.as_json:
        found += _json_problems(outcome)
    return found


def _json_problems(outcome: Outcome) -> list[str]:
    """``--json`` prints exactly one strict JSON document telling the exit code."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        document = json.loads(outcome.stdout, parse_constant=refuse)
    except ValueError as exc:
        return [f"--json stdout is not one JSON document: {exc}"]
    code = outcome.code
    if document.get("exit_code") != code or document.get("outcome") != OUTCOMES.get(code):
        return [f"--json document says {document.get('exit_code')}, the process {code}"]
    return []
