"""The kernel-level finding rules (METHOD §6). Each reads a ProfileView and returns Findings.

Idle-time findings (synchronisation waste, input-bound steps, launch-bound execution, copy
overhead) lie in serving_path.in_flight_idle; kernel-time findings (memory-bound chains,
batch-size mismatch) in model_compute.kernel_active. Thresholds are module constants, each
documented in docs/trace.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from audit.trace.callpath import GRAPH_LAUNCH
from audit.trace.profile_view import ProfileView
from connectors.profiles.events import (
    ANNOTATION,
    CPU_OP,
    GPU_ANNOTATION,
    MEMCPY,
    PYTHON,
    RUNTIME,
    SYNC,
    SYNC_CALLS,
    ascending,
    covered_up_to,
    length,
    member,
    merge,
    name_mask,
    overlap,
)
from connectors.profiles.intervals import among

IDLE, KERNEL_TIME = "in_flight_idle", "kernel_active"
TOP = 3                       # findings per rule and profile, largest first
BLOCKING_COPY = re.compile(r"(cuda|hip|cu)Memcpy(2D|3D|Peer|ToSymbol|FromSymbol|HtoD|DtoH|DtoD)?(_v\d+)?")
GPU_SIDE_WAITS = ("Stream Wait Event",)
DATA_WAIT = re.compile(r"DataLoader|dataloader\.py\(\d+\): (__next__|_next_data)")
INPUT_MIN_SHARE = 0.05        # GPU idle while the DataLoader runs, share of the window
LAUNCH_MIN_SHARE = 0.10       # host-starved idle between kernels, share of the window
SMALL_KERNEL_US = 10.0        # median kernel below this: launch-bound rather than host overhead
COPY_MIN_SHARE = 0.01         # exposed host<->device copy time, share of the window
CHAIN_MIN_SHARE = 0.01        # time in memory-bound chains, share of the window
SHORT_KERNEL_US = 10.0        # a chain member runs shorter than this
MIN_CHAIN = 3                 # kernels in a chain
MEMORY_BOUND_FLOP_PER_BYTE = 4.0
MEMORY_BOUND_CATEGORIES = ("elementwise_reduction", "normalisation_softmax", "other")
SMALL_M = 128                 # GEMM rows below this: the batch does not fill the GPU
LOW_OCCUPANCY = 10.0          # est. achieved occupancy % (0 means not estimated)
BATCH_MIN_SHARE = 0.01


@dataclass
class Finding:
    """One finding before pricing."""

    id: str
    title: str
    kernel: str
    call_path: str
    gpu_us: float
    part: str
    device: int
    evidence: dict = field(default_factory=dict)
    fix: str = ""


def _top(groups: dict, limit: int = TOP) -> list:
    """Group keys by descending total (first value of each group), at most ``limit``."""
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][0], str(kv[0])))
    return [kv for kv in ranked if kv[1][0] > 0][:limit]


# ---------------------------------------------------------------- synchronisation waste

def blocking_calls(view: ProfileView) -> tuple[np.ndarray, np.ndarray]:
    """Rows of host calls that block the CPU on the GPU, and the device each waits on (found once
    per view: sync_waste and launch_bound both read them)."""
    if "blocking" not in view.cache:
        view.cache["blocking"] = _blocking_calls(view)
    return view.cache["blocking"]


def _blocking_calls(view: ProfileView) -> tuple[np.ndarray, np.ndarray]:
    """:func:`blocking_calls`, found."""
    t = view.trace
    runtime = t.role == RUNTIME
    calls = runtime & name_mask(t, lambda n: n.startswith(SYNC_CALLS) or bool(BLOCKING_COPY.fullmatch(n)))
    pageable = [view.paths.launch_of[i] for i in np.flatnonzero(view.role == MEMCPY)
                if "Pageable" in view.kernel_name(i) and view.paths.launch_of[i] >= 0]
    rows = np.union1d(np.flatnonzero(calls), np.asarray(pageable, dtype=np.int64))
    twins = np.flatnonzero((t.role == SYNC) & ~name_mask(t, lambda n: n in GPU_SIDE_WAITS))
    lone = twins[~member(t.correlation[twins], t.correlation[rows])]
    rows = np.union1d(rows, lone).astype(np.int64)
    return rows, _wait_devices(view, rows)


def _wait_devices(view: ProfileView, rows: np.ndarray) -> np.ndarray:
    """The device a blocking call waits on: its own work's, its cuda_sync twin's, else the primary."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.int64)
    t = view.trace
    device = np.full(rows.size, view.primary, dtype=np.int64)
    on_gpu = np.flatnonzero(t.device >= 0)
    on_gpu = on_gpu[member(t.correlation[on_gpu], t.correlation[rows])]      # the twins of these calls
    known = {int(c): int(d) for c, d in zip(t.correlation[on_gpu], t.device[on_gpu])
             if c != -1 and d in view.windows}
    for i, row in enumerate(rows.tolist()):
        if t.device[row] in view.windows:
            device[i] = t.device[row]
        elif int(t.correlation[row]) in known:
            device[i] = known[int(t.correlation[row])]
    return device


