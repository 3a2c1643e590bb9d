"""Range queries laid on the audit grid: evaluation times, chunking, splitting, parsing.

Interval k of the grid covers [start + k·step, start + (k+1)·step). A range function evaluated at
T = (interval end − 1 ms) over a range r selects [T − r, T] in Prometheus 2 and (T − r, T] in
Prometheus 3 and VictoriaMetrics; r is step − 1 ms or step accordingly, so that each value covers
exactly the samples of one interval (timestamps are whole milliseconds). Which rule the server
follows is probed once with a data-free subquery. A window that is not a whole number of steps
ends in a shorter interval, queried on its own with a shorter range.

Queries are templates holding ``$R`` (the range) and ``$M`` (extra label matchers for series
sharding). Time chunks hold at most ``max_points`` evaluations (Prometheus refuses more than
11,000 points per series); a chunk the server refuses as too large or too slow is halved, and a
single interval still refused is sharded by the values of one label.
"""
from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from connectors.telemetry.promhttp import PromClient, QueryTooLarge

MAX_POINTS = 11_000


def seconds_text(ms: int) -> str:
    """Milliseconds since the epoch as exact decimal seconds (the API's time format)."""
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    return f"{sign}{ms // 1000}.{ms % 1000:03d}"


def promql_string(value: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def matchers(labels: dict[str, str]) -> str:
    """``a="x",b="y"`` exact matchers (an empty value matches series lacking the label)."""
    return ",".join(f"{k}={promql_string(v)}" for k, v in labels.items())


@dataclass(frozen=True)
class Window:
    """The audit grid in milliseconds, and the server's range-boundary rule."""

    start_ms: int
    end_ms: int
    step_ms: int
    left_open: bool = False

    @property
    def intervals(self) -> int:
        """Number of intervals, the last possibly shorter."""
        return math.ceil((self.end_ms - self.start_ms) / self.step_ms)

    def lo(self, k: int) -> int:
        """Start of interval k."""
        return self.start_ms + k * self.step_ms

    def hi(self, k: int) -> int:
        """End (exclusive) of interval k, clipped to the window end."""
        return min(self.lo(k) + self.step_ms, self.end_ms)

    def at(self, k: int) -> int:
        """Evaluation time of interval k: its last millisecond."""
        return self.hi(k) - 1

    def range_ms(self, k: int) -> int:
        """The range that selects exactly the samples of interval k when evaluated at at(k)."""
        return self.hi(k) - self.lo(k) - (0 if self.left_open else 1)


@dataclass(frozen=True)
class Chunk:
    """Intervals [k0, k1) evaluated by one range query (all with the same range)."""

    k0: int
    k1: int


def chunks(window: Window, max_points: int = MAX_POINTS, max_seconds: int | None = None
           ) -> list[Chunk]:
    """Whole-step intervals in runs of at most max_points (and max_seconds); a short tail alone."""
    n = window.intervals
    full = n if window.hi(n - 1) - window.lo(n - 1) == window.step_ms else n - 1
    size = max(1, min(max_points, MAX_POINTS))
    if max_seconds:
        size = max(1, min(size, max_seconds * 1000 // window.step_ms))
    out = [Chunk(k, min(k + size, full)) for k in range(0, full, size)]
    if full < n:
        out.append(Chunk(full, n))
    return out


def probe_left_open(client: PromClient, at_ms: int) -> bool:
    """True when range selectors exclude their left end (Prometheus 3, VictoriaMetrics)."""
    at_ms -= at_ms % 30_000
    _, result = client.query("count_over_time(vector(1)[60s:30s])", seconds_text(at_ms))
    count = float(result[0]["value"][1]) if result else 3.0
    return count < 3


class Progress:
    """A rich progress bar on stderr when it is a terminal; silent otherwise."""

    def __init__(self, label: str):
        self._bar = self._task = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress as Bar

            self._bar = Bar(console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task(label, total=0)
            self._bar.start()

    def plan(self, n: int) -> None:
        """Add n queries to the total."""
        if self._bar is not None:
            total = self._bar.tasks[0].total or 0
            self._bar.update(self._task, total=total + n)

    def advance(self) -> None:
        """One query done."""
        if self._bar is not None:
            self._bar.advance(self._task)

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class Puller:
    """Runs templated queries over the grid and returns long frames (labels, k, v)."""

    def __init__(self, client: PromClient, window: Window, plan: list[Chunk],
                 progress: Progress | None = None, ahead: Sequence[str] = ()):
        self.client = client
        self.window = window
        self.plan = plan
        self.progress = progress or Progress("")
        self.points = 0
        #: the templates the caller will ask in this order whatever the answers: while one
        #: template's answers are made into rows, the next one's chunks are being evaluated
        self.ahead = list(ahead)
        self.asked: dict[str, list] = {}  # template -> its chunks started (PromClient.ask)

    def grid(self, template: str, labels: list[str], shard: str | None = None,
             selector: str = "") -> pd.DataFrame:
        """Values of ``template`` per interval: columns ``labels`` + k + v (+ costaudit_agg)."""
        self.progress.plan(len(self.plan))
        parts = []
        # every chunk asked at once; a refused one is then split alone
        asked = self.asked.pop(template, None) or self._ask(template)
        self._ask_next(template)
        answers = self.client.gather(asked)
        for chunk, answer in zip(self.plan, answers):
            if isinstance(answer, QueryTooLarge):
                parts.extend(self._split(template, chunk, shard, selector, "", answer))
            else:
                parts.extend(self._series(answer, chunk))
            self.progress.advance()
        return long_frame(parts, None if labels is None else labels + ["costaudit_agg"])

    def _ask(self, template: str) -> list:
        """Start every chunk of ``template`` (PromClient.ask)."""
        return self.client.ask([self._range(template, chunk, "") for chunk in self.plan])

    def _ask_next(self, template: str) -> None:
        """Start the chunks of the template :attr:`ahead` names after ``template`` (one ahead, so
        that at most two templates' answers are held)."""
        if template not in self.ahead:
            return
        following = self.ahead[self.ahead.index(template) + 1:]
        if following and following[0] not in self.asked:
            self.asked[following[0]] = self._ask(following[0])

    def _chunk(self, template: str, chunk: Chunk, shard, selector, extra: str) -> list:
        """One chunk's series, halved when the server refuses it."""
        try:
            return self._query(template, chunk, extra)
        except QueryTooLarge as refused:
            return self._split(template, chunk, shard, selector, extra, refused)

    def _split(self, template: str, chunk: Chunk, shard, selector, extra: str, refused: QueryTooLarge) -> list:
        """A refused chunk's series: its halves, or one interval by series (``shard``)."""
        if chunk.k1 - chunk.k0 > 1:
            mid = (chunk.k0 + chunk.k1) // 2
            return (self._chunk(template, Chunk(chunk.k0, mid), shard, selector, extra)
                    + self._chunk(template, Chunk(mid, chunk.k1), shard, selector, extra))
        if not shard or extra:
            raise refused
        return self._sharded(template, chunk, shard, selector)

    def _sharded(self, template: str, chunk: Chunk, label: str, selector: str) -> list:
        """One interval queried per group of ``label`` values (plus series lacking the label)."""
        w = self.window
        values = self.client.label_values(label, selector, seconds_text(w.lo(chunk.k0)),
                                          seconds_text(w.at(chunk.k1 - 1)))
        out = self._query(template, chunk, f"{label}=\"\"")
        stack = [values]
        while stack:
            group = stack.pop()
            pattern = "|".join(re.escape(v) for v in group)
            try:
                out += self._query(template, chunk, f"{label}=~{promql_string(pattern)}")
            except QueryTooLarge:
                if len(group) == 1:
                    raise
                stack += [group[: len(group) // 2], group[len(group) // 2:]]
        return out

    def _range(self, template: str, chunk: Chunk, extra: str) -> tuple[str, str, str, int]:
        """The range query of one chunk: (expression, start, end, step seconds)."""
        w = self.window
        expr = template.replace("$R", f"{w.range_ms(chunk.k0)}ms").replace("$M", extra)
        return expr, seconds_text(w.at(chunk.k0)), seconds_text(w.at(chunk.k1 - 1)), w.step_ms // 1000

    def _query(self, template: str, chunk: Chunk, extra: str) -> list:
        """(labels, k array, value array) of each series one range query returns."""
        return self._series(self.client.query_range(*self._range(template, chunk, extra)), chunk)

    def _series(self, result: list, chunk: Chunk) -> list:
        """(labels, k array, value array) of each series of a chunk's answer, inside the chunk."""
        w = self.window
        out = []
        for series in result:
            t, v = _points(series.get("values") or [])
            k = chunk.k0 + np.rint((t - w.at(chunk.k0)) / w.step_ms).astype(np.int64)
            keep = (k >= chunk.k0) & (k < chunk.k1)
            out.append((series.get("metric") or {}, k[keep], v[keep]))
            self.points += int(keep.sum())
        return out

    def spans(self, template: str) -> pd.DataFrame:
        """Instant ``template`` per chunk, its range spanning the whole chunk: every label, k0."""
        w, series = self.window, []
        self.progress.plan(len(self.plan))
        for chunk in self.plan:
            at = w.at(chunk.k1 - 1)
            span = at - w.lo(chunk.k0) + (1 if w.left_open else 0)
            _, result = self.client.query(template.replace("$R", f"{span}ms").replace("$M", ""),
                                          seconds_text(at))
            series += [(s.get("metric") or {}, np.full(1, chunk.k0), np.ones(1)) for s in result]
            self.progress.advance()
        return long_frame(series, None)

    def raw(self, selector: str, k: int) -> pd.DataFrame:
        """The raw samples of interval k: every label of each series, t (seconds) and v."""
        w = self.window
        _, result = self.client.query(f"{selector}[{w.range_ms(k)}ms]", seconds_text(w.at(k)))
        rows = []
        for series in result:
            t, v = _points(series.get("values") or [])
            rows.append((series.get("metric") or {}, t / 1000.0, v))
            self.points += len(t)
        return long_frame(rows, None, value_key="t")


def _points(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Millisecond times and float values of ``[[t, "v"], ...]``."""
    if not values:
        return np.empty(0, dtype=np.int64), np.empty(0)
    t = np.rint(np.array([p[0] for p in values], dtype=float) * 1000).astype(np.int64)
    v = np.array([p[1] for p in values], dtype=object).astype(float)
    return t, v


def series_id(labels: dict) -> str:
    """A series' identity: its labels, name and union tag aside, as canonical JSON pairs."""
    return json.dumps(sorted((k, v) for k, v in labels.items()
                             if k not in ("__name__", "costaudit_agg")))


def long_frame(series: list, labels: list[str] | None, value_key: str = "k") -> pd.DataFrame:
    """One row per point: the wanted labels ("" when absent; every label when None), key, v, id."""
    if labels is None:
        labels = sorted({name for meta, _, _ in series for name in meta} - {"__name__"})
    counts = [len(key) for _, key, _ in series]
    dtype = np.int64 if value_key == "k" else float
    frame = pd.DataFrame({
        value_key: np.concatenate([key for _, key, _ in series]).astype(dtype) if series
        else np.empty(0, dtype=dtype),
        "v": np.concatenate([v for _, _, v in series]) if series else np.empty(0)})
    rows = np.repeat(np.arange(len(series)), counts)  # each point's series
    for name in dict.fromkeys(labels):
        frame[name] = _per_point([meta.get(name, "") for meta, _, _ in series], rows, frame.index)
    frame["id"] = _per_point([series_id(meta) for meta, _, _ in series], rows, frame.index)
    return frame


def _per_point(values: list[str], rows: np.ndarray, index: pd.Index) -> pd.Series:
    """A string column with each series' value repeated over its points: one string per series,
    taken by position (Arrow's take), not one Python string per point converted."""
    return pd.Series(pd.array(values, dtype="str").take(rows), index=index)


# --------------------------------------------------------------------------------------------
# The source's own step
# --------------------------------------------------------------------------------------------

def source_step(client: PromClient, start_ms: int, end_ms: int, names: list[str]) -> int | None:
    """Median sample spacing of one series of the first family present (DCGM first).

    A coarse pass finds a 6-hour span where some series has several samples; the raw samples of
    the busiest series there give the spacing.
    """
    span = 6 * 3600 * 1000
    last = max(end_ms - 1, start_ms + span - 1)
    for name in names:
        result = client.query_range(f"max(count_over_time({name}[{span}ms]))",
                                    seconds_text(start_ms + span - 1), seconds_text(last),
                                    span // 1000)
        busy = [t for s in result for t, v in s.get("values") or [] if float(v) >= 2]
        if not busy:
            continue
        at = seconds_text(round(float(busy[0]) * 1000))
        _, top = client.query(f"topk(1, count_over_time({name}[{span}ms]))", at)
        labels = {**(top[0].get("metric") or {}), "__name__": name} if top else {"__name__": name}
        _, raw = client.query("{" + matchers(labels) + "}" + f"[{span}ms]", at)
        gaps = [np.diff(np.array([float(p[0]) for p in s["values"]])) for s in raw]
        gaps = np.concatenate(gaps) if gaps else np.empty(0)
        if len(gaps):
            return max(1, int(round(float(np.median(gaps)))))
    return None
