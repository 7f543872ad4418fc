"""Render Jinja templates into formatted, lint-clean Python, the same way for every target.

Templates stay readable by leaving import pruning, import order and line wrapping to ruff (the
version is pinned, so the output is deterministic): ``ruff check --fix`` for unused imports and
isort order, then ``ruff format``.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from onboard.errors import OnboardError

LINE_LENGTH = 100


def templates_dir() -> Path:
    """``templates/`` in a checkout, ``onboard/templates`` inside the installed wheel."""
    here = Path(__file__).parent
    for candidate in (here / "templates", here.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise OnboardError(f"onboard's templates are missing (looked in {here} and its parent)")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters["comment"] = _comment
    env.filters["role"] = _role
    env.filters["tuple_literal"] = lambda items: repr(tuple(items))
    env.filters["bullet"] = _bullet
    env.filters["has_role"] = lambda names, role: role in dict(names)
    env.filters["paragraph"] = _paragraph
    return env


def render_template(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def format_python(source: str, *, filename: str = "generated.py") -> str:
    """Prune unused imports, sort imports and format with ruff; raise if the result has errors."""
    fixed = _ruff(
        ["check", "--fix", "--select", "F401,I", "--quiet", "--exit-zero"], source, filename
    )
    return _ruff(["format", "--quiet"], fixed, filename)


def lint_python(source: str, *, filename: str = "generated.py", select: Iterable[str] = ()) -> str:
    """ruff's findings for ``source`` (empty when clean)."""
    rules = ",".join(select) or "E,F,W,I,B,UP,SIM"
    result = subprocess.run(
        [
            _ruff_bin(),
            "check",
            "--isolated",
            "--select",
            rules,
            "--line-length",
            str(LINE_LENGTH),
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


def _ruff(args: list[str], source: str, filename: str) -> str:
    result = subprocess.run(
        [
            _ruff_bin(),
            *args,
            "--isolated",
            "--line-length",
            str(LINE_LENGTH),
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


def _comment(text: str, indent: int = 0) -> str:
    """``text`` as ``#`` comment lines that fit the line length (first line unindented)."""
    pad = " " * indent
    lines = textwrap.wrap(
        " ".join(str(text).split()),
        width=LINE_LENGTH - indent - 2,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return f"\n{pad}".join(f"# {line}" for line in lines) or "#"


def _bullet(text: str, indent: int = 0) -> str:
    """A Markdown-style ``- item`` wrapped to the line length, continuation lines aligned."""
    pad = " " * indent
    return textwrap.fill(
        " ".join(str(text).split()),
        width=LINE_LENGTH - 4,
        initial_indent=f"{pad}- ",
        subsequent_indent=f"{pad}  ",
        break_on_hyphens=False,
        break_long_words=False,
    )


def _paragraph(text: str, indent: int = 0) -> str:
    """Prose wrapped to the line length at ``indent`` (for docstrings)."""
    pad = " " * indent
    return textwrap.fill(
        " ".join(str(text).split()),
        width=LINE_LENGTH - 4,
        initial_indent=pad,
        subsequent_indent=pad,
        break_on_hyphens=False,
    )


def _role(names: Iterable[tuple[str, str]], role: str) -> str:
    found = dict(names).get(role)
    if found is None:
        raise jinja2.TemplateRuntimeError(f"no norm plays role {role!r}")
    return found
