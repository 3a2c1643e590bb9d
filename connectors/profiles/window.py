"""The window a profile's serving gap ratio g is taken over, and g's sensitivity to it (METHOD §3).

g = (window − kernel-active) ÷ kernel-active, over the window of the served traffic, chosen in
this order (``gap_basis``):

1. ``request_spans``: the union of the trace's ``costaudit.request*`` annotations (the collector
   writes one per request);
2. ``profiler_steps``: the union of its ``ProfilerStep#N`` annotations (host ``user_annotation``
   or 2021 ``Operator``, and ``gpu_user_annotation``), each host step extended to the end of the
   GPU work launched inside it (by correlation id), when the steps hold at least STEP_MIN_SHARE
   of the trace's kernel-active time. Steps that hold less annotate only part of the traffic (the
   demo's trace: one real prefill step, then decode steps without annotations) and are not used;
3. ``main_activity`` (``gpu_window`` when it leaves nothing out): per device, the GPU work is cut
   at *breaks*, idle gaps longer than BREAK_FACTOR × the device's BREAK_RANK-th longest gap and
   longer than BREAK_MIN_US; the group of work between breaks with the most kernel-active time is
   served traffic, and so is every group holding at least MAJOR_SHARE of that group's
   kernel-active time; the window runs from the first to the last served group. Work before or
   after it (a stray kernel long after the last step, a warm-up well before the first) is outside
   the served traffic and does not move g; a small group between served groups stays in.

The rule's bound: a group of work the rule keeps lies at most T = max(BREAK_FACTOR × that gap,
BREAK_MIN_US) from the rest, so a kept stray kernel of duration d changes g by at most
(T + d) ÷ kernel-active; an excluded one does not change it at all.

Every basis also gives g over the device's whole GPU window (``gap_ratio_full``), the kernels
wholly outside the window (``excluded_kernels``), their kernel-active time (``excluded_kernel_us``)
and the GPU-window time outside it (``excluded_us``): g's sensitivity.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from connectors.profiles.columns import ANNOTATION, CPU_OP, GPU_ANNOTATION, KERNEL, MEMCPY, MEMSET, RUNTIME
from connectors.profiles.events import (
    Trace,
    TraceData,
    among,
    covered_up_to,
    length,
    merge,
    name_mask,
    overlap,
    take,
)
from connectors.profiles.intervals import PIECE

STEP_PREFIX = "ProfilerStep#"
STEP_MIN_SHARE = 0.9
"""Profiler steps set g's window when they hold at least this share of the kernel-active time."""
BREAK_FACTOR = 10.0
BREAK_RANK = 4
"""A break is an idle gap longer than BREAK_FACTOR × the BREAK_RANK-th longest gap of the device
(so at most BREAK_RANK − 1 breaks: a stray before and after the traffic, and one more) ..."""
BREAK_MIN_US = 1000.0
"""... and longer than this (1 ms: a trace of back-to-back kernels is not cut at a 20 µs gap)."""
MAJOR_SHARE = 0.1
"""A group between breaks is served traffic when it holds this share of the largest group's
kernel-active time."""
BASES = ("request_spans", "profiler_steps", "main_activity", "gpu_window")

Intervals = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Device:
    """One device's GPU work as merged interval sets."""

    busy: Intervals          # union of kernels, memcpys and memsets
    kernels: Intervals       # union of kernels
    kernel_start: np.ndarray  # every kernel's start and end (for the excluded count)
    kernel_end: np.ndarray

    @property
    def full(self) -> Intervals:
        """The device's GPU window: first start to last end of its work (none for a device named
        by a sync record or an annotation only)."""
        if self.busy[0].size == 0:
            return np.zeros(0), np.zeros(0)
        return np.array([float(self.busy[0][0])]), np.array([float(self.busy[1][-1])])


