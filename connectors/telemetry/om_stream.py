"""The fast path of the OpenMetrics text reader: whole blocks of lines, one regex per series.

``omtext.scan_lines`` matches a regex against every line. Here the file (plain or gzipped) is read
in blocks of whole lines; each line is split on its last two spaces into series text, value and
timestamp, and the series text is looked up in a cache: only a series seen for the first time is
matched against ``omtext``'s line pattern (and its labels parsed, once, by its family). Values and
timestamps are converted a block at a time and appended to the families' compact arrays (series
id, timestamp, value), in file order, so every table is built from exactly the samples the
line-by-line reader gives.

Whatever the fast path does not decide on its own goes to the exact reader: a block holding a
value or timestamp that does not convert cleanly (NaN and ±Inf convert; ``1_000`` does not), a
line without a timestamp, a tab or other whitespace, non-ASCII text or an error is re-read line by
line with ``omtext.scan_lines``, so the first error in the file is reported as it always was
(file, line, what was expected); a carriage return, a decoding or gzip fault or an over-long line
makes the whole file go through ``omtext.read_families``.
"""
from __future__ import annotations

import gzip
import zlib
from array import array
from itertools import compress, repeat
from operator import is_, is_not, itemgetter

import numpy as np
import pandas as pd
import pyarrow as pa

from connectors.bounds import MAX_LINE, open_binary
from connectors.errors import InputError
from connectors.telemetry import omtext
from connectors.telemetry.families import Family, new_families
from connectors.telemetry.omtext import MS_THRESHOLD, Scan

