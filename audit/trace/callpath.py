"""Call paths of GPU work: kernel → launch → CPU operator → Python stack and nn.Module.

- kernel ↔ launch: the runtime / driver call with the kernel's correlation id (a CUDA graph
  replay's kernels all share the correlation of their ``cudaGraphLaunch``);
- launch ↔ CPU operator and Python frames: nesting by time on the launching thread (host events
  of one thread nest as a stack); when no operator encloses the launch, the operator with the
  launch's External id is used;
- 2021 traces have no ``python_function`` events: the ``Call stack`` of the outermost operator
  stands in for the Python frames.

A path is interned as (parent path, frame): ``CallPaths.frames(path)`` lists its frames outermost
first. ``path_of[i]`` is the path of the i-th GPU work event (0 = no launch found).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from connectors.profiles.blocks import compact
from connectors.profiles.events import ANNOTATION, CPU_OP, GPU_ANNOTATION, GPU_WORK, PYTHON, RUNTIME, Trace, distinct
from connectors.profiles.intervals import PER_EVENT_ROWS, among, distinct_keys, group_sums, lean, positions

if TYPE_CHECKING:  # pandas is imported where the tables are built, off the CLI's start-up path
    import pandas as pd

HOST_ROLES = (PYTHON, ANNOTATION, CPU_OP, RUNTIME)
"""Host roles, in the order that breaks ties of equal start and duration (outermost first)."""
STEP_NUMBER = re.compile(r"#\d+$")
NO_LAUNCH = "(launch not in trace)"


@dataclass
class CallPaths:
    """Interned call paths of a trace's GPU work events, and the means to find host paths."""

    trace: Trace
    work: np.ndarray                       # row indices of the GPU work events
    path_of: np.ndarray                    # path id per work event
    launch_of: np.ndarray                  # launch row per work event (-1: none found)
    op_of: np.ndarray                      # innermost CPU operator around the launch (-1: none)
    parent: np.ndarray                     # per event row: enclosing host event on its thread
    by_external: dict[int, int]
    nodes: list[tuple[int, str]] = field(default_factory=lambda: [(-1, "")])   # id -> (parent, frame)
    index: dict[tuple[int, str], int] = field(default_factory=dict)
    memo: dict[int, int] = field(default_factory=dict)
    has_ops: bool = True                   # whether any work event has a CPU operator (op_of >= 0)
    _prefix: int | None = None

    @property
    def stacks(self) -> bool:
        """Whether operators carry 2021-style ``Call stack`` strings."""
        return bool((self.trace.op["stack"] >= 0).any())

    def intern(self, parent: int, frame: str) -> int:
        """Id of the path ``parent`` + ``frame``."""
        key = (parent, frame)
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.nodes)
            self.nodes.append(key)
        return found

    def frames(self, path: int) -> list[str]:
        """Frames of a path, outermost first."""
        out = []
        while path > 0:
            path, frame = self.nodes[path]
            out.append(frame)
        return out[::-1]

    def host_path(self, row: int) -> int:
        """Path id of a host event (a launch, a sync call, an operator): its ancestors, then it."""
        return _node_path(self, row)

    def display(self, path: int) -> str:
        """A readable call path: short frames, less the prefix every GPU work path shares."""
        frames = short_frames(self.frames(path))
        cut = min(self.prefix, max(len(frames) - 1, 0))
        return " > ".join(frames[cut:]) or "(root)"

    @property
    def prefix(self) -> int:
        """How many leading short frames all GPU work paths share (harness frames)."""
        if self._prefix is None:
            shared: list[str] | None = None
            for path in distinct(self.path_of).tolist():
                frames = short_frames(self.frames(path))
                if shared is None:
                    shared = frames
                else:
                    n = 0
                    while n < min(len(shared), len(frames)) and shared[n] == frames[n]:
                        n += 1
                    shared = shared[:n]
            self._prefix = len(shared or [])
        return self._prefix


