"""The fast path of the OpenMetrics text reader: whole blocks of lines, one regex per series.

``omtext.scan_lines`` matches a regex against every line. Here the file (plain or gzipped) is read
in blocks of whole lines; each line is split on its last two spaces into series text, value and
timestamp, and the series text is looked up in a cache: only a series seen for the first time is
matched against ``omtext``'s line pattern (and its labels parsed, once, by its family). Values and
timestamps are converted a block at a time and appended to the families' compact arrays (series
id, timestamp, value), in file order, so every table is built from exactly the samples the
line-by-line reader gives.

A plain block (ASCII, no whitespace but spaces and newlines, no ``# EOF``) goes the vector way
(``Reader._block``): line and space positions found with numpy on the block's bytes, the pieces
viewed as one Arrow string array without a copy, series texts dictionary-encoded (each distinct
one looked up once), values and timestamps converted by Arrow's exactly rounded parser (the texts
that give NaN or an infinity by ``float()`` itself). Any other block, or a plain one the vector
way refuses, is split line by line in Python (``Reader._fast``). The file's bytes are hashed as
they are read (``Scan.sha256``: the source's fingerprint without a second pass). Given the grid
(``read_reduced``), the samples of the gauge families go to their interval cells
(``om_cells.GaugeCells``) instead of the families' arrays, in file order, those the line-by-line
reader appended moved there after each block.

Whatever the fast paths do not decide on their own goes to the exact reader: a block holding a
value or timestamp that does not convert cleanly (NaN and ±Inf convert; ``1_000`` does not), a
line without a timestamp, a tab or other whitespace, non-ASCII text or an error is re-read line by
line with ``omtext.scan_lines``, so the first error in the file is reported as it always was
(file, line, what was expected); a carriage return, a decoding or gzip fault or an over-long line
makes the whole file go through ``omtext.read_families``.
"""
from __future__ import annotations

import gzip
import hashlib
import re
import zlib
from array import array
from itertools import compress, repeat
from operator import is_, is_not, itemgetter
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from connectors.bounds import MAX_LINE
from connectors.errors import InputError
from connectors.telemetry import omtext
from connectors.telemetry.families import Family, new_families
from connectors.telemetry.grid import Grid
from connectors.telemetry.om_busy import sample_cells
from connectors.telemetry.om_cells import drain, gauge_cells
from connectors.telemetry.om_counters import counter_cells
from connectors.telemetry.om_repeats import Ascending, Repeated
from connectors.telemetry.omtext import MS_THRESHOLD, Scan

