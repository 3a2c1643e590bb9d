"""OpenMetrics / Prometheus text exposition -> GPU activity, scheduler and serving tables.

The connector: the file (optionally gzipped) is streamed once by ``om_stream`` (blocks of whole
lines, the line pattern matched once per series; ``omtext`` line by line for whatever the fast
path does not decide) into the families of ``families`` (a label set parsed once per series,
never once per sample; timestamps in seconds, as `promtool tsdb create-blocks-from openmetrics`
reads them; the file's sha256 taken on the way), then every table is built by ``tables``, from
frames whose label columns are categorical codes (``om_stream.family_frames``: no string per
sample), on one ``grid.Grid`` of `step` seconds aligned to the window start; gauges are averaged
per interval, counters differenced with resets handled. Where the case sets the step, the grid is
known before the read, and the gauge families whose tables are interval means (queue, serving
gauges, DCGM evidence, replicas: ``om_cells``), the counter families (``om_counters``), DCGM busy
(``om_busy``), pod info, GPU requests and node info (``om_series``) are reduced into it while the
file is read: no array per sample, the same tables bit for bit (a file the cells cannot give
exactly is read again with every sample kept); otherwise the gauges are reduced after the read.
Samples without a timestamp (a single scrape) are counted but cannot be placed in time.
Kernel-activity samples out of range or not finite, and counter samples not finite or negative,
are excluded and counted (tables ``excluded_samples``, ``counter_resets``,
``unmeasured_intervals``: connectors.telemetry.validity).

Families: DCGM busy (GR_ENGINE_ACTIVE / GPU_UTIL) and evidence gauges, kube-state-metrics nodes,
pods, GPU requests, deployments and HPAs, and the serving servers (vLLM V0/V1, Triton, TGI); the
metric-to-column table is in docs/telemetry.md.
"""
from __future__ import annotations

from typing import ClassVar

import pandas as pd

from connectors.base import Connector
from connectors.errors import InputError
from connectors.telemetry.families import near_requests, series_labels
from connectors.telemetry.grid import DEFAULT_STEP, Grid, median_step, utc_ns
from connectors.telemetry.om_busy import sample_tables
from connectors.telemetry.om_counters import COUNTER_ROLES, NotStreamable, counted_from_cells
from connectors.telemetry.om_stream import family_coder, read_reduced, reduced
from connectors.telemetry.omtext import SAMPLE_FORM, Scan
from connectors.telemetry.phase_families import token_histograms
from connectors.telemetry.serving_stats import serving_stats
from connectors.telemetry.tables import (
    counter_increases,
    covered,
    gpu_evidence,
    quality_tables,
    queue,
    replicas,
    traffic_from_increases,
    with_unplaced,
)
from connectors.telemetry.validity import merge_excluded
from schemas.serving import QueueDepth, ServiceTraffic, ServingStats
from schemas.usage import GpuEvidence, GpuInterval, GpuRequest, NodeInfo, Replicas


def near_series(scan: Scan) -> dict[str, pd.DataFrame]:
    """Table ``unread_series`` (``metric``): the series names the file holds that no family reads but
    that are near a GPU-request series' (``families.near_requests``), nearest first; none when there
    are none (the audit names the nearest where no GPU request was read: audit/mismatches.py)."""
    near = near_requests(scan.unread)
    return {"unread_series": pd.DataFrame({"metric": near}, dtype="str")} if near else {}


def with_repeats(excluded: pd.DataFrame, scan: Scan) -> pd.DataFrame:
    """``excluded_samples`` with the repeated samples the read dropped (``om_repeats``)."""
    return excluded if scan.repeats is None else merge_excluded(excluded, scan.repeats)


