"""Counter families reduced into the interval grid while the file is read.

``tables.counter_increases`` pairs each valid sample of a series with the next one (samples in
[start, end], sorted by series and time) and hands the per-pair increases on: ``traffic``,
``serving_stats`` and ``token_histograms`` sum them per key and interval. ``CounterCells`` makes
the same pairs block by block, in file order, keeping for each series only its last valid sample,
its drops (resets) and, for the counters that count whole things (``WHOLE``: requests, tokens,
histogram buckets), the sum of its increases per interval instead of the pairs. The frame it
hands on is ``counter_increases``' with each series' run of pairs in one interval collapsed to
one row holding their sum (``counted``). The tables are the same, bit for bit:

- the increases of a whole counter are whole numbers, as are all their partial sums while the
  total stays below 2**53: every order and grouping of the additions (pandas' compensated sum,
  its ``reduceat`` pairwise sum, a sum per series first) gives the exact total;
- every group-by of those tables keys on the metric and the family, so a group holds only whole
  counters or only the others, whose pairs are kept, in the same order;
- collapsing a run of rows of one group into one row leaves the sequence of groups in row order
  as monotonic as it was, so pandas takes the same of its two sums for the other groups.

Where that does not hold (a whole counter with a fractional value, a total of 2**53 or more, a
series going back in time or repeating a timestamp) ``counted`` raises ``NotStreamable`` and the
connector reads the file again without reducing.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from connectors.telemetry.families import Family
from connectors.telemetry.grid import Grid
from connectors.telemetry.om_cells import Slots, intervals, rows_family, span_frame, spanned
from connectors.telemetry.phase_families import BUCKET
from connectors.telemetry.tables import Counted
from connectors.telemetry.validity import counter_name, counter_reasons, excluded_table, resets_table

#: counter columns that count whole things (their increases are summed per series and interval)
WHOLE = frozenset({"requests", "prompt_tokens", "generated_tokens"})
EXACT = 2.0 ** 52  # each family's total below it: both families' sums stay exact
COUNTER_ROLES = ("counters", "server_counters")


class NotStreamable(Exception):
    """The reduced counters would not give the tables exactly: read the file whole."""


def is_whole(column: str) -> bool:
    """Whether a counter column counts whole things."""
    return column in WHOLE or column.startswith(BUCKET)


class CounterCells:
    """One counter family's pairs, reduced per series and interval where they count whole things."""

    def __init__(self, family: Family, grid: Grid):
        self.family, self.grid = family, grid
        self.width = intervals(grid)
        self.slots = Slots(self.width)                 # series x interval cells with pairs
        self.metric = family.columns.index("metric")
        self.kinds: list[bool] = []                    # per described series: whole or not
        self.whole = np.zeros(0, bool)                 # the same, per series slot
        self.last_t, self.last_v = np.zeros(0), np.zeros(0)
        self.drops = np.zeros(0, np.int64)
        self.sums, self.counts = np.zeros(0), np.zeros(0, np.int64)  # per slot
        self.total, self.exact = 0.0, True
        self.pairs: list[tuple] = []                   # (sid, t, v, increase, k) of the others
        self.bad: list[tuple] = []                     # (sid, t, v) of excluded samples
        self.span = [np.inf, -np.inf]

    def add(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples of the family (series ids, times in seconds, values), in file order."""
        inside = (t >= self.grid.start) & (t <= self.grid.end)
        if not inside.any():
            return
        sid, t, v = sid[inside], t[inside], v[inside]
        self.span = spanned(self.span, t, self.grid)
        self._grow(int(sid.max()) + 1)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(v) & (v >= 0)
        if not ok.all():
            self.bad.append((sid[~ok], t[~ok], v[~ok]))
        order = np.argsort(sid[ok], kind="stable")  # each series' samples, in file order
        self._pair(*(a[ok][order] for a in (sid, t, v)))

    def _pair(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Each valid sample paired with the one before it in its series (the last of the
        series carried from the blocks before)."""
        if not len(sid):
            return
        whole = self.whole[sid]
        if ((v[whole] != np.floor(v[whole])) | (v[whole] >= EXACT)).any():
            self.exact = False
        first = np.r_[True, sid[1:] != sid[:-1]]
        earlier_t = np.where(first, self.last_t[sid], np.r_[np.nan, t[:-1]])
        earlier_v = np.where(first, self.last_v[sid], np.r_[np.nan, v[:-1]])
        last = np.r_[sid[1:] != sid[:-1], True]
        self.last_t[sid[last]], self.last_v[sid[last]] = t[last], v[last]
        paired = ~np.isnan(earlier_t)
        if (t[paired] <= earlier_t[paired]).any():
            self.exact = False  # back in time, or a repeated timestamp
        sid, t, v, whole = sid[paired], t[paired], v[paired], whole[paired]
        earlier_t, earlier_v = earlier_t[paired], earlier_v[paired]
        dropped = v < earlier_v
        increase = np.where(dropped, v, v - earlier_v)  # a drop: restarted from 0
        k = self.grid.index(earlier_t)
        np.add.at(self.drops, sid, dropped)
        slots = self.slots.slots(sid[whole] * self.width + k[whole])
        self.sums, self.counts = self.slots.grown(self.sums, self.counts)
        np.add.at(self.sums, slots, increase[whole])
        np.add.at(self.counts, slots, 1)
        self.total += float(increase[whole].sum())
        rest = ~whole
        if rest.any():
            self.pairs.append((sid[rest], t[rest], v[rest], increase[rest], k[rest]))

    def counted(self) -> tuple[Family, np.ndarray, np.ndarray, Family]:
        """(the pairs as a family of rows: the whole counters' runs collapsed, t and v NaN; their
        increases; their intervals; the excluded samples as a family), in the order of
        ``counter_increases``: by series, then time."""
        if not self.exact or self.total >= EXACT:
            raise NotStreamable
        live = np.flatnonzero(self.counts)
        sid, k = np.divmod(self.slots.cells()[live], self.width)
        nan = np.full(len(live), np.nan)
        parts = [(sid, nan, nan, self.sums[live], k, k.astype(float))]
        parts += [(s, t, v, inc, kk, t) for s, t, v, inc, kk in self.pairs]
        sid, t, v, increase, k, within = (np.concatenate(p) for p in zip(*parts))
        order = np.lexsort((within, sid))
        rows = self._rows(sid[order], t[order], v[order])
        bad = self._rows(*(np.concatenate(p) for p in zip(*self.bad))) if self.bad else (
            self._rows(np.zeros(0, np.int64), np.zeros(0), np.zeros(0)))
        return rows, increase[order], k[order], bad

    def resets(self) -> tuple[list[tuple], np.ndarray]:
        """(metadata of each series with drops, its drops)."""
        with_drops = np.flatnonzero(self.drops)
        return [self.family.meta[i] for i in with_drops.tolist()], self.drops[with_drops]

    def covered(self) -> pd.DataFrame:
        """The first and last sample time in [start, end] as a frame of ``t`` (for ``covered``)."""
        return span_frame(self.span)

    def _rows(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> Family:
        """A family of these rows, with this family's series."""
        return rows_family(self.family, sid, t, v)

    def _grow(self, series: int) -> None:
        """Room for ``series`` series (doubling), and which of the described ones are whole."""
        meta, known = self.family.meta, len(self.kinds)
        self.kinds += [is_whole(str(m[self.metric])) for m in meta[known:]]
        if series > len(self.whole) or len(self.kinds) > known:
            size = max(series, len(self.kinds), 2 * len(self.whole) if series > len(self.whole)
                       else len(self.whole))
            extra = size - len(self.whole)
            self.whole = np.asarray(self.kinds + [False] * (size - len(self.kinds)), dtype=bool)
            self.last_t = np.concatenate([self.last_t, np.full(extra, np.nan)])
            self.last_v = np.concatenate([self.last_v, np.full(extra, np.nan)])
            self.drops = np.concatenate([self.drops, np.zeros(extra, np.int64)])


def counter_cells(roles: dict[str, Family], grid: Grid) -> dict[str, CounterCells]:
    """Empty cells for each counter family of ``roles``."""
    return {role: CounterCells(roles[role], grid) for role in COUNTER_ROLES}


def counted_from_cells(cells: CounterCells, frames: Callable[[dict[str, Family]], dict[str, pd.DataFrame]]
            ) -> Counted:
    """``tables.counter_increases``' result from the cells (``frames``: families of rows ->
    frames with the reader's coded label columns)."""
    rows, increase, k, bad_rows = cells.counted()
    coded = frames({"pairs": rows, "bad": bad_rows})
    bad = coded["bad"]
    bad = bad.assign(metric=counter_name(bad["family"], bad["metric"]),
                     reason=counter_reasons(bad["v"]))
    metas, drops = cells.resets()
    columns = cells.family.columns
    named = pd.DataFrame.from_records(metas, columns=list(columns)) if metas else pd.DataFrame(
        {"family": pd.Series([], dtype=object), "metric": pd.Series([], dtype=object)})
    return Counted(coded["pairs"].assign(increase=increase, k=k), excluded_table(bad),
                   resets_table(counter_name(named["family"], named["metric"]), drops))