BLOCK = 1 << 20  # bytes read at a time (whole lines are handed on)
UNWANTED = -1  # a series no family keeps (its samples are counted, checked, not stored)
_COMMENTS = re.compile(rb"^# (?:TYPE|UNIT) [^\n]*", re.M)  # the lines `_sniff` reads
#: characters that make a block go line by line: whitespace the line pattern treats as a separator
#: (or float() strips) other than the space
SEPARATORS = (b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")


FIRST, LAST = itemgetter(0), itemgetter(2)


class _Exact(Exception):
    """The whole file must be read by the line-by-line reader (it names the fault exactly)."""


class _Slow(Exception):
    """This block must be read line by line."""


class _Hashed:
    """A binary file read through, its bytes hashed (sha256) as they pass."""

    def __init__(self, handle):
        self.handle = handle
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        """Read and hash."""
        data = self.handle.read(size)
        self.digest.update(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        """Never moved: every byte is hashed once, in order (gzip seeks only to rewind)."""
        raise OSError("the hashed stream is read once, in order")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class Reader:
    """One pass over a file into fresh families; with a grid, the gauge families' samples go
    into their interval cells (``om_cells``) instead of the families' arrays."""

    def __init__(self, path, grid: Grid | None = None):
        self.path = path
        self.roles, self.by_name = new_families()
        self.cells: dict[str, Any] = {**gauge_cells(self.roles, grid), **counter_cells(self.roles, grid),
                                      **sample_cells(self.roles, grid)} if grid else {}
        self.reduce: dict[int, Any] = {id(cells.family): cells for cells in self.cells.values()}
        self.scan = Scan()
        self.cache: dict[str, int] = {}       # series text -> series number (gid)
        self.families: list[Family] = list({id(f): f for f in self.roles.values()}.values())
        for family in self.families:
            family.at = None  # no row per sample: ``ascending`` checks each series' timestamps
        self.ascending = Ascending()
        self.family_of: list[int] = []        # gid -> index in self.families, or UNWANTED
        self.sid_of: list[int] = []           # gid -> the family's series id
        self.lineno = 0

    # ---- blocks ---------------------------------------------------------------------------

    def run(self) -> None:
        """Read the whole file (gunzipped when it starts with the gzip magic bytes), hashing its
        bytes as they are read: ``scan.sha256``, the file's fingerprint without a second pass."""
        with open(self.path, "rb") as handle:
            gzipped = handle.read(2) == b"\x1f\x8b"
            handle.seek(0)
            hashed = _Hashed(handle)
            with (gzip.GzipFile(fileobj=hashed, mode="rb") if gzipped else hashed) as raw:
                self._blocks(raw)
            while hashed.read(BLOCK):
                pass  # what follows the end of a gzip stream
            self.scan.sha256 = hashed.digest.hexdigest()

    def _blocks(self, raw) -> None:
        """Every block of the (decompressed) stream."""
        carry = b""
        while True:
            block = raw.read(BLOCK)
            if not block:
                if carry and not carry.startswith(b"# EOF") and carry.strip():
                    raise _Exact  # the last line has no line feed: the exact reader names it
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
        self._sniff(data)
        plain = data.isascii() and not any(c in data for c in SEPARATORS)
        if plain and not (data.startswith(b"# EOF") or b"\n# EOF" in data):
            if self._block(data):
                return None
        lines = data.decode("utf-8").split("\n")
        if len(data) > MAX_LINE and max(map(len, lines)) > MAX_LINE:
            raise _Exact
        if data.startswith(b"# EOF") or b"\n# EOF" in data:
            eof = next(i for i, line in enumerate(lines) if line.startswith("# EOF"))
            self._lines(lines[:eof], plain)
            self.lineno += 1  # the '# EOF' line
            self.scan.eof = True
            return lines[eof + 1:]
        self._lines(lines, plain)
        return None

    def _sniff(self, data: bytes) -> None:
        """Note what whole lines ``data`` say of the format (``omtext.see_comment``): a ``# UNIT``
        line, a counter family named without ``_total`` and then its ``x_total`` samples. Substring
        tests over the block, not a look at each line."""
        scan = self.scan
        if scan.openmetrics:
            return
        if b"# TYPE" in data or b"# UNIT" in data:
            for line in _COMMENTS.findall(data):
                omtext.see_comment(line.decode("utf-8", "replace"), scan)
        scan.openmetrics = scan.openmetrics or any(
            data.startswith(total) or b"\n" + total in data for total in (f"{c}_total".encode() for c in scan.counters))

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
        held = [len(family.sid) for family in self.families]
        try:
            if not plain:
                raise _Slow
            self._fast(lines, first)
        except (_Slow, ValueError, InputError):
            self.scan.rows, self.scan.untimestamped = rows, untimed
            omtext.scan_lines([line + "\n" for line in lines], self.path, self.by_name,
                              self.scan, first)
            for index, (family, n) in enumerate(zip(self.families, held)):
                self.ascending.check(index, _view(family.sid, np.int64)[n:], _view(family.t, float)[n:])
            for cells in self.cells.values():
                drain(cells)  # what the line-by-line reader appended, in file order
        self.lineno += len(lines)
        self.scan.eof_line = self.lineno

    # ---- the vector path: a plain block without '# EOF', never a Python object per line -----

    def _block(self, data: bytes) -> bool:
        """Split, look up, convert and append a plain block with array operations; False (nothing
        appended) when it must go the per-line way. Each line is split on its last two spaces, as
        ``_fast`` splits it; comments and blank lines are skipped."""
        buf = np.frombuffer(data, dtype=np.uint8)
        starts, ends = _line_spans(buf)
        if len(data) > MAX_LINE and int((ends - starts).max()) > MAX_LINE:
            raise _Exact
        spaces = np.flatnonzero(buf == 32)
        before_end = np.searchsorted(spaces, ends)
        blank = before_end - np.searchsorted(spaces, starts) == ends - starts
        comment = np.zeros(len(starts), dtype=bool)
        comment[~blank] = buf[starts[~blank]] == 35  # '#'
        kept = np.flatnonzero(~(blank | comment))
        last = before_end[kept] - 1  # the line's last space, as an index into ``spaces``
        sp1 = spaces[np.maximum(last, 0)] if len(spaces) else np.zeros(len(kept), np.int64)
        sp2 = spaces[np.maximum(last - 1, 0)] if len(spaces) else sp1
        if not ((last >= 1) & (sp2 >= starts[kept])).all():
            return False  # a line without a timestamp, or not a sample: the per-line way says
        pieces = _pieces(data, starts, ends, kept, sp1, sp2)
        keys, values, stamps = (pieces.take(pa.array(6 * kept + j)) for j in (0, 2, 4))
        try:
            gids = self._gids(keys, values, stamps, kept)
            v, t = _floats(values), _floats(stamps)
        except (_Slow, ValueError, InputError, pa.ArrowInvalid):
            return False
        if not (np.isfinite(t).all() and (np.abs(t) <= MS_THRESHOLD).all()):
            return False  # the exact reader says which timestamp is wrong
        if len(gids):
            self._append(gids, t, v)
        self.lineno += len(starts)
        self.scan.eof_line = self.lineno
        return True

    def _gids(self, keys: pa.Array, values: pa.Array, stamps: pa.Array,
              kept: np.ndarray) -> np.ndarray:
        """Series numbers of the lines: each distinct series text looked up once; a new one
        matched at its first line, in file order (``_new``)."""
        encoded = keys.dictionary_encode()
        texts = encoded.dictionary.to_pylist()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        gids = [self.cache.get(text) for text in texts]
        if None in gids:
            _, first = np.unique(codes, return_index=True)
            for code, text in enumerate(texts):
                if gids[code] is None:
                    if not text.strip():
                        raise _Slow  # no series text: the exact reader says what the line is
                    i = int(first[code])
                    line = f"{text} {values[i].as_py()} {stamps[i].as_py()}"
                    split = (text, values[i].as_py(), stamps[i].as_py())
                    gids[code] = self._new(line, split, self.lineno + 1 + int(kept[i]))
            if None in gids:
                raise _Slow
        return np.asarray(gids, dtype=np.int64)[codes]

    # ---- the per-line fast path -----------------------------------------------------------

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
        text is matched at its first line, in file order; comments and blank lines dropped. A
        line without series text (a sample without a timestamp splits so) sends the block line by
        line before any series is numbered: the exact reader numbers them in file order."""
        new = list(dict.fromkeys(compress(keys, map(is_, gids, repeat(None)))))
        if any(not key.strip() for key in new) and any(
                not key.strip() and line.strip() and line[:1] != "#" for key, line in zip(keys, lines)):
            raise _Slow
        for key in new:
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
        if family is None:
            self.scan.unread.add(name)
        else:
            known = family.index.get((name, raw), None)
            sid = family._new_series(name, raw, self.path, lineno) if known is None else known
        gid = len(self.family_of)
        self.family_of.append(UNWANTED if family is None or sid < 0
                              else self.families.index(family))
        self.sid_of.append(sid)
        self.cache[key] = gid
        return gid

    def _append(self, gids: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples appended to their families, in file order; every sample counted."""
        self.scan.rows += len(gids)
        self.scan.see(t)
        family_of = np.asarray(self.family_of, dtype=np.int64)[gids]
        sid_of = np.asarray(self.sid_of, dtype=np.int64)[gids]
        for index in np.unique(family_of):
            if index == UNWANTED:
                continue
            family = self.families[index]
            keep = family_of == index
            self.ascending.check(int(index), sid_of[keep], t[keep])
            if id(family) in self.reduce:
                self.reduce[id(family)].add(sid_of[keep], t[keep], v[keep])
                continue
            family.sid.frombytes(sid_of[keep].tobytes())
            family.t.frombytes(t[keep].tobytes())
            family.v.frombytes(v[keep].tobytes())


def _view(values, dtype) -> np.ndarray:
    """A numpy view of an ``array.array`` (no copy)."""
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def _line_spans(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive, before the newline) of every line of a block."""
    newlines = np.flatnonzero(buf == 10)
    starts = np.empty(len(newlines) + 1, dtype=np.int64)
    ends = np.empty(len(newlines) + 1, dtype=np.int64)
    starts[0], starts[1:] = 0, newlines + 1
    ends[:-1], ends[-1] = newlines, len(buf)
    return starts, ends


def _pieces(data: bytes, starts, ends, kept, sp1, sp2) -> pa.Array:
    """The block as one string array over its own bytes (no copy), six pieces a line: series
    text, space, value, space, timestamp, newline; a skipped line is all series text."""
    bounds = np.empty((len(starts), 6), dtype=np.int64)
    bounds[:, 0] = starts
    bounds[:, 1:] = ends[:, None]
    bounds[kept, 1], bounds[kept, 2] = sp2, sp2 + 1
    bounds[kept, 3], bounds[kept, 4] = sp1, sp1 + 1
    offsets = np.append(bounds.reshape(-1), len(data))
    return pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets),
                                            pa.py_buffer(data))


def _floats(texts: pa.Array) -> np.ndarray:
    """Numbers of sample texts as ``float()`` reads them: Arrow's exact conversion, and
    ``float()`` itself for the texts that give NaN or an infinity (Arrow reads ``nan(1)``,
    which ``float()`` refuses: ValueError). Arrow refuses ``1_000`` (ArrowInvalid)."""
    out = pc.cast(texts, pa.float64()).to_numpy(zero_copy_only=False).copy()
    odd = np.flatnonzero(~np.isfinite(out))
    if len(odd):
        out[odd] = [float(text) for text in texts.take(pa.array(odd)).to_pylist()]
    return out


def read_families(path) -> tuple[dict[str, Family], Scan]:
    """Stream the file once into fresh families (``omtext.read_families``'s result, faster)."""
    roles, scan, _ = read_reduced(path, None)
    return roles, scan


def read_reduced(path, grid: Grid | None) -> tuple[dict[str, Family], Scan, dict | None]:
    """``read_families``, and with a grid the gauge and counter families reduced into their
    interval cells while reading (their arrays left empty); None for the cells without a grid.
    A file the line-by-line reader reads whole has its gauge families reduced after the read."""
    reader = Reader(path, grid)
    try:
        reader.run()
    except (_Exact, Repeated, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError):
        roles, scan = omtext.read_families(path)
        return roles, scan, (reduced(roles, grid) if grid else None)
    omtext.check_eof(path, reader.scan, reader.lineno)
    return reader.roles, reader.scan, reader.cells or None


def reduced(roles: dict[str, Family], grid: Grid) -> dict:
    """The gauge families' cells, filled from families read whole."""
    cells = gauge_cells(roles, grid)
    for one in cells.values():
        drain(one)
    return cells


def family_frames(roles: dict[str, Family], families: dict[str, Family] | None = None
                  ) -> dict[str, pd.DataFrame]:
    """One frame per family (of ``families``, default ``roles``): ``Family.frame()``'s rows and
    columns, with each label column a Categorical over a vocabulary shared by every family of
    ``roles`` that has the column (sorted, ``""`` included), so that the tables group, sort and
    merge integer codes in the strings' order and no sample holds a string
    (``connectors.telemetry.distinct``). A family whose metadata are not all strings keeps
    ``Family.frame()``'s plain columns."""
    return family_coder(roles)(families or roles)


def family_coder(roles: dict[str, Family]):
    """``family_frames(roles, families)`` as a function of ``families``, the vocabularies made
    once (for frames of rows made after the read, with the same series)."""
    vocabulary: dict[str, set] = {}
    for family in roles.values():
        for i, column in enumerate(family.columns):
            vocabulary.setdefault(column, {""}).update(meta[i] for meta in family.meta)
    dtypes = {column: pd.CategoricalDtype(sorted(values)) for column, values in vocabulary.items()
              if all(type(value) is str for value in values)}

    def coded(families: dict[str, Family]) -> dict[str, pd.DataFrame]:
        return {role: _coded_frame(family, dtypes) for role, family in families.items()}
    return coded


def _coded_frame(family: Family, dtypes: dict[str, pd.CategoricalDtype]) -> pd.DataFrame:
    """A family's samples with its label columns as Categoricals of ``dtypes``."""
    if any(column not in dtypes for column in family.columns):
        return family.frame()
    sid = _view(family.sid, np.int64)
    out = pd.DataFrame({"sid": sid, "t": _view(family.t, float), "v": _view(family.v, float)},
                       copy=False)  # views of the family's arrays, not copies
    for i, column in enumerate(family.columns):
        dtype = dtypes[column]
        per_series = dtype.categories.get_indexer([meta[i] for meta in family.meta])
        codes = per_series.astype(np.int32)[sid] if len(per_series) else np.zeros(0, np.int32)
        out[column] = pd.Categorical.from_codes(codes, dtype=dtype)
    return out
