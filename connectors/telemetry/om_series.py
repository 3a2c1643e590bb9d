"""Families kept per series and interval while the file is read: node info and labels, pod info,
GPU requests (their samples never stored).

Their tables keep little of each sample (``tables.node_info``, ``tables.gpu_requests``):

- **node info and labels** (``LatestCells``): per node, the values of the series whose sample is
  latest in time (no timestamp counts as oldest; ties: the later in the file). A series' labels do
  not change, so each series' latest sample stands for all of them: the table built from those
  samples alone, in file order, is the table built from every sample.
- **pod info** (``PodCells``): per pod the node seen most often (ties: the latest, then the
  smallest name), per interval over the finite samples in the window and over the whole file:
  per series and interval, and per series, the sample count and the latest time
  (``tables.pick_most_frequent`` chooses from them as ``tables.most_frequent`` does).
- **GPU requests** (``RequestCells``): per series and interval the count and the sum of the
  finite samples in the window. ``gpu_requests`` averages them per pod, container and filled-in
  node, a group that may hold several series, and scales each mean by the group's share of the
  interval's scrapes (``tables.requests_table``: the most samples one of its series has there ÷
  the most any request series has), from the same counts; the means are pandas' bit for bit when every value
  is a whole number (not -0.0) and the family's total stays below 2**52, since every partial sum
  is then exact in any order (GPU requests are whole numbers). Otherwise ``NotStreamable``: the
  connector reads the file again with every sample kept.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from connectors.telemetry.distinct import plain_index
from connectors.telemetry.families import Family
from connectors.telemetry.grid import Grid
from connectors.telemetry.om_cells import Slots, intervals, rows_family, span_frame, spanned
from connectors.telemetry.om_counters import EXACT, NotStreamable
from connectors.telemetry.tables import (
    REQUEST_KEY,
    empty_table,
    pick_most_frequent,
    requests_table,
    with_pod_nodes,
)

#: families of rows -> frames with the reader's coded label columns (``om_stream.family_frames``)
Coder = Callable[[dict[str, Family]], dict[str, pd.DataFrame]]


class Stats:
    """Per cell (a series, or a series and an interval): the sample count, the sum of the values,
    the earliest time, and the latest sample's time and position in the family (in time, then
    file order; no time counts as the oldest)."""

    def __init__(self):
        self.slots = Slots(1)
        self.n, self.pos = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.sums, self.first, self.last = np.zeros(0), np.zeros(0), np.zeros(0)

    def add(self, cells: np.ndarray, t: np.ndarray, pos: np.ndarray,
            v: np.ndarray | None = None) -> None:
        """Samples of ``cells`` (times, positions increasing, values to sum)."""
        if not len(cells):
            return
        slots = self.slots.slots(cells)
        self._grow()
        np.add.at(self.n, slots, 1)
        if v is not None:
            np.add.at(self.sums, slots, v)
        rank = np.where(np.isnan(t), -np.inf, t)
        np.minimum.at(self.first, slots, rank)
        np.maximum.at(self.last, slots, rank)
        latest = rank == self.last[slots]  # positions only grow: the latest of these is the last
        np.maximum.at(self.pos, slots[latest], pos[latest])

    def _grow(self) -> None:
        """Room for every slot (doubling); a new slot's times start empty."""
        size, have = len(self.slots), len(self.n)
        if size <= have:
            return
        extra = max(size, 2 * have) - have
        self.n, self.pos = (np.r_[a, np.zeros(extra, np.int64)] for a in (self.n, self.pos))
        self.sums = np.r_[self.sums, np.zeros(extra)]
        self.first = np.r_[self.first, np.full(extra, np.inf)]
        self.last = np.r_[self.last, np.full(extra, -np.inf)]

    def table(self, width: int) -> pd.DataFrame:
        """One row per cell: sid, k (cell = sid * width + k), n, sum, first, last (NaN where
        no sample had a time), pos."""
        cells, size = self.slots.cells(), len(self.slots)
        sid, k = np.divmod(cells, width)
        last = self.last[:size]
        return pd.DataFrame({"sid": sid, "k": k, "n": self.n[:size], "sum": self.sums[:size],
                             "first": self.first[:size],
                             "last": np.where(np.isneginf(last), np.nan, last),
                             "pos": self.pos[:size]})


