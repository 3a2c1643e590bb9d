"""Busy / idle breakdowns of traces: our default rules per device and stream, and HTA's rules.

Default (``breakdown``): per device, the window runs from the first start to the last end of its
GPU work (kernels, memcpys, memsets); busy is the union of that work, idle the rest of the window.
The same per stream. Coarse categories (computation, communication, memory) are unions; fine
categories are sums of durations. cuda_sync events are waits, not work: they are not busy.

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

from connectors.profiles.categories import COARSE, HTA_TYPES, coarse_category, fine_category, hta_kernel_type

# trace_events first: it loads numpy with a one-thread BLAS (see there)
from connectors.profiles.events import GPU_WORK, TRACE, Trace, distinct, length, member, merge, name_mask

HTA_DEVICE_SYNCS = ("Event Sync", "Context Sync")


def rank_of(trace: Trace, position: int, taken: set[int]) -> int:
    """The trace's distributedInfo rank, else its position in the set (when free)."""
    rank = trace.rank if trace.rank is not None and trace.rank not in taken else position
    while rank in taken:
        rank += 1
    taken.add(rank)
    return rank


def ranks(traces: list[Trace]) -> list[int]:
    """A distinct rank per trace of a set."""
    taken: set[int] = set()
    return [rank_of(trace, position, taken) for position, trace in enumerate(traces)]


# ---------------------------------------------------------------- default rules

def breakdown(traces: list[Trace]) -> list[dict]:
    """Per rank, per device and per stream: window, busy, idle and categories (default rules)."""
    return [{"rank": rank, "file": trace.path.name, "source": trace.source,
             "devices": [device_breakdown(trace, d) for d in _work_devices(trace)]}
            for rank, trace in zip(ranks(traces), traces)]


def _work_devices(trace: Trace) -> list[int]:
    """Device indices that ran GPU work, in order."""
    work = np.isin(trace.role, GPU_WORK)
    return distinct(trace.device[work]).tolist()