BLOCK = 1 << 20  # bytes read at a time (whole lines are handed on)
UNWANTED = -1  # a series no family keeps (its samples are counted, checked, not stored)
#: characters that make a block go line by line: whitespace the line pattern treats as a separator
#: (or float() strips) other than the space
SEPARATORS = (b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")


FIRST, LAST = itemgetter(0), itemgetter(2)


class _Exact(Exception):
    """The whole file must be read by the line-by-line reader (it names the fault exactly)."""


class _Slow(Exception):
    """This block must be read line by line."""


class Reader:
    """One pass over a file into fresh families."""

    def __init__(self, path):
        self.path = path
        self.roles, self.by_name = new_families()
        self.scan = Scan()
        self.cache: dict[str, int] = {}       # series text -> series number (gid)
        self.families: list[Family] = list({id(f): f for f in self.roles.values()}.values())
        self.family_of: list[int] = []        # gid -> index in self.families, or UNWANTED
        self.sid_of: list[int] = []           # gid -> the family's series id
        self.lineno = 0

    # ---- blocks ---------------------------------------------------------------------------

    def run(self) -> None:
        """Read the whole file."""
        with open_binary(self.path) as raw:
            carry = b""
            while True:
                block = raw.read(BLOCK)
                if not block:
                    if carry:
                        if self._text(carry):
                            self._after_eof(raw, [])
                    return
                data = carry + block
                cut = data.rfind(b"\n")
                if cut < 0:
                    if len(data) > 4 * MAX_LINE:
                        raise _Exact
                    carry = data
                    continue
                carry = data[cut + 1:]
                rest = self._text(data[:cut])
                if rest is not None:
                    self._after_eof(raw, rest, carry)
                    return

    def _text(self, data: bytes) -> list[str] | None:
        """Read the lines of ``data`` (whole lines, the last one without its newline); the lines
        after a ``# EOF`` line when there is one, else None."""
        if b"\r" in data:
            raise _Exact  # universal newlines: lines are not what a split on \n gives
        plain = data.isascii() and not any(c in data for c in SEPARATORS)
        lines = data.decode("utf-8").split("\n")
        if len(data) > MAX_LINE and max(map(len, lines)) > MAX_LINE:
            raise _Exact
        if data.startswith(b"# EOF") or b"\n# EOF" in data:
            eof = next(i for i, line in enumerate(lines) if line.startswith("# EOF"))
            self._lines(lines[:eof], plain)
            self.lineno += 1  # the '# EOF' line
            return lines[eof + 1:]
        self._lines(lines, plain)
        return None

    def _after_eof(self, raw, rest: list[str], carry: bytes = b"") -> None:
        """Nothing but blank lines may follow ``# EOF``."""
        def remaining():
            yield from rest
            tail = carry
            while True:
                block = raw.read(BLOCK)
                if not block:
                    whole, tail = ([tail] if tail else []), b""
                else:
                    *whole, tail = (tail + block).split(b"\n")
                for piece in whole:
                    if b"\r" in piece:
                        raise _Exact
                    yield piece.decode("utf-8")
                if not block:
                    return
        omtext._after_eof(remaining(), self.path, self.lineno)

    def _lines(self, lines: list[str], plain: bool) -> None:
        """Lines without a ``# EOF`` among them: fast when nothing in them needs the exact reader
        (``plain``: ASCII, no whitespace but spaces and newlines)."""
        first = self.lineno + 1
        if not lines:
            return
        rows, untimed = self.scan.rows, self.scan.untimestamped
        try:
            if not plain:
                raise _Slow
            self._fast(lines, first)
        except (_Slow, ValueError, InputError):
            self.scan.rows, self.scan.untimestamped = rows, untimed
            omtext.scan_lines([line + "\n" for line in lines], self.path, self.by_name,
                              self.scan, first)
        self.lineno += len(lines)
        self.scan.eof_line = self.lineno

    # ---- the fast path --------------------------------------------------------------------

    def _fast(self, lines: list[str], first: int) -> None:
        """Split, look up, convert and append a block; raises _Slow / ValueError / InputError
        (before anything is appended) when the block must be read line by line."""
        heads = [line.rpartition(" ") for line in lines]    # (series and value, " ", timestamp)
        tails = [head[0].rpartition(" ") for head in heads]  # (series, " ", value)
        keys = list(map(FIRST, tails))
        gids = list(map(self.cache.get, keys))
        if None in gids:
            gids, heads, tails = self._with_new(lines, heads, tails, keys, gids, first)
        if not gids:
            return
        values, stamps = list(map(LAST, tails)), list(map(LAST, heads))
        if "_" in "".join(values) or "_" in "".join(stamps):
            raise _Slow  # float() reads 1_000; the format does not
        v = np.frombuffer(array("d", map(float, values)), dtype=float)
        t = np.frombuffer(array("d", map(float, stamps)), dtype=float)
        if not (np.isfinite(t).all() and (np.abs(t) <= MS_THRESHOLD).all()):
            raise _Slow  # the exact reader says which timestamp is wrong
        self._append(np.asarray(gids, dtype=np.int64), t, v)

    def _with_new(self, lines: list[str], heads: list, tails: list, keys: list[str],
                  gids: list, first: int):
        """(series numbers, heads, tails) of a block with series not cached yet: each new series
        text is matched at its first line, in file order; comments and blank lines dropped."""
        for key in dict.fromkeys(compress(keys, map(is_, gids, repeat(None)))):
            if key[:1] != "#" and key.strip():  # a comment's text starts with '#'
                i = keys.index(key)
                three = tails[i][1] and heads[i][1]
                self._new(lines[i], (key, tails[i][2], heads[i][2]) if three else None, first + i)
        gids = list(map(self.cache.get, keys))
        missing = list(compress(range(len(lines)), map(is_, gids, repeat(None))))
        if not missing:
            return gids, heads, tails
        for i in missing:  # comments, blank lines, or lines with only blanks for series text
            line = lines[i]
            if line[:1] != "#" and line.strip():
                raise _Slow  # the exact reader says what the line is
        keep = list(map(is_not, gids, repeat(None)))
        return list(compress(gids, keep)), list(compress(heads, keep)), list(compress(tails, keep))

    def _new(self, line: str, split: tuple[str, str, str] | None, lineno: int) -> int | None:
        """A line whose series text is not cached: matched with the line pattern; its series
        cached when the line splits (``split``: series, value, timestamp) as the pattern reads
        it. None for a blank line."""
        found = omtext._LINE.match(line)
        if found is None:
            if not line.strip():
                return None
            raise _Slow  # the exact reader names what is wrong
        name, raw, value, stamp = found.groups()
        key = name + (raw or "")
        if stamp is None or split != (key, value, stamp):
            raise _Slow  # no timestamp, a comment, several spaces: line by line
        family = self.by_name.get(name)
        sid = UNWANTED
        if family is not None:
            sid = family.index.get((name, raw), None)
            if sid is None:
                sid = family._new_series(name, raw, self.path, lineno)
        gid = len(self.family_of)
        self.family_of.append(UNWANTED if family is None or sid < 0
                              else self.families.index(family))
        self.sid_of.append(sid)
        self.cache[key] = gid
        return gid

    def _append(self, gids: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples appended to their families, in file order; every sample counted."""
        self.scan.rows += len(gids)
        family_of = np.asarray(self.family_of, dtype=np.int64)[gids]
        sid_of = np.asarray(self.sid_of, dtype=np.int64)[gids]
        for index in np.unique(family_of):
            if index == UNWANTED:
                continue
            family = self.families[index]
            keep = family_of == index
            family.sid.frombytes(sid_of[keep].tobytes())
            family.t.frombytes(t[keep].tobytes())
            family.v.frombytes(v[keep].tobytes())


def read_families(path) -> tuple[dict[str, Family], Scan]:
    """Stream the file once into fresh families (``omtext.read_families``'s result, faster)."""
    reader = Reader(path)
    try:
        reader.run()
    except (_Exact, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError):
        return omtext.read_families(path)
    return reader.roles, reader.scan


def family_frame(family: Family) -> pd.DataFrame:
    """``family.frame()``, the same frame (columns, dtypes, values), built column by column from
    the series metadata with one Arrow ``take`` instead of a Python string per sample."""
    sid = np.array(family.sid, dtype=np.int64)
    out = pd.DataFrame({"sid": sid, "t": np.array(family.t, dtype=float),
                        "v": np.array(family.v, dtype=float)})
    meta = pd.DataFrame.from_records(family.meta, columns=list(family.columns))
    rows = pa.array(sid)
    for column in family.columns:
        values = meta[column].tolist()
        if not all(type(value) is str for value in values):
            return family.frame()
        taken = pa.array(values, type=pa.large_string()).take(rows)
        out[column] = pd.Series(pd.array(taken, dtype="str"), index=out.index)
    return out