def call_paths(trace: Trace) -> CallPaths:
    """The call path of every kernel, memcpy and memset of ``trace``.

    Per work event, ``path_of``, ``launch_of`` and ``op_of`` are held in the narrowest integer
    type, and as a read-only broadcast when they hold one value throughout (no launch in the
    trace: a column of -1 costs nothing)."""
    work = positions(among(trace.role, GPU_WORK))
    launch = launches(trace, work)
    paths = CallPaths(trace=trace, work=work, path_of=np.zeros(0, dtype=np.int8), launch_of=launch,
                      op_of=np.zeros(0, dtype=np.int8), parent=host_parents(trace),
                      by_external=_operators_by_external(trace))
    annotations = _gpu_annotations(trace)
    ops: dict[int, int] = {}
    done, path_ids, op_rows = [], [], []          # per work event whose path is found one by one
    for position, row in _launch_order(launch, annotations):
        done.append(position)
        if row < 0:
            path_ids.append(paths.intern(_annotation_path(trace, paths, annotations, work[position]), NO_LAUNCH))
            op_rows.append(-1)
        else:
            path_ids.append(_node_path(paths, row))
            found = ops.get(row)
            op_rows.append(found if found is not None else ops.setdefault(row, _operator(paths, row)))
    rest = paths.intern(0, NO_LAUNCH) if not annotations[0].size and (launch < 0).any() else 0
    paths.path_of = _spread(work.size, rest, done, path_ids)
    paths.op_of = _spread(work.size, -1, done, op_rows)
    paths.has_ops = bool(op_rows) and max(op_rows) >= 0
    return paths


def _spread(size: int, rest: int, at: list[int], values: list[int]) -> np.ndarray:
    """A column of ``size`` holding ``values`` at positions ``at`` and ``rest`` elsewhere, in the
    narrowest integer type (a read-only broadcast when it holds one value throughout)."""
    found = set(values)
    if not found or found == {rest} or (len(found) == 1 and len(values) == size):
        only = values[0] if len(values) == size and found else rest
        return np.broadcast_to(np.full(1, only, dtype=np.int64), (size,))
    out = np.full(size, rest, dtype=compact(np.array([rest, min(values), max(values)])).dtype)
    out[np.asarray(at, dtype=np.int64)] = values
    return lean(out)


def _launch_order(launch: np.ndarray, annotations) -> list[tuple[int, int]]:
    """(position, launch row) of the work events whose path must be found one by one, in order.

    Work without a launch takes the path of the GPU annotations around it; when the trace has none,
    every such event has the same path, found once at the first of them (its place in the order
    keeps the path ids what a walk over every event gives) and given to the others at once.
    """
    if annotations[0].size:
        return list(enumerate(launch.tolist()))
    todo = np.flatnonzero(launch >= 0)
    missing = np.flatnonzero(launch < 0)
    if missing.size:
        todo = np.insert(todo, int(np.searchsorted(todo, missing[0])), missing[0])
    return list(zip(todo.tolist(), launch[todo].tolist()))


def _operator(paths: CallPaths, row: int) -> int:
    """The innermost CPU operator enclosing a launch (by nesting, else by External id), -1 if none."""
    trace, node = paths.trace, int(paths.parent[row])
    while node >= 0:
        if trace.role[node] == CPU_OP:
            return node
        node = int(paths.parent[node])
    return paths.by_external.get(int(trace.external[row]), -1) if trace.external[row] != -1 else -1


def launches(trace: Trace, work: np.ndarray) -> np.ndarray:
    """Row of the runtime call that launched each work event (by correlation id), -1 if none."""
    runtime = np.flatnonzero((trace.role == RUNTIME) & (trace.correlation != -1))
    if runtime.size == 0:
        return np.broadcast_to(np.full(1, -1, dtype=np.int32), work.shape)
    keys = trace.correlation[runtime]
    order = np.argsort(keys, kind="stable")
    keys, runtime = keys[order], runtime[order]
    wanted = trace.correlation if work.size == trace.role.size else trace.correlation[work]
    at = np.searchsorted(keys, wanted)
    np.minimum(at, keys.size - 1, out=at)
    found = keys[at] == wanted
    found &= wanted != -1
    out = runtime.astype(np.int32 if trace.role.size < 1 << 31 else np.int64)[at]
    del at
    out[~found] = -1
    return lean(out)


