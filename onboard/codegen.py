"""Render Jinja templates into formatted, lint-clean Python, the same way for every target.

Templates stay readable by leaving import pruning, import order and line wrapping to ruff (the
version is pinned, so the output is deterministic): ``ruff check --fix`` for unused imports and
isort order, then ``ruff format``.
"""

from __future__ import annotations

import functools
import re
import subprocess
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from onboard.errors import OnboardError

LINE_LENGTH = 100


@dataclass(frozen=True)
class CodeStyle:
    """The target library's ruff settings that decide how generated code is laid out: its line
    length, and the packages isort files as first party (the library's own, in their block)."""

    line_length: int = LINE_LENGTH
    first_party: tuple[str, ...] = ()
    # pydocstyle convention the library lints docstrings with (google), None: not linted
    docstrings: str | None = None
    ignore: tuple[str, ...] = ()  # rules the library switches off (mobius: E501)

    def ruff_args(self) -> list[str]:
        args = ["--line-length", str(self.line_length)]
        if self.first_party:
            names = ", ".join(f'"{name}"' for name in self.first_party)
            args += ["--config", f"lint.isort.known-first-party = [{names}]"]
        if self.docstrings:
            args += ["--config", f'lint.pydocstyle.convention = "{self.docstrings}"']
        return args

    def lint_rules(self) -> str:
        """The rules ``lint_python`` checks: the common ones, and docstrings where the library
        lints them (except missing docstrings and mood, which mobius ignores too)."""
        return "E,F,W,I,B,UP,SIM" + (
            ",D2,D3,D400,D402,D403,D404,D405,D41" if self.docstrings else ""
        )


def library_ruff_config(target: str) -> Path:
    """The ruff settings the target library lints and formats its pull requests with, kept as
    a ruff.toml (``onboard/data/ruff/<target>.toml``, copied from its pyproject.toml)."""
    return Path(__file__).parent / "data" / "ruff" / f"{target}.toml"