def devices(trace: TraceData) -> list[Device]:
    """Each device of ``trace`` with GPU work, in device order."""
    out = []
    for device in range(len(trace.device_keys)):
        mine = trace.device == device
        start, end = take(trace.start, mine), take(trace.end, mine)
        kernel = take(trace.kind, mine) == KERNEL
        ks, ke = take(start, kernel), take(end, kernel)
        out.append(Device(merge(start, end), merge(ks, ke), ks, ke))
    return out


def step_windows(trace: Trace | None) -> Intervals | None:
    """The profiler steps of ``trace`` as disjoint intervals (None when it has none): host steps
    extended to the end of the GPU work they launched, with the GPU-side step annotations."""
    if trace is None or not any(n.startswith(STEP_PREFIX) for n in trace.names):
        return None
    steps = among(trace.role, (ANNOTATION, CPU_OP, GPU_ANNOTATION)) & name_mask(trace, lambda n: n.startswith(STEP_PREFIX))
    if not steps.any():
        return None
    host = steps & (trace.role != GPU_ANNOTATION)
    hs, he = merge(trace.start[host].astype(np.float64), trace.end[host].astype(np.float64))
    he = he.astype(np.float64, copy=True)
    if hs.size:
        _extend_by_launched_work(trace, hs, he)
    gpu = steps & (trace.role == GPU_ANNOTATION)
    return merge(np.concatenate((hs, trace.start[gpu].astype(np.float64))),
                 np.concatenate((he, trace.end[gpu].astype(np.float64))))


def _extend_by_launched_work(trace: Trace, hs: np.ndarray, he: np.ndarray) -> None:
    """Extend each host step (``he`` in place) to the end of the GPU work whose launch (a runtime
    call with the work's correlation id) starts inside it."""
    launches = (trace.role == RUNTIME) & (trace.correlation != -1)
    at = trace.start[launches].astype(np.float64)
    step = np.searchsorted(hs, at, side="right") - 1
    inside = (step >= 0) & (at <= he[np.maximum(step, 0)])
    correlations, step = trace.correlation[launches][inside], step[inside]
    if correlations.size == 0:
        return
    order = np.argsort(correlations, kind="stable")
    correlations, step = correlations[order], step[order]
    work = among(trace.role, (KERNEL, MEMCPY, MEMSET)) & (trace.correlation != -1)
    wc, we = trace.correlation[work], trace.end[work].astype(np.float64)
    where = np.minimum(np.searchsorted(correlations, wc), correlations.size - 1)
    found = correlations[where] == wc
    np.maximum.at(he, step[where[found]], we[found])


def _gaps(bs: np.ndarray, be: np.ndarray, at: int) -> np.ndarray:
    """The idle gaps after busy intervals at .. at + PIECE − 1 (float64: no integer wrap-around)."""
    stop = min(at + PIECE, bs.size - 1)
    return bs[at + 1:stop + 1].astype(np.float64) - be[at:stop]


def breaks_of(bs: np.ndarray, be: np.ndarray) -> np.ndarray:
    """Positions i of the breaks (the gap after busy interval i), PIECE gaps at a time (a trace of
    50 M back-to-back kernels keeps no per-gap array)."""
    count = bs.size - 1
    if count < BREAK_RANK:
        return np.zeros(0, dtype=np.int64)
    longest = np.concatenate([np.sort(_gaps(bs, be, at))[-BREAK_RANK:] for at in range(0, count, PIECE)])
    limit = max(BREAK_FACTOR * float(np.sort(longest)[-BREAK_RANK]), BREAK_MIN_US)
    return np.concatenate([np.flatnonzero(_gaps(bs, be, at) > limit) + at for at in range(0, count, PIECE)])


def main_activity(device: Device) -> Intervals:
    """The window of the device's served traffic by the break rule (the module docstring)."""
    (bs, be), full = device.busy, device.full
    if bs.size == 0:
        return full
    breaks = breaks_of(bs, be)
    if breaks.size == 0:
        return full
    first = np.concatenate(([0], breaks + 1))
    last = np.append(breaks, bs.size - 1)
    if device.kernels[0].size == 0:
        return full
    active = covered_up_to(device.kernels, be[last]) - covered_up_to(device.kernels, bs[first])
    if not active.max() > 0:
        return full
    served = np.flatnonzero(active >= MAJOR_SHARE * active.max())
    return np.array([float(bs[first[served[0]]])]), np.array([float(be[last[served[-1]]])])


