"""Gauge families reduced into the interval grid while the file is read: no array per sample.

The OpenMetrics reader (``om_stream``) hands the samples of the gauge families whose tables are
interval means (``GAUGE_KEYS``: vLLM queue gauges, the serving servers' gauges, DCGM evidence,
replicas) to a ``GaugeCells`` block by block, in file order, instead of appending them to the
family's arrays. Each cell (one key of the table's group-by and one interval of the grid) keeps
the count and the sum of its finite samples in [start, end), summed as pandas sums the same rows
in ``groupby(keys).v.mean()``, so that the means are bit for bit those of the per-sample frames.
pandas sums a group two ways: where the rows come in group order (each group's rows together,
the groups in sorted key order), one ``np.add.reduceat`` segment per group (the first value plus
numpy's pairwise sum of the rest); otherwise a compensated (Kahan) sum in row order. A cell keeps
both (``kahan_add``; each run of a cell's samples summed when it ends, while the file is still
in group order) and ``means`` picks the one pandas would. What a cell holds does not grow with
the samples: memory grows with the cells that hold samples (``Slots``), not with the file.
"""
from __future__ import annotations

from array import array

import numpy as np
import pandas as pd

from connectors.telemetry.families import DCGM_EVIDENCE, EVIDENCE_COLUMNS, REPLICA_COLUMNS, SERVING_COLUMNS, Family
from connectors.telemetry.grid import NS, Grid

#: role -> the group-by of its interval means, in index order ("k": the interval)
#: samples held before they are summed (in batches: fewer, longer vector steps), per family
BATCH = 1 << 16
GAUGE_KEYS: dict[str, list[str]] = {
    "queue": ["k", "model_name", "namespace", "pod", "engine", "metric"],
    "server_gauges": [*SERVING_COLUMNS, "k"],
    "dcgm_evidence": [*EVIDENCE_COLUMNS, "k"],
    "replicas": [*REPLICA_COLUMNS, "k"],
}


def kahan_add(cells: np.ndarray, values: np.ndarray, sums: np.ndarray, comps: np.ndarray,
              counts: np.ndarray) -> None:
    """Add ``values`` to the compensated sums of their ``cells``, each cell's values in the given
    order, as pandas' group sums and means do (``y = x - c; t = s + y; c = (t - s) - y; s = t``,
    a NaN compensation reset to 0): the state carries over from one call to the next, so batches
    added one after another give the sums of the whole. Vectorised across cells: step j adds the
    j-th value of every cell that has one (the cells sorted longest first, so those are a
    prefix); a cell whose sum overflows is added again value by value (``_kahan_one``)."""
    if not len(cells):
        return
    order = np.argsort(cells, kind="stable")
    ranked = cells[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    lengths = np.diff(np.r_[starts, len(ranked)])
    longest = np.argsort(-lengths, kind="stable")
    ids = ranked[starts[longest]]
    row = np.empty(len(starts), np.int64)
    row[longest] = np.arange(len(starts))
    run = np.repeat(np.arange(len(starts)), lengths)
    steps = np.zeros((int(lengths.max()), len(starts)))  # steps[j, r]: the r-th cell's j-th value
    steps[np.arange(len(ranked)) - starts[run], row[run]] = values[order]
    s, c = sums[ids], comps[ids]
    y, t = np.empty_like(s), np.empty_like(s)
    going = len(lengths) - np.searchsorted(np.sort(lengths), np.arange(len(steps)), side="right")
    for j, n in enumerate(going.tolist()):
        np.subtract(steps[j, :n], c[:n], out=y[:n])
        np.add(s[:n], y[:n], out=t[:n])
        np.subtract(t[:n], s[:n], out=c[:n])
        np.subtract(c[:n], y[:n], out=c[:n])
        s[:n] = t[:n]
    for r in np.flatnonzero(~(np.isfinite(s) & np.isfinite(c))).tolist():
        s[r], c[r] = _kahan_one(sums[ids[r]], comps[ids[r]], steps[:lengths[longest[r]], r])
    sums[ids], comps[ids] = s, c
    counts[ids] += lengths[longest]


def _kahan_one(s: float, c: float, values: np.ndarray) -> tuple[float, float]:
    """One cell's compensated sum, value by value (pandas' rule for a NaN compensation)."""
    for x in values.tolist():
        y = x - c
        t = s + y
        c = (t - s) - y
        if c != c:
            c = 0.0
        s = t
    return s, c


class Slots:
    """A slot per cell that has samples (cell number -> slot, in the order first seen), so that a
    family's state grows with the cells that hold samples, not with keys x intervals."""

    def __init__(self, width: int):
        self.width = width                   # intervals of the grid (+1): cell = key * width + k
        self.of: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.of)

    def slots(self, cells: np.ndarray) -> np.ndarray:
        """The slot of each cell number (a new cell gets the next slot)."""
        distinct, inverse = np.unique(cells, return_inverse=True)
        of = self.of
        return np.asarray([of.setdefault(c, len(of)) for c in distinct.tolist()],
                          dtype=np.int64)[inverse.reshape(-1)]

    def cells(self) -> np.ndarray:
        """The cell number of each slot."""
        return np.fromiter(self.of, dtype=np.int64, count=len(self.of))

    def grown(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        """The arrays (one value per slot) with room for every slot (doubling)."""
        size = len(self.of)
        if not arrays or size <= len(arrays[0]):
            return arrays
        size = max(size, 2 * len(arrays[0]))
        return tuple(np.concatenate([a, np.zeros(size - len(a), a.dtype)]) for a in arrays)


class Runs:
    """The sums pandas takes where a frame's rows come in group order (``np.add.reduceat``: per
    group, its first value plus numpy's pairwise sum of the rest), kept while every cell's values
    make one run: each run summed when the next one begins, the open one's values pending."""

    def __init__(self):
        self.order: list[int] = []           # cells, in the order their runs began
        self.seen: set[int] = set()
        self.sums: dict[int, float] = {}
        self.pending: list[np.ndarray] = []  # values of the open run (the last of ``order``)
        self.whole = True                    # no cell has come back after another one

    def add(self, cells: np.ndarray, values: np.ndarray) -> None:
        """Values of a block, in file order, with their cells."""
        if not self.whole or not len(cells):
            return
        bounds = np.r_[np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]]), len(cells)]
        ids = cells[bounds[:-1]].tolist()
        first = int(bool(self.order) and ids[0] == self.order[-1])
        if first:
            self.pending.append(values[:bounds[1]])
        new = ids[first:]
        if not new:
            return
        if len(set(new)) < len(new) or not self.seen.isdisjoint(new):
            self.whole, self.pending, self.sums = False, [], {}
            return
        self.close()
        inner = bounds[first:-2]
        if len(inner):
            self.sums.update(zip(new[:-1], np.add.reduceat(values[:bounds[-2]], inner).tolist()))
        self.pending = [values[bounds[-2]:]]
        self.order += new
        self.seen.update(new)

    def close(self) -> None:
        """The open run summed."""
        if self.pending:
            self.sums[self.order[-1]] = float(np.add.reduceat(np.concatenate(self.pending), [0])[0])
            self.pending = []

    def in_order(self, cells: np.ndarray) -> bool:
        """Whether the runs came one per cell, in the order of ``cells`` (sorted by key)."""
        self.close()
        return self.whole and self.order == cells.tolist()


