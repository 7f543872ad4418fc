"""The one error type every codemod raises when a file does not look as expected."""

from __future__ import annotations


class CodemodError(Exception):
    """A registry file's shape is not one the codemods know how to edit safely.

    The message is one user-readable line naming the construct that was missing or
    unexpected, so the CLI can print it as is (prefixed with the file path).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
