"""Idle by host call path (METHOD §6): every GPU idle gap of a device's window, classified by what
the host was doing during it and attributed to the host call path that caused it.

A gap is a stretch of the device's window with no kernel, memcpy or memset running (the
complement of its busy set, so the gaps of a device add up exactly to its idle time). The GPU work
that ends the gap ("next") and the runtime call that launched it decide the class:

- ``untraced``: the next work has no launch in the trace, or the host had no event at the time;
- ``gpu_side``: the next work had been launched before the gap began (its launch was queued: the
  GPU waited on itself, a cross-stream event or its own launch latency; inside a CUDA / HIP graph
  replay every gap is this, the replay's kernels being queued by one graph launch);
- ``sync_drain``: a synchronisation or blocking copy (``blocking_calls``) was blocking the host
  when the GPU went idle, so the host had stopped feeding the queue: the gap is attributed to the
  call path of that call, host work after it under the same caller included, until the next launch
  (the start of the next runtime call that issued work on the device, METHOD §6) or the caller's
  return (the nearest enclosing Python frame other than a built-in's, or user annotation),
  whichever comes first; what is left of the gap after that is classed by what the host does then,
  as any other gap (inside the launch call: launch-bound; a DataLoader step: input wait);
- ``copy_bound``: the same, where the blocking call is a pageable host-to-device copy, or the host
  was inside such a copy call (staging the pageable buffer) during the gap;
- ``input_wait``: the host was in a data-loading frame (``DataLoader``, ``__next__``);
- ``launch_bound``: the host was on its way to the next launch: inside the launch call, in a
  frame or operator that encloses it, or (for gaps up to ``DISPATCH_GAP_US``) in host code that
  launches work itself (the tail of the previous operator's dispatch), in host work that meets the
  launch inside one ``nn.Module`` or CPU operator, or in no traced event between two launches; or
  the gap was shorter than ``LAUNCH_GAP_US``;
- ``host_compute``: the host ran Python or CPU operators that do not lead to the next launch
  (post-processing, tokenising, logging): attributed to the host event it was in.

What the host "was doing" is the innermost host event on the launching thread at the middle of
the part of the gap before the next launch. ``idle_gaps`` is found once per view.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from audit.trace.callpath import GRAPH_LAUNCH, HOST_ROLES
from audit.trace.findings_rules import blocking_calls, data_waits
from audit.trace.profile_view import ProfileView
from connectors.profiles.events import (
    ANNOTATION,
    CPU_OP,
    GPU_WORK,
    MEMCPY,
    PYTHON,
    Trace,
    ascending,
    covered_up_to,
    length,
)
from connectors.profiles.intervals import among

CATEGORIES = ("sync_drain", "host_compute", "launch_bound", "input_wait", "copy_bound", "gpu_side", "untraced")
SYNC, HOST, LAUNCH, INPUT, COPY, GPU_SIDE, UNTRACED = range(len(CATEGORIES))
LAUNCH_GAP_US = 10.0
"""A host-late gap this short is launch overhead whatever the host was in (TraceLens's threshold)."""
DISPATCH_GAP_US = 1000.0
"""Up to this long, host work that meets the next launch inside one model operator is dispatch
(launch) overhead; a longer one is host compute (cuDNN's algorithm search, say)."""
NO_HOST = "(no host event)"
PAGEABLE_HTOD = re.compile(r"HtoD.*Pageable|Pageable.*Device\)", re.IGNORECASE)


@dataclass
class IdleGaps:
    """The classified gaps of a view: per gap its device, start, end, class, the call path id it is
    attributed to (``CallPaths`` node, 0 for none) and the host row that caused it (-1: none).
    A device with no launch in the trace is summarised as one untraced group (``bulk``), with no
    per-gap arrays (a trace of millions of unlaunched kernels)."""

    device: np.ndarray
    start: np.ndarray
    end: np.ndarray
    category: np.ndarray
    path: np.ndarray
    cause: np.ndarray
    bulk: list[tuple[int, int, float, int]]     # (device, path, idle us, gaps) of unlaunched devices
    #: per gap: when the work that ends it was queued (the start of its launch call; inf: no launch
    #: known), so that the GPU had nothing queued from the gap's start until then (METHOD §6)
    queued: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def idle_us(self) -> np.ndarray:
        """Length of each gap."""
        return self.end - self.start


def idle_gaps(view: ProfileView) -> IdleGaps:
    """Every idle gap of the view's devices, classified (found once per view)."""
    if "idle" not in view.cache:
        view.cache["idle"] = _idle_gaps(view)
    return view.cache["idle"]


def _idle_gaps(view: ProfileView) -> IdleGaps:
    parts: list[tuple[np.ndarray, ...]] = []
    bulk = []
    launched = view.paths.launch_of >= 0
    for device in view.devices:
        on = view.on_device(device)
        busy_s, busy_e = view.busy[device]
        if busy_s.size < 2:
            continue
        if not bool((launched if on is None else launched & on).any()):
            first = int(np.flatnonzero(on)[0]) if on is not None else 0
            idle = float(busy_s[-1] - busy_s[0]) - length(busy_s[:-1], busy_e[:-1])
            bulk.append((device, int(view.paths.path_of[first]), idle, int(busy_s.size - 1)))
            continue
        parts.append(_device_gaps(view, device, busy_s, busy_e))
    if not parts:
        empty_f, empty_i = np.zeros(0), np.zeros(0, dtype=np.int64)
        return IdleGaps(empty_i, empty_f, empty_f, np.zeros(0, dtype=np.int8), empty_i, empty_i, bulk, empty_f)
    columns = [np.concatenate(column) for column in zip(*parts)]
    return IdleGaps(columns[0], columns[1], columns[2], columns[3], columns[4], columns[5], bulk, columns[6])


def _device_gaps(view: ProfileView, device: int, busy_s: np.ndarray, busy_e: np.ndarray) -> tuple[np.ndarray, ...]:
    """(device, start, end, category, path, cause, queued) of one device's gaps."""
    t, paths = view.trace, view.paths
    mine = np.flatnonzero(view.device == device) if view.on_device(device) is not None else np.arange(view.rows.size)
    start = view.start[mine]
    order = mine if ascending(start) else mine[np.argsort(start, kind="stable")]
    g0 = np.asarray(busy_e[:-1], dtype=np.float64)
    g1 = np.asarray(busy_s[1:], dtype=np.float64)
    nxt = order[np.searchsorted(view.start[order], g1, side="left")]
    next_launch = _next_launch_starts(view, mine, g0)
    launch = np.asarray(paths.launch_of[nxt], dtype=np.int64)
    has = launch >= 0
    safe = np.maximum(launch, 0)
    ls, le = t.start[safe].astype(np.float64), t.end[safe].astype(np.float64)
    graph_names = np.array([bool(GRAPH_LAUNCH.search(n)) for n in t.names] or [False])
    graph = has & graph_names[t.name[safe]]
    late = has & ((ls >= g0) | (~graph & (le > g0)))
    category = np.where(has, GPU_SIDE, UNTRACED).astype(np.int8)
    path = np.asarray(paths.path_of[nxt], dtype=np.int64)
    cause = np.where(has, launch, -1)
    in_call = late & (ls < g0)                       # the host was still in the launch call
    staging = has & np.isin(launch, _pageable_htod_calls(view))
    category[in_call] = np.where(staging[in_call], COPY, LAUNCH)
    todo = np.flatnonzero(late & ~in_call)
    cut_at = np.full(g0.size, np.nan)
    if todo.size:
        _classify_late(view, device, todo, g0, g1, ls, next_launch, launch, category, path, cause, cut_at)
    cuts = np.flatnonzero(~np.isnan(cut_at))
    if cuts.size:  # a drained gap ends at the next launch or the sync caller's return; the rest is a gap of its own
        n = g0.size
        g0, g1 = np.concatenate([g0, cut_at[cuts]]), np.concatenate([g1, g1[cuts]])
        g1[cuts] = cut_at[cuts]
        ls, launch, late, in_call, staging = (np.concatenate([a, a[cuts]]) for a in (ls, launch, late, in_call, staging))
        category = np.concatenate([category, np.full(cuts.size, UNTRACED, dtype=np.int8)])
        path = np.concatenate([path, np.asarray(paths.path_of[nxt[cuts]], dtype=np.int64)])
        cause = np.concatenate([cause, launch[n:]])
        rest = np.arange(n, n + cuts.size)
        in_launch = rest[g0[rest] >= ls[rest]]           # the host was then in the next work's launch call
        category[in_launch] = np.where(staging[in_launch], COPY, LAUNCH)
        _by_host(view, rest[g0[rest] < ls[rest]], g0, g1, ls, launch, category, path, cause)
    # The part of a gap after the call of a pageable host-to-device copy began is the host staging
    # the pageable buffer: copy-bound, at the copy's call path (what precedes the call keeps its class).
    split = np.flatnonzero(late & ~in_call & staging & (ls > g0) & (ls < g1) & (category != COPY))
    queued = np.where(launch >= 0, ls, np.inf)
    queued = np.concatenate([queued, queued[split]])
    end = g1.copy()
    end[split] = ls[split]
    starts, ends = np.concatenate([g0, ls[split]]), np.concatenate([end, g1[split]])
    category = np.concatenate([category, np.full(split.size, COPY, dtype=np.int8)])
    path = np.concatenate([path, np.asarray([paths.host_path(int(r)) for r in launch[split].tolist()], dtype=np.int64)])
    cause = np.concatenate([cause, launch[split]])
    return np.full(starts.size, device, dtype=np.int64), starts, ends, category, path, cause, queued


def _pageable_htod_calls(view: ProfileView) -> np.ndarray:
    """Rows of the runtime calls that launched a pageable host-to-device copy (sorted)."""
    if "pageable_htod" not in view.cache:
        copies = np.flatnonzero(view.role == MEMCPY)
        rows = [int(view.paths.launch_of[i]) for i in copies.tolist()
                if view.paths.launch_of[i] >= 0 and PAGEABLE_HTOD.search(view.kernel_name(i))]
        view.cache["pageable_htod"] = np.unique(np.asarray(rows, dtype=np.int64))
    return view.cache["pageable_htod"]


def _next_launch_starts(view: ProfileView, mine: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per time: the start of the first runtime call at or after it that issued GPU work (a kernel
    launch, a copy, a memset, a graph launch) on the device whose work rows are ``mine``; inf where
    none. A sync drain ends there: from then on the host is feeding the queue again (METHOD §6)."""
    rows = np.asarray(view.paths.launch_of[mine], dtype=np.int64)
    starts = np.append(np.unique(view.trace.start[rows[rows >= 0]].astype(np.float64)), np.inf)
    return starts[np.searchsorted(starts, times, side="left")]


def _drained_by(view: ProfileView, device: int, g0: np.ndarray) -> np.ndarray:
    """Per gap start: the blocking call (waiting on ``device``) that was blocking the host when the
    GPU went idle (start <= g0 < end), the one reaching furthest; -1 if none."""
    rows, devices = blocking_calls(view)
    rows = rows[devices == device]
    if rows.size == 0:
        return np.full(g0.size, -1, dtype=np.int64)
    t = view.trace
    order = np.argsort(t.start[rows], kind="stable")
    rows = rows[order]
    starts, ends = t.start[rows].astype(np.float64), t.end[rows].astype(np.float64)
    reach = np.maximum.accumulate(ends)
    best = np.zeros(rows.size, dtype=np.int64)            # index of the call that reaches furthest so far
    for i in range(1, rows.size):
        best[i] = i if ends[i] >= ends[best[i - 1]] else best[i - 1]
    at = np.searchsorted(starts, g0, side="right") - 1
    ok = (at >= 0) & (reach[np.maximum(at, 0)] > g0)
    return np.where(ok, rows[best[np.maximum(at, 0)]], -1)


def _classify_late(view, device, todo, g0, g1, ls, next_launch, launch, category, path, cause, cut_at) -> None:
    """Classify the gaps whose next launch came after the GPU went idle (in place). A drained gap
    lasts until the next launch call starts or the sync's caller returns, whichever is first; one
    that ends so before the gap does gets that moment in ``cut_at``. A blocking call with no time
    left before the next launch (another thread launched as the GPU went idle) drained nothing."""
    paths = view.paths
    drained = _drained_by(view, device, g0[todo])
    pageable = _pageable_htod_calls(view)
    at, rows = todo[drained >= 0], drained[drained >= 0]
    stop = np.minimum(_caller_ends(view, rows), next_launch[at])
    drains = stop > g0[at]
    at, rows, stop = at[drains], rows[drains], stop[drains]
    category[at] = np.where(np.isin(rows, pageable), COPY, SYNC)
    cause[at] = rows
    path[at] = [paths.host_path(int(r)) for r in rows.tolist()]
    early = stop < g1[at]
    cut_at[at[early]] = stop[early]
    rest = np.setdiff1d(todo, at, assume_unique=True)
    if rest.size:
        _by_host(view, rest, g0, g1, ls, launch, category, path, cause)


def _caller_ends(view: ProfileView, rows: np.ndarray) -> np.ndarray:
    """Per blocking call: when the caller that issued it returned, the end of its nearest enclosing
    Python frame other than a built-in's (``<built-in method item …>`` is the call, not its caller)
    or user annotation (an NVTX range); inf where the trace has none."""
    t, parent = view.trace, view.paths.parent
    out = np.full(rows.size, np.inf)
    for k, row in enumerate(rows.tolist()):
        node = int(parent[row])
        while node >= 0:
            role = t.role[node]
            if role == ANNOTATION or (role == PYTHON and not t.names[t.name[node]].startswith("<built-in")):
                out[k] = float(t.end[node])
                break
            node = int(parent[node])
    return out


def _by_host(view, rest, g0, g1, ls, launch, category, path, cause) -> None:
    """Classify gaps ``rest`` by what the host was doing in them, no blocking call draining the GPU
    (in place): input wait, a pageable copy's staging, launch-bound, host compute or untraced."""
    t, paths = view.trace, view.paths
    pageable = _pageable_htod_calls(view)
    middle = (g0[rest] + np.maximum(g0[rest], np.minimum(ls[rest], g1[rest]))) / 2
    host = _innermost(view, t.thread[launch[rest]], middle)
    waits = data_waits(view)
    inside_wait = (covered_up_to(waits[:2], middle + 1e-9) - covered_up_to(waits[:2], middle)) > 0 \
        if waits[0].size else np.zeros(rest.size, dtype=bool)
    for k, (gap, row, launch_row) in enumerate(zip(rest.tolist(), host.tolist(), launch[rest].tolist())):
        if row >= 0 and inside_wait[k]:
            category[gap], path[gap], cause[gap] = INPUT, paths.host_path(row), row
        elif row >= 0 and row in pageable:
            category[gap], path[gap], cause[gap] = COPY, paths.host_path(row), row
        elif g1[gap] - g0[gap] <= LAUNCH_GAP_US or (row >= 0 and _on_launch_path(view, row, launch_row,
                                                                                 g1[gap] - g0[gap])) or \
                (row < 0 and g1[gap] - g0[gap] <= DISPATCH_GAP_US):
            # (no host event between two launches of the same thread: untraced Python between launches)
            category[gap] = LAUNCH                   # path and cause: the next work's, as set
        elif row >= 0:
            category[gap], path[gap], cause[gap] = HOST, paths.host_path(row), row
        else:
            category[gap], path[gap], cause[gap] = UNTRACED, paths.intern(0, NO_HOST), -1


def _on_launch_path(view: ProfileView, row: int, launch: int, gap: float) -> bool:
    """Whether host event ``row`` leads to the launch: it is the launch or encloses it, or the two
    meet inside one model operator (their innermost common ancestor is an ``nn.Module`` frame or a
    CPU operator: the host was dispatching the model's next operator, which is launch overhead)."""
    t, parent = view.trace, view.paths.parent
    chain = set()
    node = launch
    while node >= 0:
        chain.add(node)
        node = int(parent[node])
    node = row
    while node >= 0 and node not in chain:
        node = int(parent[node])
    if node < 0:
        return False
    if node == row:
        return True
    if gap > DISPATCH_GAP_US:
        return False
    return bool(_launchers(view)[row]) or t.role[node] == CPU_OP or t.names[t.name[node]].startswith("nn.Module")


def _launchers(view: ProfileView) -> np.ndarray:
    """Per trace row: whether it is a launch call or encloses one (host code that launches work)."""
    if "launchers" not in view.cache:
        parent = view.paths.parent
        mark = np.zeros(view.trace.role.size, dtype=bool)
        rows = np.unique(np.asarray(view.paths.launch_of, dtype=np.int64))
        rows = rows[rows >= 0]
        while rows.size:
            mark[rows] = True
            rows = np.asarray(parent[rows], dtype=np.int64)
            rows = np.unique(rows[rows >= 0])
            rows = rows[~mark[rows]]
        view.cache["launchers"] = mark
    return view.cache["launchers"]


def _innermost(view: ProfileView, threads: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per (thread, time): the innermost host event of that thread running at that time (-1: none)."""
    t = view.trace
    if "host_index" not in view.cache:
        host = np.flatnonzero(among(t.role, HOST_ROLES))
        rank = np.zeros(11, dtype=np.int8)
        rank[list(HOST_ROLES)] = np.arange(len(HOST_ROLES))
        order = np.lexsort((rank[t.role[host]], -t.dur[host], t.start[host], t.thread[host]))
        host = host[order]
        view.cache["host_index"] = (host, t.thread[host].astype(np.int64), t.start[host].astype(np.float64))
    host, thread_of, starts = view.cache["host_index"]
    out = np.full(times.size, -1, dtype=np.int64)
    if host.size == 0:
        return out
    for thread in np.unique(threads).tolist():
        lo, hi = np.searchsorted(thread_of, thread, "left"), np.searchsorted(thread_of, thread, "right")
        mask = threads == thread
        at = np.searchsorted(starts[lo:hi], times[mask], side="right") - 1
        found = np.where(at >= 0, host[lo + np.maximum(at, 0)], -1) if hi > lo else np.full(int(mask.sum()), -1)
        out[mask] = found
    ends = t.end
    parent = view.paths.parent
    for _ in range(256):                               # walk out of events that ended before the time
        stale = (out >= 0) & (ends[np.maximum(out, 0)] <= times)
        if not stale.any():
            break
        out[stale] = parent[out[stale]]
    return out


# ---------------------------------------------------------------- tables and folded stacks

def idle_groups(view: ProfileView) -> list[dict]:
    """Idle per (class, call path), largest first: ``callpath``, ``category``, ``idle_us``, ``gaps``,
    ``share`` (of the profile's GPU time, the findings' denominator) and ``path`` (the node id)."""
    gaps = idle_gaps(view)
    groups: dict[tuple[int, str], list] = {}
    idle = gaps.idle_us
    if gaps.start.size:
        key = gaps.category.astype(np.int64) * (len(view.paths.nodes) + 1) + gaps.path
        keys, inverse = np.unique(key, return_inverse=True)
        sums = np.bincount(inverse.ravel(), weights=idle, minlength=keys.size)
        counts = np.bincount(inverse.ravel(), minlength=keys.size)
        width = len(view.paths.nodes) + 1
        for k, s, c in zip(keys.tolist(), sums.tolist(), counts.tolist()):
            category, node = divmod(k, width)
            _add(groups, view, category, node, s, c)
    for _, node, s, c in gaps.bulk:
        _add(groups, view, UNTRACED, node, s, c)
    window = view.window_us
    out = [{"callpath": callpath, "category": CATEGORIES[category], "idle_us": round(v[0], 3), "gaps": v[1],
            "share": f"{v[0] / window:.6f}" if window > 0 else None, "paths": v[2]}
           for (category, callpath), v in groups.items() if v[0] > 0]
    return sorted(out, key=lambda g: (-g["idle_us"], g["category"], g["callpath"]))


def _add(groups: dict, view: ProfileView, category: int, node: int, idle: float, count: int) -> None:
    callpath = view.pattern(node) if node > 0 else NO_HOST
    entry = groups.setdefault((category, callpath), [0.0, 0, []])
    entry[0] += idle
    entry[1] += count
    entry[2].append(node)


def idle_by_category(view: ProfileView) -> dict[str, float]:
    """Idle microseconds per class (all devices); they add up to the devices' idle time."""
    gaps = idle_gaps(view)
    totals = np.bincount(gaps.category.astype(np.int64), weights=gaps.idle_us, minlength=len(CATEGORIES))
    out = {name: float(totals[i]) for i, name in enumerate(CATEGORIES)}
    out["untraced"] += sum(b[2] for b in gaps.bulk)
    return out


def idle_folded(view: ProfileView, unit: str = "us") -> list[str]:
    """Folded stacks of the idle (flamegraph.pl, speedscope): ``frame;…;[idle: class] <weight>``,
    the frames of the call path each gap is attributed to, weighted by its idle time (whole
    microseconds, or nanoseconds with ``unit='ns'``); stacks under half a unit are left out."""
    scale = {"us": 1.0, "ns": 1000.0}[unit]
    gaps = idle_gaps(view)
    sums: dict[tuple[int, int], float] = {}
    for category, node, idle in zip(gaps.category.tolist(), gaps.path.tolist(), gaps.idle_us.tolist()):
        sums[(category, node)] = sums.get((category, node), 0.0) + idle
    for _, node, idle, _ in gaps.bulk:
        sums[(UNTRACED, node)] = sums.get((UNTRACED, node), 0.0) + idle
    lines = []
    for (category, node), idle in sums.items():
        weight = int(round(idle * scale))
        if weight > 0:
            frames = [f.replace(";", ",").replace("\n", " ") for f in view.paths.frames(node)]
            lines.append(";".join(frames + [f"[idle: {CATEGORIES[category].replace('_', ' ')}]"]) + f" {weight}")
    return sorted(lines)


_SHARES: dict[int, tuple[weakref.ref, dict | None]] = {}


def profile_idle_shares(trace: Trace) -> dict[str, Decimal] | None:
    """Idle per class as a share of the profile's GPU time (the findings' denominator), exact
    decimals; None for a trace with no GPU work. Found once per trace (the option models and the
    evidence stage read the same trace)."""
    found = _SHARES.get(id(trace))
    if found is not None and found[0]() is trace:
        return found[1]
    shares = None
    if among(trace.role, GPU_WORK).any():
        view = ProfileView(trace, 0)
        window = Decimal(repr(view.window_us))
        if window > 0:
            shares = {k: Decimal(repr(v)) / window for k, v in idle_by_category(view).items()}
    key = id(trace)

    def forget(_: object) -> None:
        _SHARES.pop(key, None)

    _SHARES[key] = (weakref.ref(trace, forget), shares)
    return shares
