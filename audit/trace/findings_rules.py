"""What the kernel-level finding rules share (METHOD §6), and the input-bound rule.

The blocking calls and data waits read here are what the idle classification (audit/trace/idle.py)
stands on; the idle-time rules built on it are in audit/trace/findings_idle.py, the kernel-time
rules (memory-bound chains, batch-size mismatch) in audit/trace/findings_kernels.py. Idle-time
findings lie in serving_path.in_flight_idle, kernel-time findings in model_compute.kernel_active.
Thresholds are module constants, each documented in docs/trace.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

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
    length,
    member,
    merge,
    name_mask,
)
from connectors.profiles.intervals import among

IDLE, KERNEL_TIME = "in_flight_idle", "kernel_active"
TOP = 3                       # findings per rule and profile, largest first
BLOCKING_COPY = re.compile(r"(cuda|hip|cu)Memcpy(2D|3D|Peer|ToSymbol|FromSymbol|HtoD|DtoH|DtoD)?(_v\d+)?")
GPU_SIDE_WAITS = ("Stream Wait Event",)
DATA_WAIT = re.compile(r"DataLoader|dataloader\.py\(\d+\): (__next__|_next_data)")
INPUT_MIN_SHARE = 0.05        # GPU idle while the DataLoader runs, share of the window
SMALL_KERNEL_US = 10.0        # median kernel below this: launch-bound rather than host overhead
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
