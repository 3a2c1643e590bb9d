"""Busy / idle breakdowns of traces: our default rules per device and stream, and HTA's rules.

Default (``breakdown``): per device, the window runs from the first start to the last end of its
GPU work (kernels, memcpys, memsets); busy is the union of that work, idle the rest of the window.
The same per stream. Coarse categories (computation, communication, memory) are unions; fine
categories are sums of durations, each clipped to its stream's busy time where work overlaps
earlier work on its own stream (a clock or trace defect, named per stream in
``overlapping_events``). cuda_sync events are waits, not work: they are not busy.

HTA-compatible (``hta_breakdown``): Holistic Trace Analysis 0.5.0's get_temporal_breakdown and
get_gpu_kernel_breakdown(include_memory_kernels=True), rule for rule (docs/trace.md):
- ranks are aligned on the earliest timestamp of the set;
- when the set names more than one ProfilerStep, events of the last step are dropped: host events
  from its start on, and GPU events whose correlation no remaining host event carries;
- a "GPU kernel" is any event with an integer ``args.stream`` (cuda_sync events included);
- window = first start to last end of those events, per rank over all its devices;
- kernel types by HTA's name rules; overlap segments are truncated to whole microseconds.
"""
from __future__ import annotations

import numpy as np

from connectors.profiles.blocks import compact
from connectors.profiles.categories import COARSE, HTA_TYPES, coarse_category, fine_category, hta_kernel_type
from connectors.profiles.events import GPU_WORK, TRACE, Trace, distinct, length, member, merge, name_mask, take
from connectors.profiles.intervals import among, distinct_keys, group_sums, lookup

HTA_DEVICE_SYNCS = ("Event Sync", "Context Sync")


def ranks(traces: list[Trace]) -> list[int]:
    """A distinct rank per trace of a set (connectors/profiles/rankset.py ``distinct_ranks``)."""
    from connectors.profiles.rankset import distinct_ranks

    return distinct_ranks([trace.rank for trace in traces])


# ---------------------------------------------------------------- default rules

def breakdown(traces: list[Trace]) -> list[dict]:
    """Per rank, per device and per stream: window, busy, idle and categories (default rules);
    the events each trace left out (a negative or no duration, no name); and the streams whose work
    overlaps earlier work on them (a clock or trace defect: connectors/profiles/events.py
    ``StreamOverlap``), whose time is clipped to the stream's busy time in the categories."""
    return [{"rank": rank, "file": trace.path.name, "source": trace.source,
             "excluded_events": dict(trace.excluded), "overlapping_events": trace.stream_overlap.streams,
             "devices": [device_breakdown(trace, d) for d in _work_devices(trace)]}
            for rank, trace in zip(ranks(traces), traces)]


def _work_devices(trace: Trace) -> list[int]:
    """Device indices that ran GPU work, in order."""
    work = among(trace.role, GPU_WORK)
    return distinct(take(trace.device, work)).tolist()