class OpenMetricsConnector(Connector):
    """Reads OpenMetrics / Prometheus text (optionally .gz) with timestamps in seconds."""

    format_name: ClassVar[str] = "openmetrics"
    kind: ClassVar[str] = "telemetry"
    schemas: ClassVar[dict] = {"gpu_activity": GpuInterval, "node_info": NodeInfo,
                               "gpu_requests": GpuRequest, "traffic": ServiceTraffic,
                               "queue": QueueDepth, "serving_stats": ServingStats,
                               "gpu_evidence": GpuEvidence, "replicas": Replicas}

    #: samples without a timestamp in the last fetch (a snapshot scrape); they make no rows
    untimestamped: int = 0
    #: the interval length used by the last fetch, in seconds
    step_seconds: int | None = None
    #: whether that step is the case's or the samples' spacing, not the default (a single scrape,
    #: or samples without timestamps, has no spacing: its step is not measured)
    step_measured: bool = False

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Stream the file, then build every table on one grid (the file read again without
        reducing its counters where they would not give the tables exactly)."""
        try:
            return self._fetch(self._case_grid())
        except NotStreamable:
            return self._fetch(None)

    def _fetch(self, grid: Grid | None) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Read the file (with ``grid``: its gauge and counter families reduced while reading),
        then build every table."""
        roles, scan, cells = read_reduced(self.path, grid)
        self._sha256 = scan.sha256
        if scan.rows == 0:
            raise InputError(self.path, "no samples in the file", expected=SAMPLE_FORM)
        tables, covered_span = self._tables(roles, cells)
        tables.update(near_series(scan))
        tables["excluded_samples"] = with_repeats(tables["excluded_samples"], scan)
        self.untimestamped = scan.untimestamped
        self.extent = scan.extent()
        return tables, scan.rows, covered_span

    def fingerprint(self) -> str:
        """The file's sha256, as the stream reader hashed it while reading (the file read once);
        read again where the line-by-line reader read it."""
        return getattr(self, "_sha256", None) or super().fingerprint()

    def _tables(self, roles, cells: dict | None = None) -> tuple[dict[str, pd.DataFrame], tuple]:
        """Every normalised table from the parsed families and the reduced families' interval
        cells (the gauges reduced here when the grid was not known before the read), on one
        grid, and the time covered."""
        coder = family_coder(roles)
        frames = coder(roles)
        grid = self._grid(frames)
        cells = cells or reduced(roles, grid)
        counted = [counted_from_cells(cells[role], coder) if role in cells
                   else counter_increases(frames[role], grid) for role in COUNTER_ROLES]
        increases = pd.concat([c.increases for c in counted], ignore_index=True)
        busy, nodes, requests = sample_tables(cells, frames, coder, grid)
        busy = with_unplaced(busy, cells["dcgm_evidence"].unplaced())
        queue_table = queue(cells["queue"].means(), grid)
        tables = {
            "gpu_activity": busy.activity,
            "node_info": nodes,
            "gpu_requests": requests,
            "traffic": traffic_from_increases(increases, grid),
            "queue": queue_table,
            "serving_stats": serving_stats(
                increases, cells["server_gauges"].means(), queue_table, grid),
            "gpu_evidence": gpu_evidence(cells["dcgm_evidence"].means(), grid),
            "replicas": replicas(cells["replicas"].means(), grid),
            "token_histograms": token_histograms(increases, grid),
            "series_labels": series_labels(roles),
            **quality_tables(busy, counted),
        }
        self.step_seconds = grid.step
        spans = [c.covered() for c in cells.values()]
        return tables, covered(list(frames.values()) + spans, grid)

    def _case_grid(self) -> Grid | None:
        """The case's grid, known before the read when the case sets a valid step (the gauge
        families are then reduced while reading); else None (``_grid`` decides, or says why not)."""
        step = self.ctx.step_seconds
        start_ns, end_ns = utc_ns(self.ctx.start), utc_ns(self.ctx.end)
        if step is None or int(step) <= 0 or end_ns <= start_ns:
            return None
        return Grid(start_ns, end_ns, int(step))

    def _grid(self, frames: dict[str, pd.DataFrame]) -> Grid:
        """The case's step, else the median DCGM spacing, else that of any family, else 60 s."""
        start_ns, end_ns = utc_ns(self.ctx.start), utc_ns(self.ctx.end)
        if end_ns <= start_ns:
            raise InputError(self.path, "the case window is empty", expected="start < end")
        step = self.ctx.step_seconds
        if step is None:
            ordered = [frames["dcgm"]] + [f for role, f in frames.items() if role != "dcgm"]
            step = median_step(ordered)
        self.step_measured = step is not None
        step = DEFAULT_STEP if step is None else step
        if int(step) <= 0:
            raise InputError(self.path, f"step {step} is not positive", expected="step_seconds > 0")
        return Grid(start_ns, end_ns, int(step))
