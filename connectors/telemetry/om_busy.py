"""DCGM busy (GR_ENGINE_ACTIVE / GPU_UTIL) reduced into the interval grid while the file is read.

``tables.gpu_activity`` keeps, per GPU, the samples of its preferred metric (GR_ENGINE_ACTIVE where
the GPU has any in the window), excludes those out of range, not finite, or GPU_UTIL on a MIG
unit, and takes per GPU and interval the mean of the rest, the pod seen most often (its namespace
and container from its latest sample) and, per GPU, the model seen most often. ``BusyCells`` keeps
instead:

- the valid samples' means in two ``om_cells.GaugeCells`` keyed by GPU and interval, one per
  metric (values scaled as the table scales them), so that each holds its metric's samples in file
  order and its means are pandas' bit for bit where the frame the table averages is that metric's
  samples alone (every GPU has GR_ENGINE_ACTIVE, or none has). Where both metrics are kept (some
  GPUs have no GR_ENGINE_ACTIVE), pandas sums compensated unless the kept samples come in group
  order; that is known where the GR_ENGINE_ACTIVE samples do not come in group order (then
  neither do the kept ones), and otherwise the file is read again with every sample kept
  (``NotStreamable``);
- per series and interval the count, the first and latest time and the latest sample's position
  (``om_series.Stats``): the pods and models chosen as ``most_frequent`` chooses them;
- the excluded samples themselves (their table shows the earliest; they are few).

A GPU_UTIL sample of a GPU that has had a GR_ENGINE_ACTIVE sample in the window is dropped on
arrival: the preference can only turn that way, so it would never be kept.

A GPU-interval where two pods' samples could share a timestamp (their first-to-latest spans
overlap) may be time-shared, which the table splits per pod from the samples: the file is then
read again with every sample kept.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from connectors.telemetry.distinct import plain
from connectors.telemetry.families import GPU_UTIL, GR_ENGINE_ACTIVE, Family, mig_slice
from connectors.telemetry.grid import Grid
from connectors.telemetry.om_cells import GaugeCells, rows_family
from connectors.telemetry.om_counters import NotStreamable
from connectors.telemetry.om_series import (
    Cells,
    Coder,
    LatestCells,
    PodCells,
    RequestCells,
    Stats,
    most_frequent_of,
)
from connectors.telemetry.tables import (
    GPU_KEY,
    Busy,
    activity_table,
    empty_table,
    gpu_activity,
    gpu_requests,
    node_info,
    placed_busy,
    unmeasured_intervals,
)
from connectors.telemetry.validity import BUSY_RANGES, NOT_ON_MIG, busy_reasons

KEYS = GPU_KEY + ["k"]


class BusyCells(Cells):
    """The DCGM busy family: valid samples' means per GPU and interval, per series and interval
    counts and times, the excluded samples."""

    def __init__(self, family: Family, grid: Grid):
        super().__init__(family, grid)
        self.gr, self.util = (GaugeCells(family, grid, KEYS) for _ in range(2))
        self.stats = Stats()
        self.gpus: dict[tuple, int] = {}
        self.gpu_of, self.is_gr, self.named, self.mig_util = (np.zeros(0, t) for t in
                                                              (np.int64, bool, bool, bool))
        self.metric_of, self.high = np.zeros(0, object), np.zeros(0)  # per series: metric, range
        self.has_gr = np.zeros(0, bool)              # per GPU: a GR_ENGINE_ACTIVE sample in the window
        self.bad: list[tuple] = []                   # (sid, t, v, reason) of excluded samples
        self.unplaced: list[tuple] = []              # (sid, t, v) of series with no GPU label

    def add(self, sid: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """Samples of the family, in file order."""
        pos = self.positions(t)
        self._describe()
        inside = (t >= self.grid.start) & (t < self.grid.end)
        keep, lost = inside & self.named[sid], inside & ~self.named[sid]
        if lost.any():
            self.unplaced.append((sid[lost], t[lost], v[lost]))
        sid, t, v, pos = sid[keep], t[keep], v[keep], pos[keep]
        gr = self.is_gr[sid]
        self.has_gr[self.gpu_of[sid[gr]]] = True
        live = gr | ~self.has_gr[self.gpu_of[sid]]  # GPU_UTIL of a GPU with GR_ENGINE_ACTIVE: never kept
        sid, t, v, pos, gr = sid[live], t[live], v[live], pos[live], gr[live]
        with np.errstate(invalid="ignore"):
            ok = (v >= 0.0) & (v <= self.high[sid]) & np.isfinite(v) & ~self.mig_util[sid]
        if not ok.all():
            odd = ~ok  # why, as busy_samples says it
            reason = busy_reasons(pd.Series(self.metric_of[sid[odd]], dtype=object),
                                  pd.Series(v[odd]))
            reason = np.where(self.mig_util[sid[odd]] & (reason == ""), NOT_ON_MIG, reason)
            self.bad.append((sid[odd], t[odd], v[odd], reason.astype(object)))
        sid, t, v, pos, gr = sid[ok], t[ok], v[ok], pos[ok], gr[ok]
        scaled = v * np.where(gr, 1.0, 0.01)
        self.gr.add(sid[gr], t[gr], scaled[gr])
        self.util.add(sid[~gr], t[~gr], scaled[~gr])
        self.stats.add(sid * self.width + self.grid.index(t), t, pos)

    def _describe(self) -> None:
        """Per series described since the last block: its GPU, metric, whether it names a GPU,
        whether it is GPU_UTIL on a MIG unit."""
        meta = self.family.meta[len(self.gpu_of):]
        if not meta:
            return
        columns = self.family.columns
        node, gpu, uuid, metric = (columns.index(c) for c in ("node", "gpu", "uuid", "metric"))
        gpus = [self.gpus.setdefault((m[node], m[gpu], m[uuid]), len(self.gpus)) for m in meta]
        is_gr = [m[metric] == GR_ENGINE_ACTIVE for m in meta]
        self.gpu_of = np.r_[self.gpu_of, np.asarray(gpus, np.int64)]
        self.is_gr = np.r_[self.is_gr, np.asarray(is_gr, bool)]
        self.named = np.r_[self.named, np.asarray([m[gpu] != "" or m[uuid] != "" for m in meta])]
        self.mig_util = np.r_[self.mig_util, np.asarray(
            [not g and mig_slice(m[uuid]) is not None for g, m in zip(is_gr, meta)], bool)]
        self.metric_of = np.r_[self.metric_of, np.asarray([m[metric] for m in meta], object)]
        self.high = np.r_[self.high, [BUSY_RANGES.get(m[metric], (0.0, np.inf))[1] for m in meta]]
        self.has_gr = np.r_[self.has_gr, np.zeros(len(self.gpus) - len(self.has_gr), bool)]

    def kept(self) -> np.ndarray:
        """Per series: whether its metric is its GPU's preferred one."""
        self._describe()
        return self.is_gr == self.has_gr[self.gpu_of]

    def busy(self, coder: Coder, grid: Grid) -> Busy:
        """``tables.gpu_activity`` from the cells."""
        kept = self.kept()
        bad = self._bad(kept, coder, grid)
        stats = self.stats.table(self.width)
        valid = self.rows(stats.loc[kept[stats["sid"].to_numpy()]], coder)
        unplaced, unmeasured = self._unplaced(), unmeasured_intervals(bad, valid, grid)
        if valid.empty:
            return placed_busy(empty_table("gpu_activity"), bad, unplaced, unmeasured)
        if shared(valid):
            raise NotStreamable
        busy = self._means(kept).merge(
            plain(most_frequent_of(valid, KEYS, "pod", ("namespace", "container"))),
            on=KEYS, how="left")
        models = plain(most_frequent_of(valid, GPU_KEY, "model_name"))
        return placed_busy(activity_table(busy, models, grid), bad, unplaced, unmeasured)

    def _unplaced(self) -> pd.DataFrame:
        """The samples of series with no GPU label (metric, t, v), as ``busy_samples`` gives them."""
        sid, t, v = ((np.concatenate(p) for p in zip(*self.unplaced)) if self.unplaced
                     else (np.zeros(0, np.int64), np.zeros(0), np.zeros(0)))
        return pd.DataFrame({"metric": pd.Series(self.metric_of[sid], dtype=object), "t": t, "v": v})

    def _bad(self, kept: np.ndarray, coder: Coder, grid: Grid) -> pd.DataFrame:
        """The excluded samples of the preferred metrics, in file order, as ``busy_samples``
        gives them (with ``k`` and ``reason``)."""
        parts = [np.concatenate(p) for p in zip(*self.bad)] if self.bad else [
            np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0, object)]
        sid, t, v, reason = (p[kept[parts[0]]] for p in parts)
        frame = coder({"bad": rows_family(self.family, sid, t, v)})["bad"]
        return frame.assign(k=grid.index(t), reason=reason)

    def _means(self, kept: np.ndarray) -> pd.DataFrame:
        """Mean busy fraction and source per GPU and interval, as ``gpu_activity`` takes them
        (label columns as strings)."""
        sid = self.stats.table(self.width)["sid"].to_numpy()  # series with valid samples
        gr_kept = self.is_gr[sid].any()
        util_kept = (~self.is_gr & kept)[sid].any()
        util_dropped = (~self.is_gr & ~kept)[sid].any()
        if not util_kept:
            parts = [(self.gr.means(), GR_ENGINE_ACTIVE)]
        elif not gr_kept and not util_dropped:
            parts = [(self.util.means(), GPU_UTIL)]
        else:
            parts = self._mixed()
        frames = [means.rename("busy_fraction").reset_index().assign(source=source)
                  for means, source in parts if len(means)]
        out = pd.concat(frames, ignore_index=True).sort_values(KEYS, kind="stable")
        return out.astype({"source": "str"}).reset_index(drop=True)

    def _mixed(self) -> list[tuple[pd.Series, str]]:
        """Both metrics' means where GPU_UTIL is kept for some GPUs only: compensated sums where
        the kept samples are known not to come in group order."""
        gr = self.gr.means()
        util = self.util.means(compensated=True)
        if self.gr.ordered or (not len(gr) and not self.util.ordered):
            raise NotStreamable
        if not len(gr):
            util = self.util.means()
        without = {key for key, i in self.gpus.items() if not self.has_gr[i]}
        gpus = util.index.droplevel("k") if len(util) else pd.Index([])
        return [(gr, GR_ENGINE_ACTIVE), (util[gpus.isin(list(without))], GPU_UTIL)]