def category_codes(trace: Trace, mask: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Fine categories of the selected GPU work events as (labels, code per event, in the
    narrowest integer type), classified once per distinct (kind, name) pair."""
    width = max(len(trace.names), 1)
    bound = (int(trace.role.max(initial=0)) + 1) * width
    key: np.ndarray = take(trace.role, mask).astype(next(t for t in (np.int8, np.int16, np.int32, np.int64)
                                             if bound <= np.iinfo(t).max))
    key *= width
    key += take(trace.name, mask)
    keys, inverse = distinct_keys(key, bound)
    del key
    per_key = [fine_category(trace.names[k % width], k // width) for k in keys.tolist()]
    labels = sorted(set(per_key))
    code_of = {label: i for i, label in enumerate(labels)}
    codes = compact(np.array([code_of[c] for c in per_key], dtype=np.int64))
    return labels, lookup(codes, inverse) if inverse.size else np.zeros(0, dtype=np.int8)


def event_categories(trace: Trace, mask: np.ndarray) -> np.ndarray:
    """Fine category per selected GPU work event (object array; small traces and tests)."""
    labels, codes = category_codes(trace, mask)
    return np.array(labels or [""], dtype=object)[codes] if codes.size else np.array([], dtype=object)


def device_breakdown(trace: Trace, device: int) -> dict:
    """Window, busy, idle, kernel-active and categories of one device, with its streams."""
    mine = among(trace.role, GPU_WORK)
    mine &= trace.device == device
    start, end, role = take(trace.start, mine), take(trace.end, mine), take(trace.role, mine)
    labels, codes = category_codes(trace, mine)
    coarse = lookup(compact(np.array([COARSE.index(coarse_category(label)) for label in labels] or [0])), codes)
    overlaps = trace.stream_overlap
    sums = (group_sums(codes, take(overlaps.dur, mine), len(labels))[0].tolist() if overlaps.streams
            else _sums(codes, start, end, take(trace.dur, mine), len(labels)))
    kernels = role == 0
    out = {"device": str(trace.device_keys[device]), "name": trace.device_name(device),
           **interval_figures(start, end),
           "kernel_active_us": length(*merge(take(start, kernels), take(end, kernels))),
           "kernels": int(kernels.sum()),
           "coarse_us": {c: length(*merge(take(start, coarse == i), take(end, coarse == i)))
                         for i, c in enumerate(COARSE)},
           "categories_us": dict(sorted(((label, float(total)) for label, total in zip(labels, sums)),
                                        key=lambda kv: (-kv[1], kv[0])))}
    del kernels, coarse, codes
    streams = take(trace.stream, mine)
    out["streams"] = []
    for s in distinct(streams).tolist():
        on = streams == s
        out["streams"].append({"stream": int(s), **interval_figures(take(start, on), take(end, on)),
                               "events": int(on.sum())})
    return out


def _sums(codes: np.ndarray, start: np.ndarray, end: np.ndarray, dur: np.ndarray, labels: int) -> list:
    """Per category code: the sum of end - start. Whole-number times sum exactly in any order
    (one category at a time, no float64 copy of the events); float ones as np.bincount sums them."""
    if codes.size == 0:
        return []
    if dur.dtype.kind in "iu" and start.dtype.kind in "iu":     # end - start is dur, exactly
        return [float(dur.sum()) if labels == 1 else float(dur[codes == i].sum()) for i in range(labels)]
    return np.bincount(codes, weights=end - start, minlength=labels).tolist()


def interval_figures(start: np.ndarray, end: np.ndarray) -> dict:
    """window (first start to last end), busy (union) and idle of a set of intervals."""
    if start.size == 0:
        return {"window_us": 0.0, "busy_us": 0.0, "idle_us": 0.0}
    window = float(end.max() - start.min())
    busy = length(*merge(start, end))
    return {"window_us": window, "busy_us": busy, "idle_us": max(window - busy, 0.0)}


# ---------------------------------------------------------------- HTA 0.5.0 rules

def hta_breakdown(traces: list[Trace]) -> list[dict]:
    """HTA's temporal breakdown and kernel-type times per rank of a set (module docstring)."""
    steps = set()
    for trace in traces:
        steps |= {n for n in trace.names if "ProfilerStep" in n}
    origin = min((t.base for t in traces if (t.role != TRACE).any()), default=0.0)
    return [{"rank": rank, "file": trace.path.name, **_hta_rank(trace, len(steps) > 1, origin)}
            for rank, trace in zip(ranks(traces), traces)]


def _hta_times(trace: Trace, devices: np.ndarray, origin: float) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (us after ``origin``) of the selected events: the trace's own columns when
    ``origin`` is its base (ts - origin is then exactly its start), else ts - origin as HTA has it."""
    if origin == trace.base and trace.written_ts is None:
        return take(trace.start, devices), take(trace.end, devices)
    start = take(trace.ts, devices) - origin
    return start, start + take(trace.dur, devices)


def _hta_rank(trace: Trace, filter_steps: bool, origin: float) -> dict:
    """HTA's figures for one rank."""
    devices = _hta_kept(trace, filter_steps)
    devices &= trace.stream != -1
    start, end = _hta_times(trace, devices, origin)
    if start.size == 0:
        return {"window_us": 0.0, "busy_us": 0.0, "idle_us": 0.0, "compute_us": 0.0,
                "non_compute_us": 0.0, "kernel_types_us": {}}
    merged = merge(start, end)
    window = float(merged[1][-1] - merged[0][0])
    idle = window - (float(merged[1].sum()) - float(merged[0].sum()))
    del merged
    per_name = np.array([_hta_code(hta_kernel_type(n)) for n in trace.names] or [-1], dtype=np.int8)
    types = lookup(per_name, take(trace.name, devices))
    del devices
    computing = types == 0
    compute = merge(take(start, computing), take(end, computing))
    del computing
    compute_us = float(compute[1].sum()) - float(compute[0].sum())
    return {"window_us": window, "busy_us": window - idle, "idle_us": idle, "compute_us": compute_us,
            "non_compute_us": window - compute_us - idle,
            "kernel_types_us": hta_kernel_types(start, end, types)}


def _hta_code(kind: str) -> int:
    """Index of a kernel type in HTA_TYPES (-1: OTHER)."""
    return HTA_TYPES.index(kind) if kind in HTA_TYPES else -1


def _hta_kept(trace: Trace, filter_steps: bool) -> np.ndarray:
    """Events HTA keeps after dropping the last ProfilerStep (all of them when it does not).

    Timestamps are compared as starts (the same order: starts restore their timestamps exactly,
    else the timestamps are kept and compared)."""
    present = trace.role != TRACE
    if not filter_steps:
        return present
    ts = trace.start if trace.written_ts is None else trace.written_ts
    gpu = ((trace.stream >= 0) & (trace.correlation >= 0)) | name_mask(trace, lambda n: n in HTA_DEVICE_SYNCS)
    host = present & ~gpu
    steps = host & name_mask(trace, lambda n: "ProfilerStep" in n)
    last_start = ts[steps].max() if steps.any() else np.nan
    host &= ts < last_start
    candidates = np.flatnonzero(present & gpu)
    launched = np.zeros(trace.role.size, dtype=bool)
    launched[candidates] = member(trace.correlation[candidates], trace.correlation[host])
    return host | launched


def hta_kernel_types(start: np.ndarray, end: np.ndarray, types: np.ndarray) -> dict[str, float]:
    """HTA's _get_gpu_kernel_type_time: time per type and per overlap of types.

    Each type's intervals are merged; a sweep over their starts and ends labels every segment with
    the set of types running ("COMPUTATION overlapping MEMORY"), and each segment's length is
    truncated to whole microseconds, as HTA's ``astype(int)`` does. ``types`` holds indices into
    HTA_TYPES (-1: none of them). When one type runs alone, its segments are its merged intervals
    (no sweep, no copy of the events). Type labels (strings) are taken too.
    """
    if types.dtype.kind in "OUS":
        types = np.array([_hta_code(str(t)) for t in types.tolist()], dtype=np.int8)
    present = [index for index in range(len(HTA_TYPES)) if bool((types == index).any())]
    if len(present) == 1:
        mine = types == present[0]
        s, e = merge(take(start, mine), take(end, mine))
        del mine
        whole = s.dtype.kind in "iu" and e.dtype.kind in "iu"      # trunc changes no whole number
        return {HTA_TYPES[present[0]]: length(s, e) if whole else float(np.trunc(e - s).sum())}
    times, deltas = [], []
    for index in range(len(HTA_TYPES)):
        s, e = merge(start[types == index], end[types == index])  # HTA's merge_kernel_intervals
        times += [s, e]
        deltas += [np.full(s.size, 1 << index), np.full(e.size, -(1 << index))]
    time = np.concatenate(times)
    order = np.argsort(time, kind="stable")
    time, running = time[order], np.cumsum(np.concatenate(deltas)[order])
    segment = np.trunc(np.diff(time))
    out: dict[str, float] = {}
    for state in distinct(running[:-1]):
        if state > 0:
            label = " overlapping ".join(k for i, k in enumerate(HTA_TYPES) if state & (1 << i))
            out[label] = float(segment[running[:-1] == state].sum())
    return out