def category_codes(trace: Trace, mask: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Fine categories of the selected GPU work events as (labels, code per event), classified
    once per distinct (kind, name) pair."""
    width = max(len(trace.names), 1)
    key = trace.role[mask].astype(np.int64) * width + trace.name[mask]
    keys, inverse = _distinct_keys(key, (int(trace.role.max(initial=0)) + 1) * width)
    per_key = [fine_category(trace.names[k % width], k // width) for k in keys.tolist()]
    labels = sorted(set(per_key))
    code_of = {label: i for i, label in enumerate(labels)}
    codes = np.array([code_of[c] for c in per_key], dtype=np.int64)
    return labels, codes[inverse] if key.size else np.zeros(0, dtype=np.int64)


def _distinct_keys(key: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for keys in [0, bound): by a table of the bound's
    size instead of a sort (8 bytes per event and no sorting, for traces of millions of events)."""
    if bound > max(4 * key.size, 1 << 16):
        keys, inverse = np.unique(key, return_inverse=True)
        return keys, inverse.ravel()
    present = np.zeros(bound, dtype=bool)
    present[key] = True
    keys = np.flatnonzero(present)
    index = np.cumsum(present) - 1
    return keys, index[key]


def event_categories(trace: Trace, mask: np.ndarray) -> np.ndarray:
    """Fine category per selected GPU work event (object array)."""
    labels, codes = category_codes(trace, mask)
    return np.array(labels or [""], dtype=object)[codes] if codes.size else np.array([], dtype=object)


def device_breakdown(trace: Trace, device: int) -> dict:
    """Window, busy, idle, kernel-active and categories of one device, with its streams."""
    mine = np.isin(trace.role, GPU_WORK) & (trace.device == device)
    start, end, role = trace.start[mine], trace.end[mine], trace.role[mine]
    labels, codes = category_codes(trace, mine)
    coarse = np.array([COARSE.index(coarse_category(label)) for label in labels] or [0], dtype=np.int64)[codes]
    sums = np.bincount(codes, weights=end - start, minlength=len(labels)) if codes.size else np.zeros(0)
    kernels = role == 0
    out = {"device": str(trace.device_keys[device]), "name": trace.device_name(device),
           **interval_figures(start, end),
           "kernel_active_us": length(*merge(start[kernels], end[kernels])),
           "kernels": int(kernels.sum()),
           "coarse_us": {c: length(*merge(start[coarse == i], end[coarse == i])) for i, c in enumerate(COARSE)},
           "categories_us": dict(sorted(((label, float(total)) for label, total in zip(labels, sums)),
                                        key=lambda kv: (-kv[1], kv[0])))}
    streams = trace.stream[mine]
    out["streams"] = [{"stream": int(s), **interval_figures(start[streams == s], end[streams == s]),
                       "events": int((streams == s).sum())} for s in distinct(streams)]
    return out


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
    origin = min((float(t.ts[t.role != TRACE].min()) for t in traces if (t.role != TRACE).any()), default=0.0)
    return [{"rank": rank, "file": trace.path.name, **_hta_rank(trace, len(steps) > 1, origin)}
            for rank, trace in zip(ranks(traces), traces)]


def _hta_rank(trace: Trace, filter_steps: bool, origin: float) -> dict:
    """HTA's figures for one rank."""
    kept = _hta_kept(trace, filter_steps)
    devices = kept & (trace.stream != -1)
    start = trace.ts[devices] - origin
    end = start + trace.dur[devices]
    if start.size == 0:
        return {"window_us": 0.0, "busy_us": 0.0, "idle_us": 0.0, "compute_us": 0.0,
                "non_compute_us": 0.0, "kernel_types_us": {}}
    merged = merge(start, end)
    window = float(merged[1][-1] - merged[0][0])
    idle = window - (float(merged[1].sum()) - float(merged[0].sum()))
    per_name = np.array([hta_kernel_type(n) for n in trace.names] or [""], dtype=object)
    types = per_name[trace.name[devices]]
    compute = merge(start[types == "COMPUTATION"], end[types == "COMPUTATION"])
    compute_us = float(compute[1].sum()) - float(compute[0].sum())
    return {"window_us": window, "busy_us": window - idle, "idle_us": idle, "compute_us": compute_us,
            "non_compute_us": window - compute_us - idle,
            "kernel_types_us": hta_kernel_types(start, end, types)}


def _hta_kept(trace: Trace, filter_steps: bool) -> np.ndarray:
    """Events HTA keeps after dropping the last ProfilerStep (all of them when it does not)."""
    present = trace.role != TRACE
    if not filter_steps:
        return present
    gpu = ((trace.stream >= 0) & (trace.correlation >= 0)) | name_mask(trace, lambda n: n in HTA_DEVICE_SYNCS)
    host = present & ~gpu
    steps = host & name_mask(trace, lambda n: "ProfilerStep" in n)
    last_start = trace.ts[steps].max() if steps.any() else np.nan
    host &= trace.ts < last_start
    candidates = np.flatnonzero(present & gpu)
    launched = np.zeros(trace.role.size, dtype=bool)
    launched[candidates] = member(trace.correlation[candidates], trace.correlation[host])
    return host | launched


def hta_kernel_types(start: np.ndarray, end: np.ndarray, types: np.ndarray) -> dict[str, float]:
    """HTA's _get_gpu_kernel_type_time: time per type and per overlap of types.

    Each type's intervals are merged; a sweep over their starts and ends labels every segment with
    the set of types running ("COMPUTATION overlapping MEMORY"), and each segment's length is
    truncated to whole microseconds, as HTA's ``astype(int)`` does.
    """
    times, deltas = [], []
    for index, kind in enumerate(HTA_TYPES):
        s, e = merge(start[types == kind], end[types == kind])  # HTA's merge_kernel_intervals
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