def sync_waste(view: ProfileView) -> list[Finding]:
    """CPU blocked in a synchronisation call or blocking copy while the GPU ran nothing."""
    t = view.trace
    rows, devices = blocking_calls(view)
    groups: dict[tuple[str, str], list] = {}
    for row, device in zip(rows.tolist(), devices.tolist()):
        idle = float(view.idle_within(device, t.start[row:row + 1], t.end[row:row + 1])[0])
        key = (t.names[t.name[row]], view.host_display(row) if t.role[row] == RUNTIME else "(GPU-side sync record)")
        group = groups.setdefault(key, [0.0, 0, 0.0, device])
        group[0] += idle
        group[1] += 1
        group[2] += float(t.dur[row])
    return [Finding("sync_waste", f"CPU blocked in {call} while the GPU idled", call, path, idle, IDLE, device,
                    {"calls": calls, "blocked_us": round(blocked, 3), "gpu_idle_us": round(idle, 3)},
                    "make the wait asynchronous: drop the sync, pin host memory and copy with "
                    "non_blocking=True, or move the read-back off the hot path")
            for (call, path), (idle, calls, blocked, device) in _top(groups)]


# ---------------------------------------------------------------- input-bound steps

def data_waits(view: ProfileView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host intervals spent fetching input (DataLoader), merged; and the longest such event's row."""
    t = view.trace
    mask = among(t.role, (CPU_OP, ANNOTATION, PYTHON)) & name_mask(t, lambda n: bool(DATA_WAIT.search(n)))
    rows = np.flatnonzero(mask)
    starts, ends = merge(t.start[rows], t.end[rows])
    return starts, ends, rows


def input_bound(view: ProfileView) -> list[Finding]:
    """GPU idle while the host waited for the next batch from the DataLoader."""
    t = view.trace
    starts, ends, rows = data_waits(view)
    if rows.size == 0:
        return []
    idle = view.idle_within(view.primary, starts, ends)
    total = float(idle.sum())
    if total < INPUT_MIN_SHARE * view.window_us:
        return []
    longest = int(rows[np.argmax(t.dur[rows])])
    after = _first_work_after(view, view.primary, float(ends[np.argmax(idle)]))
    steps = int((name_mask(t, lambda n: n.startswith("ProfilerStep")) & (t.role != GPU_ANNOTATION)).sum())
    return [Finding("input_bound", "GPU idle while the step waits for input from the DataLoader",
                    after, view.host_display(longest), total, IDLE, view.primary,
                    {"waits": int(starts.size), "data_wait_us": round(length(starts, ends), 3),
                     "gpu_idle_us": round(total, 3), "profiler_steps": steps},
                    "load input in the background: DataLoader(num_workers>0, pin_memory=True, "
                    "prefetch_factor), or prepare batches on another thread")]


def _first_work_after(view: ProfileView, device: int, time: float) -> str:
    """Name of the first GPU work on ``device`` that starts at or after ``time``."""
    mine = np.flatnonzero((view.device == device) & (view.start >= time))
    return view.kernel_name(int(mine[np.argmin(view.start[mine])])) if mine.size else "(none)"


# ---------------------------------------------------------------- launch-bound execution

def launch_bound(view: ProfileView) -> list[Finding]:
    """GPU idle between kernels because the next launch had not been issued (host-starved).

    A device none of whose work has a launch in the trace has no starved gap (no copy of its
    events is made to find that out)."""
    launched = view.paths.launch_of >= 0
    devices = [d for d in view.devices if bool(_on(launched, view.on_device(d)).any())]
    del launched
    if not devices:
        return []
    excluded = _excluded(view)
    out = []
    for device in devices:
        found = _starved(view, device, excluded)
        if found is not None:
            out.append(found)
    return out


def _on(mask: np.ndarray, device: np.ndarray | None) -> np.ndarray:
    """``mask`` on one device's work events (``device`` None: every event is on it)."""
    return mask if device is None else mask & device


def _excluded(view: ProfileView) -> tuple[np.ndarray, np.ndarray]:
    """Host time already explained by blocking calls or input waits (not counted twice)."""
    rows, _ = blocking_calls(view)
    starts, ends, _ = data_waits(view)
    t = view.trace
    return merge(np.concatenate([t.start[rows], starts]), np.concatenate([t.end[rows], ends]))


def _starved(view: ProfileView, device: int, excluded) -> Finding | None:
    """The launch-bound finding of one device, or None below the threshold."""
    mine = np.flatnonzero(view.device == device)
    start = view.start[mine]
    order = mine if ascending(start) else mine[np.argsort(start, kind="stable")]
    busy_s, busy_e = view.busy[device]
    if busy_s.size < 2:
        return None
    g0, g1 = busy_e[:-1], busy_s[1:]
    nxt = order[np.searchsorted(view.start[order], g1, side="left")]
    del order, start
    launch = view.paths.launch_of[nxt]
    t = view.trace
    ls, le = t.start[np.maximum(launch, 0)], t.end[np.maximum(launch, 0)]
    graph_names = np.array([bool(GRAPH_LAUNCH.search(n)) for n in t.names] or [False])
    graph = (launch >= 0) & graph_names[t.name[np.maximum(launch, 0)]]
    starved = (launch >= 0) & ((ls >= g0) | (~graph & (le > g0)))
    gap = (g1 - g0) - (covered_up_to(excluded, g1) - covered_up_to(excluded, g0)) if excluded[0].size else g1 - g0
    gap = np.where(starved, np.maximum(gap, 0.0), 0.0)
    total = float(gap.sum())
    if total < LAUNCH_MIN_SHARE * (view.windows[device][1] - view.windows[device][0]):
        return None
    return _launch_finding(view, device, mine, nxt, launch, gap, total)


def _launch_finding(view, device, mine, nxt, launch, gap, total) -> Finding:
    """Build the launch-bound finding: the call paths whose kernels waited longest for a launch."""
    groups: dict[tuple[str, str], list] = {}
    for position, g in zip(nxt.tolist(), gap.tolist()):
        if g > 0:
            key = (view.pattern(int(view.paths.path_of[position])), view.kernel_name(position))
            group = groups.setdefault(key, [0.0, 0])
            group[0] += g
            group[1] += 1
    ranked = _top(groups, 5)
    (path, kernel), _ = ranked[0]
    t = view.trace
    launches = np.unique(launch[launch >= 0])
    median_kernel = float(np.median(view.dur[mine]))
    tiny = median_kernel < SMALL_KERNEL_US
    kind = "launch_bound" if tiny else "host_overhead"
    title = ("GPU idle between tiny kernels: launch overhead dominates" if tiny else
             "GPU idle between kernels while the host prepares the next launch")
    return Finding(kind, title, kernel, path, total, IDLE, device, {
        "kernels": int(mine.size), "median_kernel_us": round(median_kernel, 3),
        "median_launch_call_us": round(float(np.median(t.dur[launches])), 3) if launches.size else None,
        "launch_calls_us": round(float(t.dur[launches].sum()), 3),
        "kernel_us": round(float(view.dur[mine].sum()), 3),
        "starved_gaps": int((gap > 0).sum()), "starved_idle_us": round(total, 3),
        "top_paths": [{"call_path": p, "kernel": k, "idle_us": round(v[0], 3)} for (p, k), v in ranked]},
        "batch more work per launch: CUDA graphs (torch.compile mode='reduce-overhead'), fused "
        "kernels, larger batches; keep Python off the launch path")


# ---------------------------------------------------------------- copy overhead

def copy_overhead(view: ProfileView) -> list[Finding]:
    """Host<->device copies not hidden behind kernels, per device and copy direction."""
    out = []
    for device in view.devices:
        window = view.windows[device][1] - view.windows[device][0]
        groups: dict[str, list] = {}
        for kind in ("memcpy_htod", "memcpy_dtoh"):
            mine = np.flatnonzero((view.device == device) & view.in_categories(kind))
            if mine.size:
                copies = merge(view.start[mine], view.end[mine])
                exposed = length(*copies) - overlap(copies, view.kernel_busy[device])
                groups[kind] = [exposed, mine]
        for kind, (exposed, mine) in _top(groups):
            if exposed >= COPY_MIN_SHARE * window:
                out.append(_copy_finding(view, device, kind, exposed, mine))
    return out


def _copy_finding(view: ProfileView, device: int, kind: str, exposed: float, mine: np.ndarray) -> Finding:
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
    return Finding("copy_overhead", f"Exposed {direction} copies", name, path, exposed, IDLE, device,
                   {"copies": int(mine.size), "copy_us": round(float(view.dur[mine].sum()), 3),
                    "exposed_us": round(exposed, 3), "pageable": int(pageable),
                    "bytes": int(moved[moved > 0].sum())},
                   "pin host memory and copy with non_blocking=True on a side stream, keep tensors "
                   "on the device, or copy fewer, larger buffers")
