"""The limits that keep every parser bounded, and the helpers that enforce them.

Billing exports, metrics dumps and traces come from other teams; whatever arrives must be read
within bounded memory and time, or refused with one InputError naming the file. Here:

* :func:`check_source_path`: a source is a regular file or a folder, never a device, a FIFO or a
  socket (``/dev/zero`` would be read forever, a FIFO would block); a file where a folder is
  expected (or the reverse) is named as such.
* :func:`resolved`: a user's path made absolute, links followed; a link that leads back to itself
  is named ("a symlink loop") where ``Path.resolve`` raises a bare RuntimeError.
* :func:`shown`: a value echoed in an error message, cut to a readable length.
* :func:`deeper_than`, :func:`nested_too_deep`: JSON nested past ``MAX_DEPTH`` (or past what a
  decoder accepts), and the message that says so.
* :func:`read_lines`: a text file (plain or gzip) as lines of bounded length.

No heavy import: the trace analyzer imports this module at start-up.
"""
from __future__ import annotations

import errno
import gzip
import io
import math
import os
import stat
import zlib
from pathlib import Path
from typing import Iterator, TypeVar

from connectors.errors import InputError

T = TypeVar("T")

SHOWN = 80
"""Characters of an input value echoed in a message (then an ellipsis)."""
MAX_LINE = 1 << 20
"""Longest text line a line-oriented parser accepts (1 MiB)."""
MAX_DEPTH = 64
"""Deepest JSON nesting accepted in a cell (Tags, SkuPriceDetails) or a document read whole."""

FILE, FOLDER, EITHER = "file", "folder", "file or folder"
SYMLINK_LOOP = "a symlink loop"
SPECIAL = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
           (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def shown(value, limit: int = SHOWN) -> str:
    """``repr(value)`` cut to ``limit`` characters with an ellipsis (for error messages)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def finite_number(value) -> bool:
    """A JSON or TOML number (not a boolean) that is finite as a float: NaN, infinities and an
    integer of 400 digits are not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def special_kind(mode: int) -> str | None:
    """What a file that is neither regular nor a folder is ('a FIFO (named pipe)' …), else None."""
    for test, kind in SPECIAL:
        if test(mode):
            return kind
    return None


def resolved(path: str | Path, expected: str | None = None) -> Path:
    """``path`` absolute with its links followed (``Path.resolve``); a link that leads back to
    itself is an InputError naming it ('a symlink loop'), where Python 3.11 raises RuntimeError.
    Every user path is resolved here, so that no command prints a traceback for it."""
    try:
        return Path(path).resolve()
    except RuntimeError:
        raise InputError(path, SYMLINK_LOOP, expected=expected) from None


def check_source_path(path: Path, accepts: str = FILE, expected: str | None = None) -> None:
    """Raise an InputError unless ``path`` is a regular file or a folder, as ``accepts`` allows.

    Links are followed (a link to ``/dev/zero`` is a character device). Inside a folder, every
    entry that is not a regular file or a folder is refused too (a reader would block on it).
    """
    path = Path(path)
    what = expected or f"a {accepts}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(path, "file not found", expected=what) from None
    except OSError as exc:
        problem = SYMLINK_LOOP if exc.errno == errno.ELOOP else f"cannot read: {exc.strerror or exc}"
        raise InputError(path, problem, expected=what) from None
    kind = special_kind(mode)
    if kind is not None:
        raise InputError(path, f"is {kind}, not a regular file", expected=what)
    if stat.S_ISDIR(mode):
        if accepts == FILE:
            raise InputError(path, "is a folder", expected=what)
        _check_folder(path, what)
    elif accepts == FOLDER:
        raise InputError(path, "is a file, not a folder", expected=what)


def _check_folder(folder: Path, what: str) -> None:
    """Refuse a folder holding an entry that is neither a regular file nor a folder."""
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            entry = Path(root) / name
            try:
                mode = os.stat(entry).st_mode
            except OSError:
                continue                    # a dangling link: the reader skips what it cannot open
            kind = special_kind(mode)
            if kind is not None:
                raise InputError(entry, f"is {kind}, not a regular file", expected=what)


def nested_too_deep(limit: int | None = None) -> str:
    """The message for JSON nested deeper than ``limit`` levels (None: than the decoder accepts,
    about a thousand)."""
    if limit is None:
        return "JSON nested too deeply (deeper than the decoder's limit of about 1,000 levels)"
    return f"JSON nested too deeply (more than {limit} levels)"


def deeper_than(value, limit: int = MAX_DEPTH) -> bool:
    """Whether a decoded JSON value nests lists and objects more than ``limit`` levels (no
    recursion: the value may be as deep as the decoder allowed)."""
    level = [value]
    for _ in range(limit):
        level = [child for item in level if isinstance(item, (dict, list))
                 for child in (item.values() if isinstance(item, dict) else item)]
        if not level:
            return False
    return any(isinstance(item, (dict, list)) for item in level)


def open_binary(path: Path):
    """The file as a binary reader, gunzipped when it starts with the gzip magic bytes."""
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def read_lines(path: Path, limit: int = MAX_LINE, encoding: str = "utf-8") -> Iterator[str]:
    """The lines of a text file (plain or gzip), each at most ``limit`` characters, as iterating
    the file in text mode gives them (universal newlines, each line with its ``\\n``).

    A longer line (or a file with no line break in its first ``limit`` characters: gigabytes of
    NULs) is an InputError naming its line number; memory stays a few blocks whatever the file.
    Decoding faults propagate (``UnicodeDecodeError``, ``zlib.error`` …) for the caller to name.
    """
    with open_binary(path) as raw, io.TextIOWrapper(raw, encoding=encoding) as text:
        yield from bounded(text, path, limit)


def bounded(text, path: Path, limit: int = MAX_LINE) -> Iterator[str]:
    """The lines of the text reader ``text``, each read with at most ``limit`` characters."""
    readline = text.readline
    for lineno, line in enumerate(iter(lambda: readline(limit + 1), ""), 1):
        if len(line) > limit and line[-1] != "\n":
            raise _too_long(path, lineno, limit)
        yield line


def text_lines(numbered: Iterator[tuple[int, T]], path: Path, expected: str) -> Iterator[tuple[int, T]]:
    """(row, line) pairs of a text reader, a decoding fault (not UTF-8, a broken gzip, a CSV field
    past the csv module's limit) turned into an InputError naming the row after the last one read."""
    import csv

    row = 0
    try:
        for row, line in numbered:
            yield row, line
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text ({exc.reason})", row=row + 1, expected=expected) from None
    except csv.Error as exc:
        raise InputError(path, f"unreadable CSV: {exc}", row=row + 1, expected=expected) from None
    except DECOMPRESS_ERRORS as exc:
        raise InputError(path, f"truncated or corrupt gzip ({exc})", row=row + 1, expected=expected) from None


def _too_long(path: Path, lineno: int, limit: int) -> InputError:
    return InputError(path, f"line longer than {limit:,} characters (or no line break)", row=lineno,
                      expected=f"text lines of at most {limit:,} characters")


DECOMPRESS_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)
"""What reading a broken gzip stream raises."""
