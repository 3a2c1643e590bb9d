"""Idle-time findings read from the classified gaps (audit/trace/idle.py, METHOD §6).

- ``sync_waste``: the gaps a synchronisation or blocking copy drained (until the next launch call, or
  the caller's return where that is first: the article's "synchronise to read top-k for logging, then
  format the log line"),
  per call and the call path that issued it, plus GPU idle inside blocking calls that drained no
  gap while the GPU had nothing queued (idle before the next work's launch call began; idle with
  work queued, or a pageable copy's staging, is not the wait's);
- ``launch_bound`` / ``host_overhead``: the launch-bound gaps, per path of the work that waited;
- ``host_compute``: host work that led to no launch while the GPU idled, per host call path;
- ``copy_overhead``: host↔device copies not hidden behind kernels, plus the copy-bound gaps
  (the host staging pageable buffers), per device and direction.

All lie in serving_path.in_flight_idle. Thresholds are module constants, documented in docs/trace.md.
"""
from __future__ import annotations

import numpy as np

from audit.trace.findings_rules import IDLE, SMALL_KERNEL_US, TOP, Finding, _top, blocking_calls
from audit.trace.idle import COPY, HOST, LAUNCH, SYNC, idle_gaps
from audit.trace.profile_view import ProfileView
from connectors.profiles.events import RUNTIME, covered_up_to, length, merge, overlap

LAUNCH_MIN_SHARE = 0.10       # launch-bound idle, share of the device window
HOST_MIN_SHARE = 0.02         # one host call path's host-compute idle, share of the device window
COPY_MIN_SHARE = 0.01         # exposed copy time + copy-bound idle, share of the window ...
COPY_MIN_BUSY_SHARE = 0.25    # ... or copies' share of the device's busy time
SYNC_FIX = ("make the wait asynchronous: drop the sync, pin host memory and copy with non_blocking=True, "
            "or move the read-back (and the host work after it) off the hot path, e.g. to a logging thread")


def _window(view: ProfileView, device: int) -> float:
    lo, hi = view.windows[device]
    return hi - lo


def sync_waste(view: ProfileView) -> list[Finding]:
    """GPU idle caused by the host blocking on the GPU, at the call path that issued the wait."""
    t = view.trace
    gaps = idle_gaps(view)
    groups: dict[tuple[str, str], list] = {}
    drained_rows: set[int] = set()
    mine = np.flatnonzero(gaps.category == SYNC)
    for row, idle, device in zip(gaps.cause[mine].tolist(), gaps.idle_us[mine].tolist(), gaps.device[mine].tolist()):
        drained_rows.add(row)
        group = _group(groups, view, row, device)
        group[0] += idle
        group[4] += idle
        group[5] += 1
    rows, devices = blocking_calls(view)
    unqueued: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
    for row, device in zip(rows.tolist(), devices.tolist()):
        group = _group(groups, view, row, device)
        group[1] += 1
        group[2] += float(t.dur[row])
        if row not in drained_rows:
            if device not in unqueued:
                unqueued[device] = _unqueued(view, gaps, device)
            idle = _idle_inside(view, unqueued[device], device, float(t.start[row]), float(t.end[row]))
            group[0] += idle
            group[6] += idle
    return [Finding("sync_waste", f"GPU idle after the host blocked in {call}", call, path, idle, IDLE, device,
                    {"calls": calls, "blocked_us": round(blocked, 3), "gpu_idle_us": round(idle, 3),
                     "drained_gaps": gaps_n, "drained_idle_us": round(drained, 3),
                     "idle_inside_calls_us": round(inside, 3)}, SYNC_FIX)
            for (call, path), (idle, calls, blocked, device, drained, gaps_n, inside) in _top(groups)]


