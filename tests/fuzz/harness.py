"""The fuzz suite's shared harness: settings, hostile values, mutation strategies, and the one
property every parser must have.

Property: for every generated input a parser either succeeds, or raises an ``InputError`` /
``InputErrors`` (a case: ``ConfigError``) naming the file it read, in a message of readable length;
never another exception, and the process stays under ``FUZZ_RSS_MB`` of resident memory.

Examples per target come from ``FUZZ_EXAMPLES`` (default 12: the whole folder in about a minute
in CI, derandomized so that a run is reproducible); ``make fuzz`` sets it to 2000 and lets
Hypothesis pick fresh inputs each run.
"""
from __future__ import annotations

import csv
import io
import os
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import psutil
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError, InputErrors
from connectors.registry import resolve

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
RSS_BOUND_MB = int(os.environ.get("FUZZ_RSS_MB", "2048"))
MESSAGE_LIMIT = 2000
"""Longest error message accepted: values echoed in it are cut (connectors.bounds.shown)."""
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize="FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=list(HealthCheck), print_blob=True)
UTC = timezone.utc
NASTY: tuple[bytes, ...] = (
    b"", b"\x00", b"NULL", b"null", b"\\N", b" ", b"1e400", b"-1e400", b"1e-400", b"nan", b"NaN", b"inf",
    b"-Infinity", b"+Inf", b"-0", b"0x10", b"1_000", b"1,5", b"99999999999999999999999999999999999999999",
    b"-9223372036854775809", b"9223372036854775808", b"2147483648", b"-1", b"0", b"1.0000000000000000000001",
    b"\xff\xfe", b"\xc3", b'"', b'""', b",", b";", b"|", b"\n", b"\r\n", b"\r", b"\t", b"{", b"}", b"[", b"]",
    b"[" * 1500, b'{"a":' * 300, b"{}", b"[]", b'{"k": "v"}', b"#", b"# EOF\n", b"=", b"\\", b"'",
    b"2024-13-45T25:61:61Z", b"9999-12-31T23:59:59", b"0001-01-01", b"1970-01-01T00:00:00Z",
    b"2024-09-01T00:00:00+14:00", b"2262-04-12", b"12/31/1999", b"Unknown", b"None assigned",
    "é中😀".encode(), "\u2028".encode(), b"a" * 3000, b"=HYPERLINK(\"x\")", b"true", b"[N/A]", b"N/A",
)
WINDOW = (datetime(2024, 9, 1, tzinfo=UTC), datetime(2024, 9, 2, tzinfo=UTC))


def nasty() -> st.SearchStrategy[bytes]:
    """A hostile value: one of NASTY, random bytes, or random text."""
    return st.one_of(st.sampled_from(NASTY), st.binary(max_size=40),
                     st.text(max_size=24).map(lambda t: t.encode("utf-8", "surrogatepass")))


@st.composite
def mutated(draw, seed: bytes, max_ops: int = 6) -> bytes:
    """``seed`` after a few byte-level edits: replace, insert, delete, duplicate, truncate, flip."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(0, max_ops))):
        op = draw(st.sampled_from(("replace", "insert", "delete", "duplicate", "truncate", "flip")))
        at = draw(st.integers(0, len(data)))
        span = draw(st.integers(0, 64))
        if op == "replace":
            data[at:at + span] = draw(nasty())
        elif op == "insert":
            data[at:at] = draw(nasty())
        elif op == "delete":
            del data[at:at + span]
        elif op == "duplicate":
            data[at:at] = data[at:at + span * 8]
        elif op == "truncate":
            del data[at:]
        elif data:
            data[min(at, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


@st.composite
def mutated_cells(draw, header: list[str], rows: list[list[str]], sep: str = ",", max_ops: int = 6) -> bytes:
    """A delimited file whose cells (and sometimes header names or row lengths) were replaced by
    hostile values, written back with valid quoting so the damage reaches the value checks."""
    table = [list(header)] + [list(r) for r in rows]
    for _ in range(draw(st.integers(1, max_ops))):
        r = draw(st.integers(0, len(table) - 1))
        op = draw(st.sampled_from(("cell", "cell", "cell", "drop", "extra", "copy_row")))
        value = draw(nasty()).decode("utf-8", "replace")
        if op == "cell" and table[r]:
            table[r][draw(st.integers(0, len(table[r]) - 1))] = value
        elif op == "drop" and table[r]:
            table[r].pop(draw(st.integers(0, len(table[r]) - 1)))
        elif op == "extra":
            table[r].append(value)
        elif op == "copy_row":
            table.append(list(table[r]))
    out = io.StringIO()
    csv.writer(out, delimiter=sep, lineterminator="\n").writerows(table)
    return out.getvalue().encode("utf-8", "surrogatepass")


def read_csv_seed(path: Path, sep: str = ",") -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a small delimited seed file."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig")), delimiter=sep))
    return rows[0], rows[1:]


@contextmanager
def scratch() -> Iterator[Path]:
    """A fresh folder for one example (pytest's tmp_path lives as long as the whole test)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        yield Path(folder)


def read_source(fmt: str, path: Path, window: tuple[datetime, datetime] = WINDOW, step: int | None = 3600,
                **options):
    """Read ``path`` as format ``fmt`` through the connector's read() (validation included)."""
    cls = resolve(fmt)
    spec = SourceSpec(name="fuzz", kind=cls.kind, format=fmt, path=path, options=options)
    return cls(spec, ReadContext(window[0], window[1], "USD", step)).read()


def names_source(error_path: str, source: Path) -> bool:
    """Whether an error's path is the source or lies inside it (a folder's file)."""
    where = Path(error_path)
    return where == source or source in where.parents or str(source) in error_path


def check(call: Callable[[], object], source: Path) -> object:
    """Run ``call``: success, or input errors naming ``source``; then the memory bound."""
    result = None
    try:
        result = call()
    except (InputError, InputErrors) as exc:
        for error in getattr(exc, "errors", [exc]):
            assert names_source(error.path, source), f"{error!s:.500} does not name {source}"
            assert len(str(error)) < MESSAGE_LIMIT, f"message of {len(str(error))} characters: {error!s:.300}"
    rss = psutil.Process().memory_info().rss >> 20
    assert rss < RSS_BOUND_MB, f"{rss} MB resident"
    return result