def outside(starts: np.ndarray, ends: np.ndarray, window: Intervals) -> int:
    """How many of the intervals [starts, ends) lie wholly outside ``window`` (disjoint, sorted); a
    zero-length one is inside when a window holds its instant."""
    ws, we = window
    if ws.size == 0:
        return int(starts.size)
    inside = 0
    for at in range(0, starts.size, PIECE):
        s, e = starts[at:at + PIECE], ends[at:at + PIECE]
        i = np.searchsorted(we, s, side="right")
        j = np.minimum(i, ws.size - 1)
        inside += int(np.count_nonzero((i < ws.size) & ((ws[j] < e) | ((ws[j] <= s) & (e == s)))))
    return int(starts.size - inside)


@dataclass(frozen=True)
class GapWindow:
    """g's window and figures, summed over devices."""

    basis: str
    note: str
    window_us: float            # the served window (summed over devices)
    kernel_active_us: float     # kernel-active inside it
    busy_us: float              # GPU work inside it
    full_window_us: float       # the GPU windows
    full_kernel_active_us: float
    excluded_kernels: int
    excluded_kernel_us: float
    excluded_us: float          # GPU-window time outside the served window

    @property
    def gap_ratio(self) -> float:
        return ratio(self.window_us, self.kernel_active_us)

    @property
    def gap_ratio_full(self) -> float:
        return ratio(self.full_window_us, self.full_kernel_active_us)


def ratio(window: float, active: float) -> float:
    """(window − active) ÷ active; NaN without kernel-active time."""
    return (window - active) / active if active > 0 else float("nan")


def gap_window(trace: TraceData, work: list[Device] | None = None) -> GapWindow:
    """g's window for ``trace`` (request spans, profiler steps, else the main GPU activity)."""
    work = devices(trace) if work is None else work
    note = ""
    shared: Intervals | None = None
    if trace.spans[0].size:
        basis, shared = "request_spans", merge(*trace.spans)
    else:
        basis = "main_activity"
        steps = step_windows(trace.trace)
        if steps is not None:
            total = sum(length(*d.kernels) for d in work)
            held = sum(overlap(d.kernels, steps) for d in work)
            share = held / total if total > 0 else 0.0
            if share >= STEP_MIN_SHARE:
                basis, shared = "profiler_steps", steps
            else:
                note = (f"profiler steps hold {100 * share:.1f} % of the kernel-active time (under "
                        f"{100 * STEP_MIN_SHARE:.0f} %): they do not delimit the served traffic")
    sums, trimmed = np.zeros(8), False
    for d in work:
        full = d.full
        window = shared if shared is not None else main_activity(d)
        trimmed |= shared is None and full[0].size > 0 and not (window[0][0] == full[0][0] and window[1][0] == full[1][0])
        active_in = overlap(d.kernels, window)
        full_active = length(*d.kernels)
        sums += (length(*window), active_in, overlap(d.busy, window), length(*full), full_active,
                 outside(d.kernel_start, d.kernel_end, window), full_active - active_in,
                 length(*full) - overlap(full, window))
    if basis == "main_activity" and not trimmed:
        basis = "gpu_window"
    served_us, active, busy, full_window, full_active = (float(x) for x in sums[:5])
    return GapWindow(basis=basis, note=note, window_us=served_us, kernel_active_us=active, busy_us=busy,
                     full_window_us=full_window, full_kernel_active_us=full_active, excluded_kernels=int(sums[5]),
                     excluded_kernel_us=float(max(sums[6], 0.0)), excluded_us=float(max(sums[7], 0.0)))
