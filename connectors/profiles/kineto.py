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
from connectors.bounds import EITHER
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
from connectors.profiles.window import devices, gap_window, ratio
from schemas.profile import CategoryTime, KernelEvent, KernelSummary

NO_GPU_EVENTS = "no GPU kernel, memcpy or memset events"
#: a profile of copies alone measures no forward pass: its service's GPU time would be "no kernel profile"
NO_KERNEL_EVENTS = "no GPU kernel event, only memcpy / memset: nothing in it measures the model's compute"
EXPECTED_CUDA = "a trace recorded with ProfilerActivity.CUDA"


class KinetoConnector(Connector):
    """Reads one PyTorch profiler Chrome trace (.json or .json.gz), or a folder of one job's rank
    traces as one profile (connectors/profiles/rankset.py)."""

    format_name = "kineto"
    kind = "profiles"
    accepts = EITHER
    schemas = {"profile": KernelSummary, "kernels": KernelEvent, "categories": CategoryTime}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Parse the trace and build the three tables; a profile covers no fixed time."""
        if self.path.is_dir():
            from connectors.profiles.rankset import read_rank_set

            tables, rows, self.parsed = read_rank_set(self.path, self.format_name)
            return tables, rows, (None, None)
        trace = read_view(self.path)
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


def read_view(path) -> TraceData:
    """The GPU view of the trace at ``path``; a trace without GPU work, or with copies alone, is
    refused (an InputError naming it)."""
    trace = load_trace(path)
    if trace.kind.size == 0:
        raise InputError(path, NO_GPU_EVENTS, expected=EXPECTED_CUDA)
    if not (trace.kind == KERNEL).any():
        raise InputError(path, NO_KERNEL_EVENTS, expected=EXPECTED_CUDA)
    return trace


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
    return profile_row(profile_sums(trace), name)


#: the figures of :func:`profile_sums` that add up over devices, and over the ranks of a set
ADDITIVE = ("gpu_window_us", "kernel_active_us", "busy_us", "kernels", "sync_us", "gap_window_us",
            "gap_kernel_active_us", "full_window_us", "full_kernel_active_us", "excluded_kernels",
            "excluded_kernel_us", "excluded_us")


def profile_sums(trace: TraceData) -> dict:
    """What the ``profile`` row is made of, summed over the trace's devices: the :data:`ADDITIVE`
    figures (the window and kernel-active time the row shows are the request spans' when the trace
    has them, else the whole GPU window's), the basis and note of g's window, and the device with the
    most kernel-active time (``device``, ``device_kernel_us``). The ranks of a set add up alike
    (connectors/profiles/rankset.py)."""
    work = devices(trace)
    gap = gap_window(trace, work)
    spans = gap.basis == "request_spans"
    per_device = [length(*d.kernels) for d in work]
    primary = trace.device_keys[int(np.argmax(per_device))]
    return {"device": trace.device_names.get(primary, ""), "device_kernel_us": float(max(per_device)),
            "gpu_window_us": gap.window_us if spans else gap.full_window_us,
            "kernel_active_us": gap.kernel_active_us if spans else gap.full_kernel_active_us,
            "busy_us": gap.busy_us if spans else float(sum(length(*d.busy) for d in work)),
            "kernels": int(np.count_nonzero(trace.kind == KERNEL)), "sync_us": trace.sync_us,
            "gap_basis": gap.basis, "gap_note": gap.note,
            "gap_window_us": gap.window_us, "gap_kernel_active_us": gap.kernel_active_us,
            "full_window_us": gap.full_window_us, "full_kernel_active_us": gap.full_kernel_active_us,
            "excluded_kernels": gap.excluded_kernels, "excluded_kernel_us": gap.excluded_kernel_us,
            "excluded_us": gap.excluded_us}


def profile_row(sums: dict, name: str) -> pd.DataFrame:
    """The one-row ``profile`` table of :func:`profile_sums` (of a trace, or added over a set's ranks)."""
    window = sums["gpu_window_us"]
    return pd.DataFrame({
        "trace": [name],
        "device": [sums["device"]],
        "gpu_window_us": [window],
        "kernel_active_us": [sums["kernel_active_us"]],
        "busy_us": [sums["busy_us"]],
        "idle_us": [max(window - sums["busy_us"], 0.0)],
        "gap_ratio": [ratio(sums["gap_window_us"], sums["gap_kernel_active_us"])],
        "gap_basis": [sums["gap_basis"]],
        "kernels": [int(sums["kernels"])],
        "sync_us": [sums["sync_us"]],
        "gap_window_us": [sums["gap_window_us"]],
        "gap_kernel_active_us": [sums["gap_kernel_active_us"]],
        "gap_ratio_full": [ratio(sums["full_window_us"], sums["full_kernel_active_us"])],
        "excluded_kernels": [int(sums["excluded_kernels"])],
        "excluded_kernel_us": [sums["excluded_kernel_us"]],
        "excluded_us": [sums["excluded_us"]],
        "gap_note": [sums["gap_note"]],
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