class Cells:
    """A family's samples kept per cell: what every reduced family shares (its span in the window
    for ``covered``, the position of each sample in the family)."""

    def __init__(self, family: Family, grid: Grid):
        self.family, self.grid = family, grid
        self.width = intervals(grid)
        self.seen = 0
        self.span = [np.inf, -np.inf]

    def positions(self, t: np.ndarray) -> np.ndarray:
        """The positions in the family of the next samples; their times widen the span."""
        self.span = spanned(self.span, t, self.grid)
        self.seen += len(t)
        return np.arange(self.seen - len(t), self.seen, dtype=np.int64)

    def gauges(self, t: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Which samples ``grid.gauges`` keeps: finite, in [start, end)."""
        return (t >= self.grid.start) & (t < self.grid.end) & np.isfinite(v)

    def covered(self) -> pd.DataFrame:
        """The first and last sample time in [start, end] as a frame of ``t`` (for ``covered``)."""
        return span_frame(self.span)

    def rows(self, stats: pd.DataFrame, coder: Coder) -> pd.DataFrame:
        """Per-cell rows with the series' coded label columns (t: the latest time, v: the count)
        and the cells' ``k``, ``n``, ``sum``, ``first``, ``last``, ``pos``."""
        family = rows_family(self.family, stats["sid"], stats["last"], stats["n"])
        frame = coder({"rows": family})["rows"]
        for column in ("k", "n", "sum", "first", "last", "pos"):
            frame[column] = stats[column].to_numpy()
        return frame


class LatestCells(Cells):
    """Node info or labels: each series' latest sample."""

    def __init__(self, family: Family, grid: Grid):
        super().__init__(family, grid)
        self.stats = Stats()

    def add(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples of the family, in file order."""
        self.stats.add(sid, t, self.positions(t))

    def frame(self, coder: Coder) -> pd.DataFrame:
        """The family's frame cut to each series' latest sample, in file order."""
        stats = self.stats.table(1).sort_values("pos", kind="stable")
        family = rows_family(self.family, stats["sid"], stats["last"], np.zeros(len(stats)))
        return coder({"latest": family})["latest"]


def most_frequent_of(rows: pd.DataFrame, keys: list[str], column: str,
                     carried: tuple[str, ...] = ()) -> pd.DataFrame:
    """``tables.most_frequent`` from per-cell rows (n, last, pos): counts added, the latest
    time the largest, ``carried`` from the latest sample (in time, then file order)."""
    named = rows.loc[rows[column] != ""].sort_values(["last", "pos"], kind="stable",
                                                     na_position="first")
    aggs = {"n": ("n", "sum"), "last": ("last", "max")}
    aggs.update({c: (c, "last") for c in carried})
    counts = named.groupby(keys + [column], sort=False).agg(**aggs).reset_index()
    return pick_most_frequent(counts, keys, column, carried)


class PodCells(Cells):
    """Pod info: per series and interval, and per series, the count and latest time."""

    def __init__(self, family: Family, grid: Grid):
        super().__init__(family, grid)
        self.inside, self.whole = Stats(), Stats()

    def add(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples of the family, in file order."""
        pos = self.positions(t)
        self.whole.add(sid, t, pos)
        keep = self.gauges(t, v)
        self.inside.add(sid[keep] * self.width + self.grid.index(t[keep]), t[keep], pos[keep])

    def nodes(self, coder: Coder) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``tables.pod_nodes``: each pod's node per interval, and over the whole file."""
        inside = self.rows(self.inside.table(self.width), coder)
        whole = self.rows(self.whole.table(1), coder)
        return (most_frequent_of(inside, ["namespace", "pod", "k"], "node"),
                most_frequent_of(whole, ["namespace", "pod"], "node"))


class RequestCells(Cells):
    """GPU requests: per series and interval, the count and sum of the finite samples."""

    def __init__(self, family: Family, grid: Grid):
        super().__init__(family, grid)
        self.stats = Stats()
        self.exact, self.total = True, 0.0

    def add(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples of the family, in file order."""
        pos = self.positions(t)
        keep = self.gauges(t, v)
        sid, t, v, pos = sid[keep], t[keep], v[keep], pos[keep]
        if ((v != np.floor(v)) | ((v == 0) & np.signbit(v))).any():
            self.exact = False
        self.total += float(np.abs(v).sum())
        self.stats.add(sid * self.width + self.grid.index(t), t, pos, v)

    def table(self, pods: PodCells, coder: Coder, grid: Grid) -> pd.DataFrame:
        """``tables.gpu_requests`` from the cells."""
        if not self.exact or self.total >= EXACT:
            raise NotStreamable
        rows = self.rows(self.stats.table(self.width), coder)
        if rows.empty:
            return empty_table("gpu_requests")
        frame = with_pod_nodes(rows, *pods.nodes(coder))
        grouped = frame.groupby(REQUEST_KEY)
        sums = grouped[["sum", "n"]].sum()
        return requests_table(plain_index((sums["sum"] / sums["n"]).rename("v")),
                              plain_index(grouped.n.max()), rows.groupby("k").n.max(), grid)