class GaugeCells:
    """Interval means of one gauge family: per key and interval, count and sums."""

    def __init__(self, family: Family, grid: Grid, keys: list[str]):
        self.family, self.grid, self.keys = family, grid, keys
        self.columns = [family.columns.index(k) for k in keys if k != "k"]
        self.width = intervals(grid)
        self.slots = Slots(self.width)
        self.group_of: list[int] = []            # series id -> group number
        self.groups: dict[tuple, int] = {}       # label values of the key -> group number
        self.sums, self.comps, self.counts = np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
        self.runs = Runs()
        self.batch: list[tuple[np.ndarray, np.ndarray]] = []  # (cells, values) not summed yet
        self.batched = 0
        self.span = [np.inf, -np.inf]            # first and last time in [start, end]
        self.ordered = False                     # (after ``means``) the samples in group order

    def add(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples of the family (series ids, times in seconds, values), in file order."""
        grid = self.grid
        self.span = spanned(self.span, t, grid)
        keep = (t >= grid.start) & (t < grid.end) & np.isfinite(v)
        if not keep.any():
            return
        self._new_groups()
        groups = np.asarray(self.group_of, dtype=np.int64)[sid[keep]]
        self.batch.append((groups * self.width + grid.index(t[keep]), v[keep]))
        self.batched += len(groups)
        if self.batched >= BATCH:
            self._sum()

    def _sum(self) -> None:
        """The batched samples added to their cells' sums, in file order."""
        if self.batch:
            cells, values = (np.concatenate(part) for part in zip(*self.batch))
            self.batch, self.batched = [], 0
            slots = self.slots.slots(cells)
            self.sums, self.comps, self.counts = self.slots.grown(self.sums, self.comps, self.counts)
            kahan_add(slots, values, self.sums, self.comps, self.counts)
            self.runs.add(cells, values)

    def means(self, compensated: bool = False) -> pd.Series:
        """The mean per key and interval (index ``keys``, sorted; label levels as strings), as
        ``grid.gauges(frame).groupby(keys).v.mean()`` gives it from the family's samples
        (``compensated``: from the compensated sums whatever the order; ``ordered`` says whether
        the samples came in group order)."""
        self._sum()
        self.ordered = False
        live = np.flatnonzero(self.counts > 0)
        if not len(live):
            return pd.Series([], dtype=float)
        group, k = np.divmod(self.slots.cells()[live], self.width)
        labels = list(self.groups)
        frame = pd.DataFrame({"k": k})
        for i, column in enumerate(c for c in self.keys if c != "k"):
            values = np.array([key[i] for key in labels], dtype=object)
            frame[column] = pd.Series(values[group], dtype="str")
        frame = frame.sort_values(self.keys, kind="stable")
        live = live[frame.index.to_numpy()]
        cells = self.slots.cells()[live]
        self.ordered = self.runs.in_order(cells)
        sums = (np.array([self.runs.sums[c] for c in cells.tolist()])
                if self.ordered and not compensated else self.sums[live])
        frame["v"] = sums / self.counts[live]
        return frame.set_index(self.keys)["v"]

    def covered(self) -> pd.DataFrame:
        """The first and last sample time in [start, end] as a frame of ``t`` (for ``covered``)."""
        return span_frame(self.span)

    def _new_groups(self) -> None:
        """Group numbers of the series described since the last block."""
        for meta in self.family.meta[len(self.group_of):]:
            key = tuple(meta[i] for i in self.columns)
            self.group_of.append(self.groups.setdefault(key, len(self.groups)))


class EvidenceCells(GaugeCells):
    """DCGM evidence means per GPU and interval; the samples in the window of series with no GPU
    label (gpu, UUID) are set aside, to be counted as excluded (no GPU can take them)."""

    def __init__(self, family: Family, grid: Grid, keys: list[str]):
        super().__init__(family, grid, keys)
        self.named = np.zeros(0, bool)  # per series: whether it names a GPU
        self.lost: list[tuple] = []     # (sid, t, v) of the samples of series that name none

    def add(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples of the family, in file order."""
        gpu, uuid = (self.family.columns.index(c) for c in ("gpu", "uuid"))
        self.named = np.r_[self.named, [m[gpu] != "" or m[uuid] != ""
                                        for m in self.family.meta[len(self.named):]]].astype(bool)
        lost = ~self.named[sid]
        if lost.any():
            self.span = spanned(self.span, t[lost], self.grid)
            inside = lost & (t >= self.grid.start) & (t < self.grid.end)
            self.lost.append((sid[inside], t[inside], v[inside]))
        super().add(sid[~lost], t[~lost], v[~lost])

    def unplaced(self) -> pd.DataFrame:
        """The set-aside samples (metric as DCGM names it, t, v)."""
        if not self.lost:
            return pd.DataFrame({"metric": pd.Series([], dtype=object), "t": [], "v": []})
        sid, t, v = (np.concatenate(p) for p in zip(*self.lost))
        metric = self.family.columns.index("metric")
        names = np.array([EVIDENCE_NAMES[m[metric]] for m in self.family.meta] or [""], dtype=object)
        return pd.DataFrame({"metric": names[sid], "t": t, "v": v})


#: an evidence column -> the DCGM metric it comes from
EVIDENCE_NAMES = {column: name for name, column in DCGM_EVIDENCE.items()}


def intervals(grid: Grid) -> int:
    """The number of intervals of the window, plus one (a time at the very end)."""
    return -(-(grid.end_ns - grid.start_ns) // (grid.step * NS)) + 1


def gauge_cells(roles: dict[str, Family], grid: Grid) -> dict[str, GaugeCells]:
    """Empty cells for each gauge family of ``roles``."""
    return {role: (EvidenceCells if role == "dcgm_evidence" else GaugeCells)(roles[role], grid, keys)
            for role, keys in GAUGE_KEYS.items()}


def drain(cells) -> None:
    """Samples the line-by-line reader appended to a reduced family's arrays moved into its
    cells (fresh empty arrays: the old ones may be viewed by a frame)."""
    family = cells.family
    if len(family.sid):
        cells.add(*(np.frombuffer(a, dtype=d) for a, d in
                    ((family.sid, np.int64), (family.t, float), (family.v, float))))
        family.sid, family.t, family.v = array("q"), array("d"), array("d")


def spanned(span: list[float], t: np.ndarray, grid: Grid) -> list[float]:
    """``span`` (first and last time) widened by the times of ``t`` in [start, end]."""
    inside = t[(t >= grid.start) & (t <= grid.end)]
    return [min(span[0], inside.min()), max(span[1], inside.max())] if len(inside) else span


def rows_family(family: Family, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> Family:
    """A family holding these rows (series ids, times, values), with ``family``'s series."""
    rows = Family(family.columns, family.describe)
    rows.meta = family.meta
    rows.sid = array("q", np.asarray(sid, np.int64).tobytes())
    rows.t = array("d", np.asarray(t, float).tobytes())
    rows.v = array("d", np.asarray(v, float).tobytes())
    return rows


def span_frame(span: list[float]) -> pd.DataFrame:
    """First and last time (``[inf, -inf]``: none) as a frame of ``t``, for ``tables.covered``."""
    return pd.DataFrame({"t": span if span[0] <= span[1] else []}, dtype=float)
