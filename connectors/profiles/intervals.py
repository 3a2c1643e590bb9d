"""Interval arithmetic and column selection over trace columns, for traces of tens of millions of events.

Intervals are (starts, ends) arrays. Selections return the column itself (a view, no copy) when
every row is selected, and :func:`merge` returns its input when it is already sorted and
disjoint (a trace of back-to-back kernels), so that a trace whose events are all GPU work is
analysed with few copies of its columns. Start and end columns are float64 or whole-number
integers (connectors/profiles/blocks.py); every result is the same for both.
"""
from __future__ import annotations

import numpy as np

PIECE = 1 << 22
"""Values compared at a time by :func:`ascending` (its temporaries stay small)."""
PER_EVENT_ROWS = 1 << 21
"""Up to this many GPU work events with fractional durations, per-group times are summed by pandas
over one row per event (compensated sums: the reference the outputs were made with); above it,
and whenever durations are whole microseconds (whose sums are exact in any order), per group by
:func:`group_sums`, with no per-event table."""


def take(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """``values[mask]``; ``values`` itself (no copy) when ``mask`` is None or selects every row."""
    if mask is None or (mask.size == values.size and bool(mask.all())):
        return values
    return values[mask]


def ascending(values: np.ndarray) -> bool:
    """Whether ``values`` never decreases (checked PIECE values at a time)."""
    for at in range(0, max(values.size - 1, 0), PIECE):
        piece = values[at:at + PIECE + 1]
        if not bool(np.all(piece[1:] >= piece[:-1])):
            return False
    return True


def _disjoint(starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether each interval of a sorted set starts after the previous one ends (nothing to merge)."""
    last = starts.size - 1
    for at in range(0, max(last, 0), PIECE):
        stop = min(at + PIECE, last)
        if not bool(np.all(starts[at + 1:stop + 1] > ends[at:stop])):
            return False
    return True


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array: ``np.unique`` without its options, which
    imports numpy.ma on first use (15 ms)."""
    ordered = np.sort(values, kind="stable")
    if ordered.size < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def member(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Per value: whether it is in ``pool`` (``np.isin`` for integer arrays, by binary search; the
    sorting path of np.isin calls np.unique, which imports numpy.ma on first use)."""
    if values.size == 0 or pool.size == 0:
        return np.zeros(values.shape, dtype=bool)
    pool = np.sort(pool)
    at = np.minimum(np.searchsorted(pool, values), pool.size - 1)
    return pool[at] == values


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted intervals covering the same points as [starts, ends).

    A set already sorted and disjoint is returned as it is; a large unsorted one is merged PIECE
    intervals at a time and the pieces' unions merged again (a union does not depend on the
    grouping: the same intervals, with no sort of the whole set when its pieces overlap)."""
    if starts.size == 0:
        return starts.astype(np.float64), ends.astype(np.float64)
    if ascending(starts):
        if _disjoint(starts, ends):
            return starts, ends
        return _merge_sorted(starts, ends)
    if starts.size > PIECE:
        pieces = [merge(starts[at:at + PIECE], ends[at:at + PIECE]) for at in range(0, starts.size, PIECE)]
        s, e = np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])
        if s.size < starts.size:
            del pieces
            return merge(s, e)
        del pieces, s, e
    order = np.argsort(starts, kind="stable")
    return _merge_sorted(starts[order], ends[order])


def _merge_sorted(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals sorted by start."""
    reach = np.maximum.accumulate(e)
    opens = np.empty(s.size, dtype=bool)
    opens[0] = True
    opens[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(opens)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last]


def overlapping(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of one set (a stream's work) that begin before an earlier one ends (earlier by
    start, ties in the set's order), as their positions in the set and, for each, the latest end of
    the earlier ones: the point up to which the earlier work already covers it. Nothing for a sorted
    set that never overlaps itself; scanned PIECE intervals at a time."""
    none = np.zeros(0, dtype=np.int64), ends[:0]
    if starts.size < 2:
        return none
    order = None if ascending(starts) else np.argsort(starts, kind="stable")
    s, e = (starts, ends) if order is None else (starts[order], ends[order])
    found, covered, carry = [], [], None
    for first in range(0, s.size, PIECE):
        piece_s, reach = s[first:first + PIECE], np.maximum.accumulate(e[first:first + PIECE])
        prior = np.empty_like(reach)
        prior[0] = piece_s[0] if carry is None else carry
        prior[1:] = reach[:-1] if carry is None else np.maximum(reach[:-1], carry)
        hit = np.flatnonzero(piece_s < prior)
        found.append(hit + first)
        covered.append(prior[hit])
        carry = reach[-1] if carry is None else max(carry, reach[-1])
    at = np.concatenate(found)
    if at.size == 0:
        return none
    return (at if order is None else order[at]), np.concatenate(covered)


def length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total length of disjoint intervals (whole-number ones summed PIECE at a time: exact, and no
    copy of the column)."""
    if starts.size == 0:
        return 0.0
    if starts.dtype.kind in "iu" and ends.dtype.kind in "iu":
        return float(sum(int(np.sum(ends[at:at + PIECE] - starts[at:at + PIECE])) for at in range(0, starts.size, PIECE)))
    return float(np.sum(ends - starts))


def overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two disjoint, sorted interval sets."""
    (a_s, a_e), (b_s, b_e) = a, b
    if a_s.size == 0 or b_s.size == 0:
        return 0.0
    return float(np.sum(_covered_up_to(a_s, a_e, b_e) - _covered_up_to(a_s, a_e, b_s)))


def covered_up_to(merged: tuple[np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    """For each x, the length of the disjoint, sorted intervals ``merged`` that lies before x."""
    return _covered_up_to(merged[0], merged[1], np.asarray(x, dtype=np.float64))


def _covered_up_to(starts: np.ndarray, ends: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each x, the length of the disjoint intervals that lies before x."""
    before = np.concatenate(([0.0], np.cumsum(ends - starts)))
    i = np.searchsorted(starts, x, side="right")     # intervals starting at or before x
    inside = np.where(i > 0, np.clip(x - starts[np.maximum(i - 1, 0)], 0.0, None), 0.0)
    partial = np.minimum(inside, (ends - starts)[np.maximum(i - 1, 0)])
    return before[np.maximum(i - 1, 0)] * (i > 0) + partial


def positions(mask: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(mask)`` as int32 when the rows fit (half the memory of int64), found
    PIECE rows at a time."""
    if mask.size >= 1 << 31:
        return np.flatnonzero(mask)
    pieces = [np.flatnonzero(mask[at:at + PIECE]).astype(np.int32) + np.int32(at) for at in range(0, mask.size, PIECE)]
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)


def lean(values: np.ndarray) -> np.ndarray:
    """An integer column that holds one value throughout as a read-only broadcast of it (no
    memory); any other as itself."""
    if values.size > 1 and bool((values == values[0]).all()):
        return np.broadcast_to(values[:1].copy(), values.shape)     # a copy: the column itself is freed
    return values


def group_sums(codes: np.ndarray, values: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per code in [0, groups): the sum of ``values`` and the count, PIECE rows at a time (no
    float64 copy of the column). Whole-number values sum exactly, in any order."""
    sums, counts = np.zeros(groups), np.zeros(groups, dtype=np.int64)
    for at in range(0, codes.size, PIECE):
        piece = codes[at:at + PIECE]
        sums += np.bincount(piece, weights=values[at:at + PIECE], minlength=groups)
        counts += np.bincount(piece, minlength=groups)
    return sums, counts


def distinct_keys(key: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for keys in [0, bound): by a table of the bound's
    size instead of a sort (no sorting, for traces of millions of events); the inverse in the
    narrowest integer type."""
    if bound > max(4 * key.size, 1 << 16):
        keys, inverse = np.unique(key, return_inverse=True)
        return keys, _narrowest(inverse.ravel())
    present = np.zeros(bound, dtype=bool)
    for at in range(0, key.size, PIECE):
        present[key[at:at + PIECE]] = True
    keys = np.flatnonzero(present)
    index = _narrowest(np.cumsum(present) - 1)
    return keys, lookup(index, key)


def _narrowest(values: np.ndarray) -> np.ndarray:
    """Non-negative integer ids in the narrowest signed type that holds them."""
    high = int(values.max()) if values.size else 0
    for dtype in (np.int8, np.int16, np.int32):
        if high <= np.iinfo(dtype).max:
            return values.astype(dtype, copy=False)
    return values


def among(values: np.ndarray, codes) -> np.ndarray:
    """``np.isin(values, codes)`` for a few codes, one comparison each (np.isin widens a column of
    small integers to 8 bytes a value)."""
    out = np.zeros(values.shape, dtype=bool)
    for code in codes:
        out |= values == code
    return out


def lookup(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``table[index]``, PIECE indices at a time (numpy widens a whole index column to 8 bytes a
    value first)."""
    if index.size <= PIECE:
        return table[index]
    out = np.empty(index.shape, dtype=table.dtype)
    for at in range(0, index.size, PIECE):
        out[at:at + PIECE] = table[index[at:at + PIECE]]
    return out