def shared(valid: pd.DataFrame) -> bool:
    """Whether two pods' samples of a GPU-interval may share a timestamp: their spans (first to
    latest time) overlap."""
    named = valid.loc[valid["pod"] != ""]
    pods = named.groupby(KEYS + ["namespace", "pod"]).agg(first=("first", "min"),
                                                         last=("last", "max")).reset_index()
    pods = pods.sort_values(KEYS + ["first"], kind="stable")
    same = pods.duplicated(KEYS, keep="first").to_numpy()
    reach = pods.groupby(KEYS, sort=False)["last"].cummax().shift(1).to_numpy()
    return bool((same & (pods["first"].to_numpy() <= reach)).any())


def sample_cells(roles: dict[str, Family], grid: Grid) -> dict[str, Cells]:
    """Empty cells for the families kept per series and interval."""
    return {"dcgm": BusyCells(roles["dcgm"], grid),
            "node_info": LatestCells(roles["node_info"], grid),
            "node_labels": LatestCells(roles["node_labels"], grid),
            "pod_info": PodCells(roles["pod_info"], grid),
            "requests": RequestCells(roles["requests"], grid)}


def sample_tables(cells: dict, frames: dict[str, pd.DataFrame], coder: Coder,
                  grid: Grid) -> tuple[Busy, pd.DataFrame, pd.DataFrame]:
    """(``gpu_activity``'s Busy, ``node_info``, ``gpu_requests``): from the cells of the
    families reduced while reading, else from their frames."""
    if "dcgm" not in cells:
        return (gpu_activity(frames["dcgm"], grid),
                node_info(frames["node_info"], frames["node_labels"]),
                gpu_requests(frames["requests"], frames["pod_info"], grid))
    return (cells["dcgm"].busy(coder, grid),
            node_info(cells["node_info"].frame(coder), cells["node_labels"].frame(coder)),
            cells["requests"].table(cells["pod_info"], coder, grid))
