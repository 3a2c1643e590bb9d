"""DuckDB helpers the connectors share: the session, SQL quoting, results as pandas, messages.

Every connector that reads through DuckDB opens its connection with :func:`session` (or calls
:func:`prepare` on one of its own): UTC, file order kept, a memory limit and a spill folder under the
cache (:func:`bound`: ``$COSTAUDIT_DUCKDB_MEMORY``, default 4 GB or half the machine's memory if that is
less; spill files in ``$COSTAUDIT_CACHE/duckdb-tmp``, never the working directory). Values go into SQL text through
:func:`quote_ident` / :func:`quote_text` only. Errors are collected, at most ``MAX_ERRORS`` of a
kind, and raised together by :func:`raise_all`.
"""
from __future__ import annotations

import gzip
import os
import re
import weakref
import zlib
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pandas as pd

from connectors.errors import InputError, InputErrors
from schemas.errors import UsageError

MAX_ERRORS = 20


@contextmanager
def session():
    """An in-memory DuckDB connection with the settings every FOCUS read relies on."""
    with duckdb.connect(":memory:") as con:
        prepare(con)
        yield con


def prepare(con) -> None:
    """Session settings every FOCUS read relies on (UTC, file order kept), within :func:`bound`."""
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET preserve_insertion_order = true")
    bound(con)


#: every session :func:`bound` set up and not yet collected, for :func:`interrupt_all`
_LIVE: weakref.WeakSet = weakref.WeakSet()


def interrupt_all() -> None:
    """Interrupt the query each live session runs (from another thread: a run that is stopping
    ends the reads of its sources before the process exits; DuckDB still running in a thread at
    exit aborts the process)."""
    for con in list(_LIVE):
        try:
            con.interrupt()
        except duckdb.Error:  # closed meanwhile
            pass


def close_all() -> None:
    """Close every live session (a run that is stopping, once its reads' threads ended): a session
    left to the interpreter's exit after an interrupted query can abort the process there."""
    for con in list(_LIVE):
        try:
            con.close()
        except duckdb.Error:
            pass


def bound(con, memory_limit: str | None = None) -> None:
    """A memory limit and a spill folder under the cache for a DuckDB session (never the cwd)."""
    _LIVE.add(con)
    con.execute(f"SET memory_limit = {quote_text(memory_limit or default_memory_limit())}")
    folder = spill_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"COSTAUDIT_CACHE: the spill folder {folder} cannot be made ({exc.strerror or exc}); "
                         "expected a writable folder") from None
    con.execute(f"SET temp_directory = {quote_text(str(folder))}")


#: a memory size DuckDB reads: a positive number and a unit (``4GB``, ``512MiB``, ``1.5 GB``, ``4G``), or a
#: share of the machine's memory (``80%``)
MEMORY_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB|K|M|G|T|%)\s*", re.IGNORECASE)


def default_memory_limit() -> str:
    """``$COSTAUDIT_DUCKDB_MEMORY``, else 4 GB, or half the physical memory where that is less. A value
    that is no positive size is a ``UsageError`` naming the variable (DuckDB would raise its parser's
    error, or read ``-1GB`` as no limit at all)."""
    given = os.environ.get("COSTAUDIT_DUCKDB_MEMORY")
    if given is not None and given.strip():
        size = MEMORY_SIZE.fullmatch(given)
        if size is None or float(size.group(1)) <= 0:
            raise UsageError(f"COSTAUDIT_DUCKDB_MEMORY={given!r}: expected a positive size such as 4GB, 512MiB or 80%")
        return f"{size.group(1)}{size.group(2)}"
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "4GB"
    return f"{max(256, min(4096, physical // 2 // 2**20))}MB"


