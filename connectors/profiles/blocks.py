"""Chunk columns merged into a trace's columns (connectors/profiles/columns.py decodes the chunks).

A trace is read in chunks of decoded events; every ``BLOCK`` chunks are merged into one block
whose integer columns are narrowed to the smallest type that holds them, so a 50-million-event
trace is held as a few hundred compact blocks rather than thousands of wide chunks.

Times are narrowed too (:func:`timeline`): durations that are all whole microseconds are held as
integers, and so are start times (after the trace's base) when they are; either stays float64
otherwise. Integers below 2^53 are exact as floats, so every sum, difference and comparison the
analyzers make gives the same numbers, in 1 to 4 bytes an event instead of 8.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from connectors.profiles.columns import COLUMNS, EXTRA_TYPES, EXTRAS


def concatenate(parts: list[dict[str, np.ndarray]], trace_role: int) -> dict[str, Any]:
    """Join the blocks into the trace's columns (see :func:`merge_parts`), grouping the extras;
    timestamps become start times (:func:`timeline`; the base ignores events of ``trace_role``),
    block by block into one column of their final type."""
    base = min((float(part["ts"][part["role"] != trace_role].min()) for part in parts
                if (part["role"] != trace_role).any()), default=0.0)
    stamps = [part.pop("ts") for part in parts]
    out: dict[str, Any] = merge_parts(parts, skip=("ts",))
    out.update(timeline(stamps, out.pop("dur"), base))
    for group, fields in EXTRAS.items():
        out[group] = {field: out.pop(f"{group}.{field}") for field in fields}
    return out


FIXED = {"role", "ts", "kernel.occupancy"}
"""Columns kept in their own type (the others are integers, narrowed by :func:`compact`)."""
NARROW = (np.int8, np.int16, np.int32, np.int64)
BLOCK = 64
"""Chunks merged into one block while a trace is read (few arrays alive, each of them compact)."""


def compact(values: np.ndarray) -> np.ndarray:
    """An integer column in the narrowest signed type that holds its values (ids, streams,
    correlations, row numbers): the same numbers in a quarter or an eighth of the memory."""
    if values.size == 0:
        return values.astype(np.int8)
    low, high = int(values.min()), int(values.max())
    for dtype in NARROW:
        limits = np.iinfo(dtype)
        if limits.min <= low and high <= limits.max:
            return values.astype(dtype, copy=False)
    return values


def merge_parts(parts: list[dict[str, np.ndarray]], skip: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """One part from many (``parts`` is emptied): each column concatenated, one column at a time
    (each chunk's copy is freed as it goes), integer columns narrowed by :func:`compact`."""
    out: dict[str, np.ndarray] = {}
    names = list(COLUMNS) + [f"{group}.{field}" for group, fields in EXTRAS.items() for field in fields]
    for name in (n for n in names if n not in skip):
        pieces = [part.pop(name) for part in parts]
        dtype = COLUMNS.get(name) or EXTRA_TYPES[name.split(".")[1]]
        if name in FIXED:
            out[name] = np.concatenate(pieces).astype(dtype, copy=False) if pieces else np.zeros(0, dtype)
        elif name == "dur":
            out[name] = narrow_times(np.concatenate(pieces) if pieces else np.zeros(0, dtype))
        else:
            out[name] = compact(np.concatenate(pieces) if pieces else np.zeros(0, dtype))
        del pieces
    parts.clear()
    return out


def accumulate(chunks) -> list[dict[str, np.ndarray]]:
    """The chunk columns of an iterable, merged every BLOCK chunks (chunked accumulation: a
    50-million-event trace is a few hundred compact blocks, not thousands of wide chunks)."""
    blocks: list[dict[str, np.ndarray]] = []
    pending: list[dict[str, np.ndarray]] = []
    for chunk in chunks:
        pending.append(chunk)
        if len(pending) == BLOCK:
            blocks.append(merge_parts(pending))
    if pending:
        blocks.append(merge_parts(pending))
    return blocks


WHOLE_LIMIT = 1 << 30
"""Times held as integers stay within ±2^30, so that the sum or difference of two fits their type."""
PIECE = 1 << 22
"""Events converted at a time (few temporaries of a whole column)."""


def narrow_times(values: np.ndarray) -> np.ndarray:
    """A time column (us) as the narrowest integers when every value is a whole number within
    ±WHOLE_LIMIT (exact, and the sum or difference of two still fits), else as float64."""
    if values.dtype.kind in "iu" or values.size == 0:
        return compact_times(values) if values.size else values.astype(np.int8)
    if not _whole(values):
        return values.astype(np.float64, copy=False)
    return compact_times(values)


def _whole(values: np.ndarray) -> bool:
    """Whether every value is a whole number within ±WHOLE_LIMIT, checked PIECE values at a time."""
    for at in range(0, values.size, PIECE):
        piece = values[at:at + PIECE]
        if not (np.all(np.abs(piece) <= WHOLE_LIMIT) and np.array_equal(piece, np.trunc(piece))):
            return False
    return True


def compact_times(values: np.ndarray, reach: int = 0) -> np.ndarray:
    """Whole-number times in the narrowest integer type whose range holds twice the larger of
    their largest magnitude and ``reach`` (so that ``end = start + dur``, with durations up to
    ``reach``, and the difference of two such times do not overflow)."""
    high = max(abs(int(values.min())), abs(int(values.max())), reach) if values.size else reach
    for dtype in NARROW:
        if 2 * high <= np.iinfo(dtype).max:
            return values.astype(dtype, copy=False)
    return values.astype(np.int64)


def timeline(stamps: list[np.ndarray], dur: np.ndarray, base: float) -> dict[str, Any]:
    """The time fields of a Trace from its timestamps (float64 pieces, in row order, overwritten)
    and durations: ``start`` (us after ``base``) and ``dur``, narrowed as :func:`narrow_times`
    does, ``base``, and ``written_ts``: the timestamps as written, kept only when a start plus the
    base does not give its timestamp back exactly (None otherwise: the start column stands for both).

    The pieces are copied into the start column one at a time and freed as they go.
    """
    written = None if all(_restores(piece, base) for piece in stamps) else np.concatenate(stamps)
    for piece in stamps:
        np.subtract(piece, base, out=piece)
    dur = narrow_times(dur)
    whole = dur.dtype.kind in "iu" and all(_whole(piece) for piece in stamps)
    dtype: Any = np.float64
    if whole:
        reach = int(dur.max()) if dur.size else 0
        high = max([reach] + [max(abs(int(p.min())), abs(int(p.max()))) for p in stamps if p.size])
        dtype = next((t for t in NARROW if 2 * high <= np.iinfo(t).max), np.int64)
    start = np.empty(sum(piece.size for piece in stamps), dtype=dtype)
    at = 0
    stamps.reverse()
    while stamps:                          # each piece is freed once copied
        piece = stamps.pop()
        start[at:at + piece.size] = piece
        at += piece.size
    return {"start": start, "dur": dur, "base": base, "written_ts": written}


def _restores(ts: np.ndarray, base: float) -> bool:
    """Whether ``(ts - base) + base == ts`` for every timestamp (checked PIECE at a time)."""
    for at in range(0, ts.size, PIECE):
        piece = ts[at:at + PIECE]
        if not np.array_equal((piece - base) + base, piece):
            return False
    return True
