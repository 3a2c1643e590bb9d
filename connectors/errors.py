"""Errors a connector raises; the CLI turns them into one message and an exit code.

Every class derives from :class:`schemas.errors.CostauditError` and names its kind in ``slug``.
A bad argument of a connector's API function (a table name, a dialect) is a
:class:`schemas.errors.UsageError`, not a SourceError: the audit records a source that fails
with a SourceError as missing, and a wrong call is not a missing source.
"""
from __future__ import annotations

from pathlib import Path

from schemas.errors import CostauditError
from schemas.secrets import redact


class SourceError(CostauditError):
    """Root of every connector error."""

    slug = "source"


class InputError(SourceError):
    """Bad input: names the file, the row or column, and what was expected."""

    slug = "input"

    def __init__(self, path: str | Path, message: str, *, row: int | None = None,
                 column: str | None = None, expected: str | None = None):
        self.path = str(path)
        self.message = message
        self.row = row
        self.column = column
        self.expected = expected
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [self.path]
        loc = []
        if self.row is not None:  # row 0 is the header (a file's column names)
            loc.append("header" if self.row == 0 else f"row {self.row}")
        if self.column is not None:
            loc.append(f"column {self.column}")
        head = f"{self.path}: {', '.join(loc)}" if loc else where[0]
        text = f"{head}: {self.message}"
        if self.expected:
            text += f" (expected {self.expected})"
        return redact(text)   # no credential in any message (schemas.secrets)


class InputErrors(SourceError):
    """Several input errors found in one pass, reported together."""

    slug = "input"

    def __init__(self, errors: list[InputError]):
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


class RetriableSourceError(SourceError):
    """A transient fault (timeout, 5xx, throttling): the base class retries it."""

    slug = "source-retriable"


class FatalSourceError(SourceError):
    """A fault that retrying cannot fix (access denied, missing object)."""

    slug = "source-fatal"


def missing_library(where: str, error: ImportError, extra: str) -> FatalSourceError:
    """The error for a source that needs an optional library which is not installed."""
    return FatalSourceError(f"{where}: needs {error.name or 'a library'} that is not installed: "
                            f"pip install 'costaudit[{extra}]'")


def with_article(word: str) -> str:
    """``word`` after "a" or "an" as its first letter is a consonant or a vowel ("an openmetrics")."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