def templates_dir() -> Path:
    """``templates/`` in a checkout, ``onboard/templates`` inside the installed wheel."""
    here = Path(__file__).parent
    for candidate in (here / "templates", here.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise OnboardError(f"onboard's templates are missing (looked in {here} and its parent)")


@cache
def environment(line_length: int = LINE_LENGTH) -> jinja2.Environment:
    """The templates' environment; the wrapping filters fit ``line_length``."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters["comment"] = functools.partial(_comment, line_length=line_length)
    env.filters["role"] = _role
    env.filters["tuple_literal"] = lambda items: repr(tuple(items))
    env.filters["dict_literal"] = lambda pairs: repr(dict(pairs))
    env.filters["bullet"] = functools.partial(_bullet, line_length=line_length)
    env.filters["has_role"] = lambda names, role: role in dict(names)
    env.filters["paragraph"] = functools.partial(_paragraph, line_length=line_length)
    env.filters["wordwrap"] = _wordwrap
    return env


def render_template(name: str, *, style: CodeStyle = CodeStyle(), **context: Any) -> str:
    return environment(style.line_length).get_template(name).render(**context)


def format_python(
    source: str, *, filename: str = "generated.py", style: CodeStyle = CodeStyle()
) -> str:
    """Prune unused imports, sort imports and format with ruff in the target's ``style``; raise
    if the result has errors."""
    fixed = _ruff(
        ["check", "--fix", "--select", "F401,I", "--quiet", "--exit-zero"], source, filename, style
    )
    return _ruff(["format", "--quiet"], fixed, filename, style)


def format_shared(
    original: str, edited: str, *, filename: str, style: CodeStyle = CodeStyle()
) -> str:
    """A library file onboard edited (a registry), formatted as the library formats it when
    the library keeps it formatted: the only lines that change are onboard's. A file the
    library does not keep formatted is left as the codemod wrote it."""
    if _ruff(["format", "--quiet"], original, filename, style) != original:
        return edited
    return _ruff(["format", "--quiet"], edited, filename, style)


def lint_python(
    source: str,
    *,
    filename: str = "generated.py",
    select: Iterable[str] = (),
    style: CodeStyle = CodeStyle(),
) -> str:
    """ruff's findings for ``source`` in the target's ``style`` (empty when clean)."""
    rules = ",".join(select) or style.lint_rules()
    result = subprocess.run(
        [
            _ruff_bin(),
            "check",
            "--isolated",
            "--select",
            rules,
            "--ignore",
            ",".join(("D417", *style.ignore)),
            *style.ruff_args(),
            "--output-format",
            "concise",
            "--stdin-filename",
            filename,
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if result.returncode == 0 else (result.stdout + result.stderr).strip()


def _ruff(args: list[str], source: str, filename: str, style: CodeStyle) -> str:
    result = subprocess.run(
        [
            _ruff_bin(),
            *args,
            "--isolated",
            *style.ruff_args(),
            "--stdin-filename",
            filename,
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise OnboardError(
            f"generated {filename} is not valid Python: {result.stderr.strip()[:300]}"
        )
    return result.stdout


@cache
def _ruff_bin() -> str:
    from ruff.__main__ import find_ruff_bin

    return str(find_ruff_bin())


# An aside citing HF source lines, config.json keys or a probe: "(modeling_qwen3.py:237)",
# "(config.json:rope_parameters)", "(probe of ...)"
_LINE = r"(?:[\w./-]+\.py:\d+(?:-\d+)?|config\.json:[\w.]+)"
_CITATION = re.compile(rf"\s*\((?:probe(?: of|:) (?:[^()]|\([^()]*\))*|{_LINE}(?:[,;] {_LINE})*)\)")


_LINE_NUMBER = re.compile(r"(\.py):\d+(?:-\d+)?\b")


def without_citations(text: object) -> str:
    """``text`` without HF line or config key citations: lines go stale as transformers changes,
    and the code beside a comment reads the key, so library code carries none (the answers file
    keeps them, provenance.record). An aside that is only citations goes; a file named in a
    sentence stays, without its line."""
    return _LINE_NUMBER.sub(r"\1", _CITATION.sub("", str(text)))


def uncited(text: object) -> str:
    """``text`` on one line, without citations."""
    return without_citations(" ".join(str(text).split()))


@jinja2.pass_environment
def _wordwrap(env: jinja2.Environment, text: str, *args: Any, **kwargs: Any) -> str:
    """jinja's ``wordwrap``, over the text without citations."""
    return jinja2.filters.do_wordwrap(env, without_citations(text), *args, **kwargs)


def _comment(text: str, indent: int = 0, *, line_length: int = LINE_LENGTH) -> str:
    """``text`` as ``#`` comment lines that fit the line length (first line unindented)."""
    pad = " " * indent
    lines = textwrap.wrap(
        uncited(text),
        width=line_length - indent - 2,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return f"\n{pad}".join(f"# {line}" for line in lines) or "#"


def _bullet(text: str, indent: int = 0, *, line_length: int = LINE_LENGTH) -> str:
    """A Markdown-style ``- item`` wrapped to the line length, continuation lines aligned."""
    pad = " " * indent
    return textwrap.fill(
        uncited(text),
        width=line_length - 4,
        initial_indent=f"{pad}- ",
        subsequent_indent=f"{pad}  ",
        break_on_hyphens=False,
        break_long_words=False,
    )


def _paragraph(text: str, indent: int = 0, *, line_length: int = LINE_LENGTH) -> str:
    """Prose wrapped to the line length at ``indent`` (for docstrings)."""
    pad = " " * indent
    return textwrap.fill(
        uncited(text),
        width=line_length - 4,
        initial_indent=pad,
        subsequent_indent=pad,
        break_on_hyphens=False,
    )


def _role(names: Iterable[tuple[str, str]], role: str) -> str:
    found = dict(names).get(role)
    if found is None:
        raise jinja2.TemplateRuntimeError(f"no norm plays role {role!r}")
    return found
