"""The Azure LLM inference trace format (Azure/AzurePublicDataset, the Splitwise traces).

One invocation a line under the header ``TIMESTAMP,ContextTokens,GeneratedTokens``: a naive
timestamp with up to 7 fractional digits (``2023-11-16 18:17:03.9799600``), the prompt's token count
and the generated token count. Rows are returned as offsets (seconds after the trace's first
arrival, sorted; equal times keep their file order) with both counts.

A file that cannot be used raises :class:`TraceFileError`: one error naming the file, the row (the
file's line number, the header being line 1) and the column, with what was expected; the CLI prints
it on one line and exits 1 (slug ``input``).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from schemas.errors import CostauditError

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MAX_TOKENS = 10_000_000          # a count above this is refused: no model takes such a prompt
SHOWN = 60                       # characters of a bad value echoed in a message


class TraceFileError(CostauditError):
    """A trace file that cannot be read: names the file, the row (line) and the column."""

    slug = "input"

    def __init__(self, path: str | Path, message: str, *, row: int | None = None,
                 column: str | None = None, expected: str | None = None):
        self.path, self.message, self.row, self.column, self.expected = str(path), message, row, column, expected
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [f"row {self.row}"] if self.row is not None else []
        where += [f"column {self.column}"] if self.column is not None else []
        text = f"{self.path}: {', '.join(where)}: {self.message}" if where else f"{self.path}: {self.message}"
        return text + (f" (expected {self.expected})" if self.expected else "")


@dataclass(frozen=True)
class TraceRow:
    """One invocation: seconds after the trace's first arrival, prompt and generated token counts."""

    offset: float
    prompt_tokens: int
    generated_tokens: int
    row: int                     # the file's line number


def _shown(value: str) -> str:
    text = value if len(value) <= SHOWN else value[:SHOWN] + "…"
    return repr(text)


def read_azure_trace(path: Path) -> list[TraceRow]:
    """Every row of an Azure LLM trace CSV, sorted by arrival; TraceFileError on the first bad cell."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFileError(path, exc.strerror or str(exc), expected="a readable Azure LLM trace CSV") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceFileError(path, f"byte {exc.start} is not UTF-8", row=line,
                             expected="a UTF-8 text file") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise TraceFileError(path, "a NUL character", row=line, expected="a text CSV")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[datetime, int, int, int]] = []
    index: dict[str, int] | None = None
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or all(not f.strip() for f in fields):
                continue
            if index is None:
                index = _header(path, fields, line)
                continue
            rows.append(_row(path, fields, index, line))
    except csv.Error as exc:
        raise TraceFileError(path, f"not CSV: {exc}", row=reader.line_num + 1) from None
    if index is None:
        raise TraceFileError(path, "empty file", row=1, expected="the header " + ",".join(COLUMNS))
    if not rows:
        raise TraceFileError(path, "no invocation rows under the header", row=2,
                             expected="one invocation a line: TIMESTAMP,ContextTokens,GeneratedTokens")
    rows.sort(key=lambda r: r[0])
    first = rows[0][0]
    return [TraceRow((t - first).total_seconds(), p, g, line) for t, p, g, line in rows]


def _header(path: Path, fields: list[str], line: int) -> dict[str, int]:
    """Column name → position; every one of COLUMNS must be there (names compared case-blind)."""
    names = [f.strip().lower() for f in fields]
    index = {}
    for column in COLUMNS:
        if column.lower() not in names:
            raise TraceFileError(path, f"no column {column} in the header {_shown(','.join(fields))}",
                                 row=line, column=column, expected="the header " + ",".join(COLUMNS))
        index[column] = names.index(column.lower())
    return index


def _row(path: Path, fields: list[str], index: dict[str, int], line: int) -> tuple[datetime, int, int, int]:
    width = max(index.values()) + 1
    if len(fields) < width:
        missing = next(c for c, i in index.items() if i >= len(fields))
        raise TraceFileError(path, f"the row has {len(fields)} fields", row=line, column=missing,
                             expected=f"{width} fields: " + ",".join(COLUMNS))
    when = _timestamp(path, fields[index["TIMESTAMP"]], line)
    prompt = _count(path, fields[index["ContextTokens"]], line, "ContextTokens", 1)
    generated = _count(path, fields[index["GeneratedTokens"]], line, "GeneratedTokens", 0)
    return when, prompt, generated, line


def _timestamp(path: Path, cell: str, line: int) -> datetime:
    """``YYYY-MM-DD HH:MM:SS[.fraction]`` (a ``T`` also separates); fractions past µs are cut."""
    text = cell.strip()
    head, dot, fraction = text.partition(".")
    try:
        if dot and not (fraction.isdigit() and fraction.isascii()):
            raise ValueError
        when = datetime.strptime(head.replace("T", " ", 1), "%Y-%m-%d %H:%M:%S")
        if dot:
            when = when.replace(microsecond=int(fraction[:6].ljust(6, "0")))
    except ValueError:
        raise TraceFileError(path, f"not a timestamp: {_shown(cell)}", row=line, column="TIMESTAMP",
                             expected="YYYY-MM-DD HH:MM:SS.fffffff (naive, as the Azure traces write it)") from None
    return when


def _count(path: Path, cell: str, line: int, column: str, least: int) -> int:
    text = cell.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 8 or not least <= int(text) <= MAX_TOKENS:
        raise TraceFileError(path, f"not a token count: {_shown(cell)}", row=line, column=column,
                             expected=f"a whole number from {least} to {MAX_TOKENS:,}")
    return int(text)
