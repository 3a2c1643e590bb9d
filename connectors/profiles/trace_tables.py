"""The tables of one trace's GPU work (schemas.profile), shared by the Kineto, Nsight Systems and
bundle readers and by a rank set's ranks (connectors/profiles/rankset.py): the one-row ``profile``
table (:func:`profile_sums` then :func:`profile_row`), ``kernels``, ``categories`` and ``notes``.
connectors/profiles/kineto.py describes each table's columns."""
from __future__ import annotations

import numpy as np
import pandas as pd

from connectors.profiles.categories import fine_category
from connectors.profiles.events import KERNEL, Trace, TraceData, length, overlap_text
from connectors.profiles.intervals import PER_EVENT_ROWS, distinct_keys, group_sums
from connectors.profiles.window import devices, gap_window, ratio

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
