"""PyTorch profiler (Kineto) Chrome traces → kernel profile tables (METHOD §3, §6).

Tables (schemas/profile.py):

- ``profile`` (one row): GPU window, kernel-active, busy and idle time, the serving gap ratio, the
  kernel count and host synchronisation time. Every time figure is measured over the window named
  by ``gap_basis``: the GPU window (first start to last end of kernel, memcpy and memset events,
  per device) or, when the trace carries ``costaudit.request*`` annotations, the union of those
  request spans. Multi-device traces are measured per device and summed; ``device`` names the
  device with the most kernel-active time.
- ``kernels``: GPU time per kernel name with its category, largest first.
- ``categories``: GPU time per category (kernels by name, memcpy by direction, memset), as sums of
  durations (not unions), largest first.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from connectors.base import Connector
from connectors.errors import InputError
from connectors.profiles.categories import (  # noqa: F401
    KERNEL_CATEGORIES,
    MEMCPY_KINDS,
    fine_category,
    kernel_category,
    memcpy_category,
    without_parameters,
)
from connectors.profiles.events import KERNEL, TraceData, length, load_trace, merge, overlap
from schemas.profile import CategoryTime, KernelEvent, KernelSummary

NO_GPU_EVENTS = "no GPU kernel, memcpy or memset events"
EXPECTED_CUDA = "a trace recorded with ProfilerActivity.CUDA"


class KinetoConnector(Connector):
    """Reads one PyTorch profiler Chrome trace (.json or .json.gz)."""

    format_name = "kineto"
    kind = "profiles"
    schemas = {"profile": KernelSummary, "kernels": KernelEvent, "categories": CategoryTime}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Parse the trace and build the three tables; a profile covers no fixed time."""
        trace = load_trace(self.path)
        if trace.kind.size == 0:
            raise InputError(self.path, NO_GPU_EVENTS, expected=EXPECTED_CUDA)
        self.parsed = trace.trace  # the whole trace's columns, for the audit's kernel evidence
        events = event_frame(trace)
        tables = {
            "profile": profile_table(trace, self.path.name),
            "kernels": kernel_table(events),
            "categories": category_table(events),
        }
        return tables, trace.rows, (None, None)


def profile_table(trace: TraceData, name: str) -> pd.DataFrame:
    """The one-row ``profile`` table."""
    basis = "request_spans" if trace.spans[0].size else "gpu_window"
    totals = np.zeros(4)          # window, kernel-active, busy, kernel-active over the whole trace
    per_device = []
    for device in range(len(trace.device_keys)):
        figures = device_figures(trace, device, basis)
        totals += figures
        per_device.append(figures[3])
    window, active, busy, _ = (float(x) for x in totals)
    primary = trace.device_keys[int(np.argmax(per_device))]
    return pd.DataFrame({
        "trace": [name],
        "device": [trace.device_names.get(primary, "")],
        "gpu_window_us": [window],
        "kernel_active_us": [active],
        "busy_us": [busy],
        "idle_us": [max(window - busy, 0.0)],
        "gap_ratio": [(window - active) / active if active > 0 else np.nan],
        "gap_basis": [basis],
        "kernels": [int(np.count_nonzero(trace.kind == KERNEL))],
        "sync_us": [trace.sync_us],
    })


def device_figures(trace: TraceData, device: int, basis: str) -> np.ndarray:
    """[window, kernel-active in window, busy in window, kernel-active overall] of one device."""
    mine = trace.device == device
    kernels = mine & (trace.kind == KERNEL)
    kernel_set = merge(trace.start[kernels], trace.end[kernels])
    busy_set = merge(trace.start[mine], trace.end[mine])
    if basis == "request_spans":
        window_set = merge(*trace.spans)
    else:
        window_set = (np.array([trace.start[mine].min()]), np.array([trace.end[mine].max()]))
    return np.array([
        length(*window_set),
        overlap(kernel_set, window_set),
        overlap(busy_set, window_set),
        length(*kernel_set),
    ])


def event_frame(trace: TraceData) -> pd.DataFrame:
    """One row per GPU event: name, category, duration."""
    frame = pd.DataFrame({"name": trace.names, "kind": trace.kind, "dur": trace.dur})
    categories = {}
    for (name, kind) in frame[["name", "kind"]].drop_duplicates().itertuples(index=False):
        categories[(name, kind)] = fine_category(name, kind)
    frame["category"] = [categories[key] for key in zip(frame["name"], frame["kind"])]
    return frame


def kernel_table(events: pd.DataFrame) -> pd.DataFrame:
    """GPU time and launches per kernel name, largest total first."""
    frame = events[events["kind"] == KERNEL]
    grouped = frame.groupby(["name", "category"], sort=False)["dur"].agg(["count", "sum"])
    table = grouped.reset_index().rename(columns={"sum": "total_us"})
    table["count"] = table["count"].astype("int64")
    table["total_us"] = table["total_us"].astype("float64")
    return table.sort_values(["total_us", "name"], ascending=[False, True], ignore_index=True)


def category_table(events: pd.DataFrame) -> pd.DataFrame:
    """GPU time per category (sum of durations), largest first."""
    table = events.groupby("category", sort=False)["dur"].sum().reset_index()
    table = table.rename(columns={"dur": "total_us"})
    table["total_us"] = table["total_us"].astype("float64")
    return table.sort_values(["total_us", "category"], ascending=[False, True], ignore_index=True)