def host_parents(trace: Trace) -> np.ndarray:
    """Per event, the row of the innermost host event that encloses it on its thread (-1: none)."""
    host = np.flatnonzero(among(trace.role, HOST_ROLES))
    if host.size == 0:
        return np.broadcast_to(np.full(1, -1, dtype=np.int64), trace.role.shape)
    rank = np.zeros(11, dtype=np.int8)
    rank[list(HOST_ROLES)] = np.arange(len(HOST_ROLES))
    order = np.lexsort((rank[trace.role[host]], -trace.dur[host], trace.start[host], trace.thread[host]))
    rows = host[order].tolist()
    threads = trace.thread[host][order].tolist()
    starts = trace.start[host][order].tolist()
    ends = trace.end[host][order].tolist()
    parent = np.full(trace.role.size, -1, dtype=np.int32 if trace.role.size < 1 << 31 else np.int64)
    found = []
    stack: list[tuple[int, float]] = []
    current = None
    for row, thread, start, end in zip(rows, threads, starts, ends):
        if thread != current:
            stack, current = [], thread
        while stack and stack[-1][1] <= start:
            stack.pop()
        found.append(stack[-1][0] if stack else -1)
        stack.append((row, end))
    parent[rows] = found
    return parent


def _operators_by_external(trace: Trace) -> dict[int, int]:
    """External id -> row of the CPU operator that carries it (the first one)."""
    ops = np.flatnonzero((trace.role == CPU_OP) & (trace.external != -1))
    out: dict[int, int] = {}
    for row, ext in zip(ops.tolist(), trace.external[ops].tolist()):
        out.setdefault(ext, row)
    return out


def frame_name(trace: Trace, row: int) -> str:
    """How a host event appears in a call path (step numbers dropped, no ';')."""
    name = trace.names[trace.name[row]]
    if trace.role[row] == ANNOTATION or name.startswith("ProfilerStep"):
        name = STEP_NUMBER.sub("", name)
    return name.replace(";", ",") or "(unnamed)"


def _node_path(paths: CallPaths, row: int) -> int:
    """Path id of host event ``row`` (its ancestors first), memoised."""
    trace, memo, parent = paths.trace, paths.memo, paths.parent
    if paths.stacks and row not in memo:
        return _stacked_path(paths, row)
    chain = []
    node = row
    while node >= 0 and node not in memo:
        chain.append(node)
        node = int(parent[node])
    base = memo.get(node, 0) if node >= 0 else 0
    if node < 0 and chain:
        base = _root_base(paths, chain)
    for member in reversed(chain):
        base = memo[member] = paths.intern(base, frame_name(trace, member))
    return base


def _stacked_path(paths: CallPaths, row: int) -> int:
    """2021 traces: the ``Call stack`` of the innermost operator that has one, then the host
    events that enclose ``row`` (outermost first), then ``row``."""
    trace, chain, node = paths.trace, [], row
    while node >= 0:
        chain.append(node)
        node = int(paths.parent[node])
    base = 0
    for member in chain:
        base = _stack_path(trace, paths, member)
        if base:
            break
    for member in reversed(chain):
        base = paths.intern(base, frame_name(trace, member))
    paths.memo[row] = base
    return base


def _root_base(paths: CallPaths, chain: list[int]) -> int:
    """What precedes a chain whose outermost event has no parent.

    A launch with no enclosing operator borrows the path of the operator with its External id;
    an outermost operator with a 2021 ``Call stack`` is preceded by those Python frames.
    """
    trace, outer = paths.trace, chain[-1]
    if trace.role[outer] == RUNTIME and trace.external[outer] != -1:
        op = paths.by_external.get(int(trace.external[outer]))
        if op is not None and op != outer and op not in chain:
            return _node_path(paths, op)
    return _stack_path(trace, paths, outer)