def spill_folder() -> Path:
    """Where DuckDB writes what does not fit: ``$COSTAUDIT_CACHE/duckdb-tmp``, else
    ``$XDG_CACHE_HOME/costaudit/duckdb-tmp`` (``~/.cache/costaudit/duckdb-tmp``)."""
    base = os.environ.get("COSTAUDIT_CACHE")
    if base:
        return Path(base) / "duckdb-tmp"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "costaudit" / "duckdb-tmp"


def spilled_bytes(con) -> int:
    """Bytes the session holds in spill files now (0 when nothing spilled)."""
    try:
        rows = con.execute("SELECT coalesce(sum(size), 0) FROM duckdb_temporary_files()").fetchall()
    except duckdb.Error:
        return 0
    return int(rows[0][0]) if rows else 0


def quote_ident(name: str) -> str:
    """A SQL identifier in double quotes."""
    return '"' + name.replace('"', '""') + '"'


def quote_text(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def utc_text(moment: datetime) -> str:
    """ISO text of a window bound in UTC (a naive bound is read as UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.isoformat(sep=" ")


def utc_series(values: pd.Series) -> pd.Series:
    """Fetched TIMESTAMPTZ values (UTC session) as datetime64[ns, UTC]."""
    if values.empty:
        return pd.Series([], dtype="datetime64[ns, UTC]")
    return values.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")


def object_series(values: list) -> pd.Series:
    """Python objects (Decimal, None) in an object column, never coerced to float."""
    return pd.Series(values, dtype="object")


def first_line(exc: Exception) -> str:
    """The first line of an exception message."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def raise_all(errors: list[InputError]) -> None:
    """Raise nothing, the one error, or every error together."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InputErrors(errors)


DEFAULT_MAX_LINE = 2_000_000
"""DuckDB read_csv's default max_line_size: the longest line a reader that keeps it takes."""
TAIL_BLOCK = 1 << 16
"""Bytes read at a time when a file's last line is measured."""
_BREAKS = (b"\n", b"\r")


def last_line_longer(path: Path, limit: int, compressed: bool = False) -> bool:
    """Whether the file's last line (trailing blanks and line breaks left out) is longer than
    ``limit`` bytes. DuckDB's read_csv drops a last line longer than its buffer without a word
    (a row, money, lost), so every CSV read through it asks this of each file it read: a plain file is
    read from its end, a few blocks; a gzip stream (``compressed``) is decompressed once, in
    TAIL_BLOCK pieces, so memory stays bounded either way."""
    return (_gzip_last_line(path) if compressed else _plain_last_line(path, limit)) > limit


def _plain_last_line(path: Path, limit: int) -> int:
    """Bytes of a plain file's last line (more than ``limit`` once known to be), read backwards."""
    with open(path, "rb") as handle:
        pos = handle.seek(0, os.SEEK_END)
        end = None
        while pos > 0:
            size = min(TAIL_BLOCK, pos)
            pos -= size
            handle.seek(pos)
            block = handle.read(size)
            if end is None:
                block = block.rstrip()
                if not block:
                    continue
                end = pos + len(block)
            cut = max(block.rfind(brk) for brk in _BREAKS)
            if cut >= 0:
                return end - (pos + cut + 1)
            if end - pos > limit:
                return end - pos
    return end or 0


def _gzip_last_line(path: Path) -> int:
    """Bytes of a gzip stream's last line: where the last break before the last non-blank byte lies."""
    offset, start, end, last_break = 0, 0, 0, 0
    try:
        with gzip.open(path, "rb") as stream:
            for block in iter(lambda: stream.read(TAIL_BLOCK * 16), b""):
                text = block.rstrip()
                if text:
                    cut = max(text.rfind(brk) for brk in _BREAKS)
                    start, end = (offset + cut + 1) if cut >= 0 else last_break, offset + len(text)
                cut = max(block.rfind(brk) for brk in _BREAKS)
                last_break = offset + cut + 1 if cut >= 0 else last_break
                offset += len(block)
    except (OSError, EOFError, zlib.error):  # the read that came first judged the stream
        return 0
    return end - start
