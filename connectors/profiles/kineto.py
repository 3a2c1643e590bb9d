"""PyTorch profiler (Kineto) Chrome traces → kernel profile tables (METHOD §3, §6).

Tables (schemas/profile.py):

- ``profile`` (one row): GPU window, kernel-active, busy and idle time over the GPU window (first
  start to last end of kernel, memcpy and memset events, per device) or, when the trace carries
  ``costaudit.request*`` annotations, over the union of those request spans; the kernel count and
  host synchronisation time; the serving gap ratio ``gap_ratio`` over the served traffic's window
  named by ``gap_basis`` (request spans, profiler steps, else the main GPU activity:
  connectors/profiles/window.py), that window (``gap_window_us``) and the kernel-active time in it
  (``gap_kernel_active_us``), and g's sensitivity: g over the whole GPU window (``gap_ratio_full``),
  the kernels and kernel-active time outside the window (``excluded_kernels``,
  ``excluded_kernel_us``), the GPU-window time outside it (``excluded_us``) and why a trace's
  profiler steps were not used (``gap_note``). Multi-device traces are measured per device and
  summed; ``device`` names the device with the most kernel-active time.
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
from connectors.profiles.events import KERNEL, Trace, TraceData, length, load_trace, overlap_text
from connectors.profiles.intervals import PER_EVENT_ROWS, distinct_keys, group_sums
from connectors.profiles.window import devices, gap_window
from schemas.profile import CategoryTime, KernelEvent, KernelSummary

NO_GPU_EVENTS = "no GPU kernel, memcpy or memset events"
#: a profile of copies alone measures no forward pass: its service's GPU time would be "no kernel profile"
NO_KERNEL_EVENTS = "no GPU kernel event, only memcpy / memset: nothing in it measures the model's compute"
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
        if not (trace.kind == KERNEL).any():
            raise InputError(self.path, NO_KERNEL_EVENTS, expected=EXPECTED_CUDA)
        self.parsed = trace.trace  # the whole trace's columns, for the audit's kernel evidence
        events = event_frame(trace)
        tables = {
            "profile": profile_table(trace, self.path.name),
            "kernels": kernel_table(events),
            "categories": category_table(events),
        }
        notes = trace_notes(trace.trace) if trace.trace is not None else None
        if notes is not None and len(notes):
            tables["notes"] = notes
        return tables, trace.rows, (None, None)


EXCLUDED_NOTES = {"negative_dur": ("dur", "", "with a negative duration"),
                  "missing_dur": ("dur", "complete (ph X) ", "with no duration"),
                  "negative_ts": ("ts", "", "with a timestamp before 0"),
                  "bad_device": ("args", "device-side ", "whose args.device or args.stream is not an integer"),
                  "no_name": ("name", "", "with no name")}
"""Kind of excluded event -> (column, what precedes the noun, what follows it) in its note."""


def trace_notes(trace: Trace) -> pd.DataFrame:
    """Table ``notes``: one row per kind of event the trace left out of every time figure (a
    negative or no duration, no name), at the first of them: how many, and that none was read as
    zero-duration work; and one per stream whose work overlaps earlier work on it (at row 0: the
    events' rows are not kept), whose time is clipped to the stream's busy time."""
    rows = []
    for kind, count in trace.excluded.items():
        if count:
            column, before, after = EXCLUDED_NOTES[kind]
            table, row = trace.excluded_at.get(kind, ("traceEvents", 0))
            noun = ("row" if trace.source == "nsys" else "event") + ("s" if count != 1 else "")
            column = "end" if trace.source == "nsys" and kind == "negative_dur" else column
            rows.append((row, column, f"{count} {before}{noun} {after} (the first here, in {table}) excluded "
                                      "from the time accounting, not read as zero-duration work"))
    start = "start" if trace.source == "nsys" else "ts"
    rows += [(0, start, overlap_text(entry)) for entry in trace.stream_overlap.streams]
    return pd.DataFrame(rows, columns=["row", "column", "note"]).astype({"row": "int64", "column": "str", "note": "str"})


def profile_table(trace: TraceData, name: str) -> pd.DataFrame:
    """The one-row ``profile`` table; g over the served traffic's window (connectors/profiles/window.py)."""
    work = devices(trace)
    gap = gap_window(trace, work)
    spans = gap.basis == "request_spans"
    per_device = [length(*d.kernels) for d in work]
    busy = gap.busy_us if spans else float(sum(length(*d.busy) for d in work))
    window = gap.window_us if spans else gap.full_window_us
    primary = trace.device_keys[int(np.argmax(per_device))]
    return pd.DataFrame({
        "trace": [name],
        "device": [trace.device_names.get(primary, "")],
        "gpu_window_us": [window],
        "kernel_active_us": [gap.kernel_active_us if spans else gap.full_kernel_active_us],
        "busy_us": [busy],
        "idle_us": [max(window - busy, 0.0)],
        "gap_ratio": [gap.gap_ratio],
        "gap_basis": [gap.basis],
        "kernels": [int(np.count_nonzero(trace.kind == KERNEL))],
        "sync_us": [trace.sync_us],
        "gap_window_us": [gap.window_us],
        "gap_kernel_active_us": [gap.kernel_active_us],
        "gap_ratio_full": [gap.gap_ratio_full],
        "excluded_kernels": [gap.excluded_kernels],
        "excluded_kernel_us": [gap.excluded_kernel_us],
        "excluded_us": [gap.excluded_us],
        "gap_note": [gap.note],
    })


def event_frame(trace: TraceData) -> pd.DataFrame:
    """GPU time by name and kind: name, kind, category, dur (summed) and count. Up to
    PER_EVENT_ROWS events with fractional durations it has one row per event (pandas then sums
    them, compensated: the reference); else one row per (kind, name), summed by numpy (exact for
    durations in whole microseconds)."""
    if trace.dur.dtype.kind == "f" and trace.kind.size <= PER_EVENT_ROWS:
        frame = pd.DataFrame({"name": [trace.names[i] for i in trace.name.tolist()], "kind": trace.kind,
                              "dur": trace.dur, "count": np.ones(trace.kind.size, dtype=np.int64)})
    else:
        frame = _pair_frame(trace)
    categories = {}
    for (name, kind) in frame[["name", "kind"]].drop_duplicates().itertuples(index=False):
        categories[(name, kind)] = fine_category(name, kind)
    frame["category"] = [categories[key] for key in zip(frame["name"], frame["kind"])]
    return frame


def _pair_frame(trace: TraceData) -> pd.DataFrame:
    """One row per (kind, name) of the GPU work: name, kind, dur (summed) and count."""
    width = max(len(trace.names), 1)
    key = trace.kind.astype(np.int64)
    key *= width
    key += trace.name
    keys, inverse = distinct_keys(key, (int(trace.kind.max(initial=0)) + 1) * width)
    del key
    sums, counts = group_sums(inverse, trace.dur, keys.size)
    return pd.DataFrame({"name": [trace.names[k % width] for k in keys.tolist()], "kind": keys // width,
                         "dur": sums, "count": counts})


def kernel_table(events: pd.DataFrame) -> pd.DataFrame:
    """GPU time and launches per kernel name, largest total first."""
    frame = events[events["kind"] == KERNEL]
    grouped = frame.groupby(["name", "category"], sort=False).agg(count=("count", "sum"), sum=("dur", "sum"))
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