def _stack_path(trace: Trace, paths: CallPaths, row: int) -> int:
    """Path of the Python frames in an operator's 2021 ``Call stack`` (innermost first there)."""
    ops = trace.op
    at = np.searchsorted(ops["rows"], row)
    if at >= ops["rows"].size or ops["rows"][at] != row or ops["stack"][at] < 0:
        return 0
    base = 0
    for frame in reversed(trace.strings[ops["stack"][at]].split(";")):
        if frame.strip():
            base = paths.intern(base, frame.strip())
    return base


def _gpu_annotations(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """GPU-side annotations (rows, device, start, end), to name work that has no launch."""
    rows = np.flatnonzero(trace.role == GPU_ANNOTATION)
    return rows, trace.device[rows], trace.start[rows], trace.end[rows]


def _annotation_path(trace: Trace, paths: CallPaths, annotations, row: int) -> int:
    """Path of the GPU annotations that enclose a work event without a launch (outermost first)."""
    rows, device, start, end = annotations
    inside = (device == trace.device[row]) & (start <= trace.start[row]) & (end >= trace.end[row])
    base = 0
    for member in rows[inside][np.argsort(start[inside], kind="stable")].tolist():
        base = paths.intern(base, "[gpu] " + STEP_NUMBER.sub("", trace.names[trace.name[member]]))
    return base


# ---------------------------------------------------------------- tables and folded stacks

LIBRARY_MARKERS = ("site-packages", "dist-packages", "/lib/python", "<built-in", "<frozen", "torch/",
                   "threading.py", "runpy.py", "contextlib.py", "importlib", "<string>", "functools.py")
GRAPH_LAUNCH = re.compile(r"GraphLaunch", re.IGNORECASE)
MODULE_PLUMBING = re.compile(r"\): (forward|_call_impl|_wrapped_call_impl)$")


def _is_python_frame(frame: str) -> bool:
    """Whether a frame is a Python source frame ('file.py(12): name' or '<built-in …>')."""
    return frame.startswith("<built-in") or bool(re.search(r"\.py\(\d+\)", frame))


def short_frames(frames: list[str]) -> list[str]:
    """The frames worth reading: nn.Module and user Python frames, annotations, the outermost and
    innermost CPU operator of each run, graph launches; library frames and plain launches dropped."""
    out: list[str] = []
    ops: list[str] = []

    def flush() -> None:
        if ops:
            out.extend(ops[:1] + (ops[-1:] if len(ops) > 1 else []))
            ops.clear()

    for frame in frames:
        if "::" in frame and not _is_python_frame(frame) and not frame.startswith("nn.Module"):
            ops.append(frame)          # aten::linear, c10d::allreduce_ …
            continue
        flush()
        if frame.startswith("nn.Module") or GRAPH_LAUNCH.search(frame) or frame == NO_LAUNCH:
            out.append(frame)
        elif _is_python_frame(frame):
            after_module = bool(out) and out[-1].startswith("nn.Module")
            if not any(marker in frame for marker in LIBRARY_MARKERS) and not (
                    after_module and MODULE_PLUMBING.search(frame)):
                out.append(frame)
        elif not frame.startswith(("cuda", "hip", "cu")):
            out.append(frame)          # annotations (ProfilerStep, record_function ranges)
    flush()
    return [f for i, f in enumerate(out) if i == 0 or f != out[i - 1]]


def per_event(trace: Trace, paths: CallPaths) -> bool:
    """Whether the call-path tables are summed over a per-event pandas table (see PER_EVENT_ROWS)."""
    return trace.dur.dtype.kind == "f" and paths.work.size <= PER_EVENT_ROWS


def work_table(trace: Trace, paths: CallPaths) -> "pd.DataFrame":
    """One row per GPU work event: row, path id, kernel name, role, start, end, duration (clipped to
    its stream's busy time: ``Trace.stream_overlap``)."""
    import pandas as pd

    rows = paths.work
    return pd.DataFrame({"row": rows, "path": paths.path_of, "name": trace.name[rows],
                         "role": trace.role[rows], "device": trace.device[rows],
                         "start": trace.start[rows], "end": trace.end[rows],
                         "dur": trace.stream_overlap.dur[rows]})


def pair_sums(trace: Trace, paths: CallPaths) -> "pd.DataFrame":
    """One row per (path id, kernel name) of the GPU work: ``path``, ``name``, ``dur`` (summed)
    and ``events``, in key order (the tables built from it do not depend on their order)."""
    import pandas as pd

    every = paths.work.size == trace.role.size
    name = trace.name if every else trace.name[paths.work]
    clipped = trace.stream_overlap.dur        # each stream's time counted once (docs/trace.md)
    dur = clipped if every else clipped[paths.work]
    width = max(len(trace.names), 1)
    bound = (int(paths.path_of.max(initial=0)) + 1) * width
    key: np.ndarray = paths.path_of.astype(next(t for t in (np.int8, np.int16, np.int32, np.int64) if bound <= np.iinfo(t).max))
    key *= width
    key += name
    keys, inverse = distinct_keys(key, bound)
    del key
    sums, counts = group_sums(inverse, dur, keys.size)
    return pd.DataFrame({"path": keys // width, "name": keys % width, "dur": sums, "events": counts})


def path_table(trace: Trace, paths: CallPaths) -> "pd.DataFrame":
    """Call path → GPU time: short path, its top kernel, events and GPU time, largest first."""
    frame = work_table(trace, paths) if per_event(trace, paths) else pair_sums(trace, paths)
    short = {p: paths.display(p) for p in distinct(frame["path"].to_numpy()).tolist()}
    frame["call_path"] = frame["path"].map(short)
    per_kernel = frame.groupby(["call_path", "name"], sort=False)["dur"].sum().reset_index()
    top = per_kernel.sort_values(["dur", "name"], ascending=[False, True]).drop_duplicates("call_path")
    if "events" in frame:
        table = frame.groupby("call_path", sort=False).agg(events=("events", "sum"), gpu_us=("dur", "sum"),
                                                           kernels=("name", "nunique")).reset_index()
    else:
        table = frame.groupby("call_path", sort=False).agg(events=("dur", "size"), gpu_us=("dur", "sum"),
                                                           kernels=("name", "nunique")).reset_index()
    table = table.merge(top.rename(columns={"name": "top_kernel", "dur": "top_kernel_us"}), on="call_path")
    table["top_kernel"] = [trace.names[n] for n in table["top_kernel"]]
    total = float(frame["dur"].sum())
    table["share"] = table["gpu_us"] / total if total > 0 else 0.0
    return table.sort_values(["gpu_us", "call_path"], ascending=[False, True], ignore_index=True)


def folded_stacks(trace: Trace, paths: CallPaths, unit: str = "us") -> list[str]:
    """``frame;frame;kernel <weight>`` lines (flamegraph.pl, speedscope): GPU time per full path and
    kernel, as whole microseconds (``unit='ns'``: nanoseconds); stacks under half a unit are left out."""
    scale = {"us": 1.0, "ns": 1000.0}[unit]
    if per_event(trace, paths):
        sums = work_table(trace, paths).groupby(["path", "name"], sort=False)["dur"].sum()
    else:
        sums = pair_sums(trace, paths).set_index(["path", "name"])["dur"]
    lines = []
    for (path, name), dur in sums.items():
        weight = int(round(dur * scale))
        if weight > 0:
            stack = paths.frames(int(path)) + [trace.names[name].replace(";", ",") or "(unnamed)"]
            lines.append(";".join(f.replace("\n", " ") for f in stack) + f" {weight}")
    return sorted(lines)