def _unqueued(view: ProfileView, gaps, device: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The device's idle with nothing queued, sorted: each gap from its start until the launch call of
    the work that ends it began (the whole gap where no launch is known). None for a device whose
    gaps are not told apart (no launch in the trace: audit/trace/idle.py ``bulk``)."""
    if any(b[0] == device for b in gaps.bulk):
        return None
    mine = gaps.device == device
    starts, ends = gaps.start[mine], np.minimum(gaps.end[mine], gaps.queued[mine])
    keep = ends > starts
    order = np.argsort(starts[keep], kind="stable")
    return starts[keep][order], ends[keep][order]


def _idle_inside(view: ProfileView, unqueued, device: int, start: float, end: float) -> float:
    """GPU idle with nothing queued inside a blocking call that drained no gap (METHOD §6: "while the
    GPU has nothing queued"; idle while work was queued is the GPU's own, and a pageable copy's
    staging is copy-bound, counted in copy_overhead). A device whose gaps are not told apart: its idle."""
    if unqueued is None:
        return float(view.idle_within(device, np.array([start]), np.array([end]))[0])
    if unqueued[0].size == 0:
        return 0.0
    lo, hi = view.windows[device]
    s, e = min(max(start, lo), hi), min(max(end, lo), hi)
    return float(covered_up_to(unqueued, np.array([e]))[0] - covered_up_to(unqueued, np.array([s]))[0])


def _group(groups: dict, view: ProfileView, row: int, device: int) -> list:
    t = view.trace
    path = view.pattern(view.paths.host_path(row)) if t.role[row] == RUNTIME else "(GPU-side sync record)"
    return groups.setdefault((t.names[t.name[row]], path), [0.0, 0, 0.0, device, 0.0, 0, 0.0])


def launch_bound(view: ProfileView) -> list[Finding]:
    """GPU idle between kernels while the host was on its way to the next launch."""
    gaps = idle_gaps(view)
    out = []
    for device in view.devices:
        mine = np.flatnonzero((gaps.category == LAUNCH) & (gaps.device == device))
        total = float(gaps.idle_us[mine].sum())
        if mine.size == 0 or total < LAUNCH_MIN_SHARE * _window(view, device):
            continue
        out.append(_launch_finding(view, device, mine, total))
    return out


def _launch_finding(view: ProfileView, device: int, mine: np.ndarray, total: float) -> Finding:
    gaps, t = idle_gaps(view), view.trace
    groups: dict[tuple[str, str], list] = {}
    launches = gaps.cause[mine]
    for node, launch, idle in zip(gaps.path[mine].tolist(), launches.tolist(), gaps.idle_us[mine].tolist()):
        kernel = _launched_name(view, launch)
        group = groups.setdefault((view.pattern(node), kernel), [0.0, 0])
        group[0] += idle
        group[1] += 1
    ranked = _top(groups, 5)
    (path, kernel), _ = ranked[0]
    work = np.flatnonzero(view.device == device) if view.on_device(device) is not None else np.arange(view.rows.size)
    median_kernel = float(np.median(view.dur[work]))
    tiny = median_kernel < SMALL_KERNEL_US
    unique = np.unique(launches[launches >= 0])
    return Finding("launch_bound" if tiny else "host_overhead",
                   "GPU idle between tiny kernels: launch overhead dominates" if tiny else
                   "GPU idle between kernels while the host prepares the next launch",
                   kernel, path, total, IDLE, device, {
                       "kernels": int(work.size), "median_kernel_us": round(median_kernel, 3),
                       "median_launch_call_us": round(float(np.median(t.dur[unique])), 3) if unique.size else None,
                       "launch_calls_us": round(float(t.dur[unique].sum()), 3),
                       "kernel_us": round(float(view.dur[work].sum()), 3),
                       "starved_gaps": int(mine.size), "starved_idle_us": round(total, 3),
                       "top_paths": [{"call_path": p, "kernel": k, "idle_us": round(v[0], 3)} for (p, k), v in ranked]},
                   "batch more work per launch: CUDA graphs (torch.compile mode='reduce-overhead'), fused "
                   "kernels, larger batches; keep Python off the launch path")


def _launched_name(view: ProfileView, launch: int) -> str:
    """The name of the first GPU work a launch call started ('' when none)."""
    found: dict[int, int] | None = view.cache.get("first_work_of")
    if found is None:
        found = view.cache["first_work_of"] = {}
        for at, row in enumerate(view.paths.launch_of.tolist()):
            if row >= 0 and row not in found:
                found[row] = at
    position = found.get(launch)
    return view.kernel_name(position) if position is not None else ""


def host_compute(view: ProfileView) -> list[Finding]:
    """GPU idle while the host ran work that led to no launch, per host call path (top 3)."""
    gaps, t = idle_gaps(view), view.trace
    mine = np.flatnonzero(gaps.category == HOST)
    groups: dict[str, list] = {}
    for node, row, idle, device in zip(gaps.path[mine].tolist(), gaps.cause[mine].tolist(),
                                       gaps.idle_us[mine].tolist(), gaps.device[mine].tolist()):
        group = groups.setdefault(view.pattern(node), [0.0, 0, device, {}])
        group[0] += idle
        group[1] += 1
        name = t.names[t.name[row]] if row >= 0 else ""
        group[3][name] = group[3].get(name, 0.0) + idle
    out = []
    for path, (idle, count, device, names) in _top(groups, TOP):
        if idle >= HOST_MIN_SHARE * _window(view, device):
            top = max(names.items(), key=lambda kv: (kv[1], kv[0]))[0]
            out.append(Finding("host_compute", "GPU idle while the host runs work that launches nothing", top, path,
                               idle, IDLE, device, {"gaps": count, "gpu_idle_us": round(idle, 3)},
                               "move the host work off the GPU's critical path: overlap it with GPU work "
                               "(launch the next step first), a worker thread or process, or do it on the GPU"))
    return out


def copy_overhead(view: ProfileView) -> list[Finding]:
    """Host<->device copies not hidden behind kernels, and the idle of pageable copies' staging."""
    gaps = idle_gaps(view)
    out = []
    for device in view.devices:
        busy = length(*view.busy[device])
        staging = np.flatnonzero((gaps.category == COPY) & (gaps.device == device))
        groups: dict[str, list] = {}
        for kind in ("memcpy_htod", "memcpy_dtoh"):
            mine = np.flatnonzero((view.device == device) & view.in_categories(kind))
            if mine.size:
                copies = merge(view.start[mine], view.end[mine])
                exposed = length(*copies) - overlap(copies, view.kernel_busy[device])
                idle = float(gaps.idle_us[staging].sum()) if kind == "memcpy_htod" else 0.0
                groups[kind] = [exposed + idle, mine, exposed, idle, length(*copies)]
        for kind, (total, mine, exposed, idle, copy_time) in _top(groups):
            if total >= COPY_MIN_SHARE * _window(view, device) or (busy > 0 and copy_time >= COPY_MIN_BUSY_SHARE * busy):
                out.append(_copy_finding(view, device, kind, total, mine, exposed, idle, copy_time / busy if busy else 0.0))
    return out


def _copy_finding(view, device, kind, total, mine, exposed, idle, busy_share) -> Finding:
    """One copy-overhead finding: its largest copy name and call path."""
    by_path: dict[tuple[str, str], list] = {}
    for position in mine.tolist():
        key = (view.pattern(int(view.paths.path_of[position])), view.kernel_name(position))
        by_path.setdefault(key, [0.0])[0] += float(view.dur[position])
    (path, name), _ = _top(by_path, 1)[0]
    pageable = sum("Pageable" in view.kernel_name(p) for p in mine.tolist())
    t = view.trace
    at = np.searchsorted(t.copy["rows"], view.rows[mine])
    moved = t.copy["bytes"][np.minimum(at, max(t.copy["rows"].size - 1, 0))] if t.copy["rows"].size else np.zeros(0)
    direction = "host to device" if kind == "memcpy_htod" else "device to host"
    pageable_word = " pageable" if pageable * 2 > mine.size else ""
    return Finding("copy_overhead", f"Exposed{pageable_word} {direction} copies", name, path, total, IDLE, device,
                   {"copies": int(mine.size), "copy_us": round(float(view.dur[mine].sum()), 3),
                    "exposed_us": round(exposed, 3), "staging_idle_us": round(idle, 3),
                    "share_of_busy": round(busy_share, 6), "pageable": int(pageable),
                    "bytes": int(moved[moved > 0].sum())},
                   "pin host memory and copy with non_blocking=True on a side stream, keep tensors "
                   "on the device, or copy fewer, larger buffers")
