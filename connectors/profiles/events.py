"""Chrome trace JSON (PyTorch profiler / Kineto) → numpy event columns, and interval arithmetic.

The trace is streamed (connectors/profiles/stream.py): each chunk of ``traceEvents`` is decoded by
msgspec into small typed Structs that keep only the fields the audit reads (unknown fields are
skipped by the decoder) and turned into numpy columns at once, so no more than a chunk of events
ever exists as Python objects. A chunk is first decoded as a tagged union on ``ph``: complete
events (``X``) in full, events of the other phases as their category and duration only; a chunk
where that is not enough (an event of another phase with a category and a duration, which is
kept, or a phase outside the union) is decoded again as plain Events, whose result is the
reference. Timestamps stay float64 microseconds exactly as written; start and
end times are taken relative to ``base`` (an exact subtraction) so that epoch-scale traces keep
sub-nanosecond precision.

Every event with a category and a duration becomes one row of a ``Trace``; its ``role`` says what
it is (a kernel, a memcpy, a runtime call, a CPU operator, a Python frame …). Both the 2021 schema
(``Kernel``, ``Runtime``, ``Operator``, ``Memcpy``, ``Memset``) and the current one are read. An
event with a negative duration, a complete event with none, or an event with no name is left out
and counted by kind (``Trace.excluded``), never read as zero-duration work.
"""
from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from itertools import filterfalse
from operator import attrgetter
from pathlib import Path
from typing import Any, Union

if "numpy" not in sys.modules and "OPENBLAS_NUM_THREADS" not in os.environ:
    # The trace analysis makes no BLAS call, and OpenBLAS's thread pool costs its start-up (about
    # 50 ms on two cores) and a core busy-waiting after it: numpy is loaded with one BLAS thread,
    # and the environment is left as it was (children and other libraries are not affected).
    # The collector has nothing to free while numpy's modules load: it is paused meanwhile.
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    collecting = gc.isenabled()
    gc.disable()
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]
        if collecting:
            gc.enable()

import msgspec
import numpy as np

from connectors.bounds import check_source_path
from connectors.profiles.blocks import accumulate, concatenate, timeline
from connectors.profiles.columns import (  # noqa: F401
    ANNOTATION,
    CPU_OP,
    EXCLUDED_KINDS,
    GPU_ANNOTATION,
    KERNEL,
    MEMCPY,
    MEMSET,
    OTHER,
    PYTHON,
    ROLES,
    RUNTIME,
    SYNC,
    TRACE,
    Interner,
    chunk_columns,
)
from connectors.profiles.intervals import (  # noqa: F401
    among,
    ascending,
    covered_up_to,
    distinct,
    length,
    member,
    merge,
    overlap,
    overlapping,
    take,
)
from connectors.profiles.stream import EXPECTED_TRACE, EventStream

GPU_WORK = (KERNEL, MEMCPY, MEMSET)
SYNC_CALLS = (
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
)
GPU_SIDE_WAITS = frozenset({"Stream Wait Event"})
"""cuda_sync kinds where a GPU stream waits, not the host: not counted as sync time."""
REQUEST_PREFIX = "costaudit.request"


class Args(msgspec.Struct, frozen=True, gc=False):
    """The event arguments the audit reads; every other one is skipped by the decoder.

    Fields are in the order Kineto writes them (msgspec finds a key at once when keys come in field
    order); trace_columns reads them by ``astuple``, in this order.
    """

    external: Any = msgspec.field(default=-1, name="External id")
    device: Any = None
    stream: Any = -1
    correlation: Any = -1
    external_2021: Any = msgspec.field(default=-1, name="external id")
    bytes: Any = None
    grid: Any = None
    block: Any = None
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    stack: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Call stack")


NO_ARGS = Args()
"""The arguments of an event that has none (shared: Args is frozen)."""


class Event(msgspec.Struct, gc=False):
    """One trace event; every other field is skipped by the decoder."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args = NO_ARGS


class Complete(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A complete event (``"ph": "X"``) of the fast decoding: an Event whose ph is known."""

    cat: Any = None            # in the order of trace_columns.FIELDS (rows are read by astuple),
    name: Any = None           # which is the order Kineto writes them in
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args = NO_ARGS


class Anything(msgspec.Struct, frozen=True, gc=False):
    """A JSON object whose keys are all skipped (so that args must be an object, as for Event)."""


ANYTHING = Anything()
PHASES = "BEiIstfMCbne"
"""The Chrome trace phases other than X that Kineto writes; a chunk with an event of another phase
(or none) is decoded as Events."""
OTHERS = tuple(msgspec.defstruct(f"Phase{ord(tag)}", [("cat", Any, None), ("dur", Any, None),
                                                       ("args", Anything, ANYTHING)],
                                 tag_field="ph", tag=tag, gc=False) for tag in PHASES)
FAST_EVENT = Union[(Complete, *OTHERS)]
"""The fast decoding of an event: complete events in full, the others as their cat and dur only."""
DUR = attrgetter("dur")


def only_complete_kept(events: list) -> bool:
    """Whether no event but the complete ones of a fast-decoded chunk is kept (has a string
    category and a duration); when one is, the chunk is decoded again as Events."""
    others = list(filterfalse(Complete.__instancecheck__, events))
    durs = list(map(DUR, others))
    if durs.count(None) == len(durs):
        return True
    return not any(d is not None and isinstance(e.cat, str) for e, d in zip(others, durs))


class Device(msgspec.Struct, gc=False):
    """One entry of ``deviceProperties``."""

    id: Any = None
    name: Any = None
    numSms: Any = None


class Distributed(msgspec.Struct, gc=False):
    """``distributedInfo``: the rank of a multi-rank job."""

    rank: Any = None
    world_size: Any = None


class Top(msgspec.Struct, gc=False):
    """The top-level trace object less its events."""

    deviceProperties: list[Device] | None = None
    distributedInfo: Distributed | None = None


"""Events left out of the columns, counted per trace: a negative duration, a complete event with
no duration (absent or null), an event with no name (absent, null or empty)."""


@dataclass
class Trace:
    """Every event with a category and a duration, as columns (one row per event).

    Times are microseconds after ``base``: ``start`` and ``dur`` are float64, or integers of the
    narrowest type when every value is a whole number (connectors/profiles/blocks.py: exact, and
    the same numbers in every sum and difference). ``ts`` (as written) is ``start + base``.
    """

    path: Path
    rows: int                  # events in traceEvents, of any kind
    role: np.ndarray           # int8 role code
    start: np.ndarray          # us after ``base`` (exact)
    dur: np.ndarray            # us as written (events with a negative or no duration are excluded)
    base: float                # the earliest timestamp of the trace (Trace-category events aside)
    thread: np.ndarray         # int32 index into ``threads``
    device: np.ndarray         # int32 index into ``device_keys`` (-1 for host events)
    stream: np.ndarray         # int64 (-1 when absent or not an integer)
    correlation: np.ndarray    # int64 (-1 when absent)
    external: np.ndarray       # int64 External id (-1 when absent)
    name: np.ndarray           # int32 index into ``names``
    names: list[str]
    threads: list[Any]         # (pid, tid) per thread index
    device_keys: list[Any]
    devices: dict[Any, dict]   # device key -> {"name", "sms"} from deviceProperties
    rank: int | None
    kernel: dict[str, np.ndarray]   # rows, occupancy, blocks, threads of kernel events
    copy: dict[str, np.ndarray]     # rows, bytes of memcpy / memset events
    op: dict[str, np.ndarray]       # rows, dims, types, stack of CPU operators (-1: none)
    strings: list[str]              # shapes, dtypes and call stacks referenced by ``op``
    source: str = "kineto"
    excluded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EXCLUDED_KINDS, 0))
    excluded_at: dict[str, tuple[str, int]] = field(default_factory=dict)   # kind -> (table, row) of the first
    written_ts: np.ndarray | None = field(default=None, repr=False)   # ts, when start + base is not it

    @property
    def ts(self) -> np.ndarray:
        """Timestamps (us) as written."""
        return self.written_ts if self.written_ts is not None else self.start + self.base

    @cached_property
    def end(self) -> np.ndarray:
        """End times in us after ``base``."""
        return self.start + self.dur

    @cached_property
    def stream_overlap(self) -> StreamOverlap:
        """GPU work that overlaps earlier work on its own stream (:func:`stream_overlap`)."""
        return stream_overlap(self)

    def device_name(self, index: int) -> str:
        """The name deviceProperties gives the device at ``index`` ('' when unknown)."""
        return self.devices.get(self.device_keys[index], {}).get("name", "")

    def names_of(self, mask: np.ndarray) -> list[str]:
        """The names of the events selected by ``mask``."""
        names = self.names
        return [names[i] for i in self.name[mask]]


@dataclass(frozen=True)
class StreamOverlap:
    """GPU work that begins before earlier work on its own stream ends. A stream runs its work in
    order, one at a time, so this cannot happen on a real GPU: the trace's clock or the trace is
    wrong. Every instant of a stream is then credited once, to the earliest-starting work that
    covers it, so that GPU time per kernel, category and call path adds up to the stream's busy
    time (its union), never more than its window (docs/trace.md)."""

    #: per event: its duration clipped to its stream's busy time (``Trace.dur`` itself when nothing overlaps)
    dur: np.ndarray
    #: per stream with overlapping work: device key, stream, the events that overlap earlier ones and
    #: the time they overlapped (us), which the clipped durations leave out
    streams: list[dict[str, Any]]


def stream_overlap(trace: Trace) -> StreamOverlap:
    """The kernels, memcpys and memsets of each device's stream that overlap earlier ones on it, and
    the durations clipped to each stream's busy time (work with no stream is not clipped)."""
    work = among(trace.role, GPU_WORK)
    work &= trace.stream >= 0
    dur, streams = trace.dur, []
    for device in distinct(take(trace.device, work)).tolist():
        on_device = work & (trace.device == device)
        for stream in distinct(take(trace.stream, on_device)).tolist():
            mine = on_device & (trace.stream == stream)
            at, covered = overlapping(take(trace.start, mine), take(trace.end, mine))
            if at.size == 0:
                continue
            rows = np.flatnonzero(mine)[at]
            end = trace.end[rows]
            clipped = np.where(end > covered, end - covered, 0)
            dur = trace.dur.copy() if dur is trace.dur else dur
            streams.append({"device": str(trace.device_keys[device]), "stream": int(stream), "events": int(at.size),
                            "overlap_us": float(dur[rows].sum()) - float(clipped.sum())})
            dur[rows] = clipped
    return StreamOverlap(dur, streams)


def overlap_text(entry: dict[str, Any]) -> str:
    """One stream's overlapping work in words (a ``StreamOverlap.streams`` entry): the source's note
    in a run, a line of ``costaudit trace``."""
    count = entry["events"]
    return (f"{count} GPU event{'s' if count != 1 else ''} on device {entry['device']} stream {entry['stream']} "
            f"began before earlier work on that stream ended (impossible on one stream: a clock or trace "
            f"defect): their {entry['overlap_us']:g} us under earlier work are counted once, with it (GPU time "
            "per kernel, category and call path is clipped to the stream's busy time)")


def times(ts: np.ndarray, dur: np.ndarray, role: np.ndarray) -> dict[str, Any]:
    """The time fields of a Trace from the timestamps and durations as written (``ts`` is reused)."""
    others = role != TRACE
    base = float(ts[others].min()) if others.any() else 0.0
    return timeline([ts], dur, base)


def read_trace(path: Path) -> Trace:
    """Stream the Chrome trace at ``path`` into columns; bad input raises InputError."""
    path = Path(path)
    check_source_path(path, expected=EXPECTED_TRACE)
    stream = EventStream(path, Event, Top, FAST_EVENT, only_complete_kept)
    map_large_arrays()
    intern = Interner()
    collecting = gc.isenabled()
    gc.disable()                  # the parse makes no cycles; the collector would only rescan chunks
    try:
        parts = accumulate(chunk_columns(path, first, events, intern, Complete) for first, events in stream)
    finally:
        if collecting:
            gc.enable()
    columns = concatenate(parts, TRACE)
    release_freed_memory()
    top = stream.top
    return Trace(path=path, rows=stream.count, names=intern.names.keys_list(),
                 threads=intern.threads.keys_list(), device_keys=intern.devices.keys_list(),
                 devices=_devices(top.deviceProperties), rank=_rank(top.distributedInfo),
                 strings=[_text(s) for s in intern.strings], excluded=dict(intern.excluded),
                 excluded_at=dict(intern.excluded_at), **columns)


MAPPED_FROM = 1 << 18
"""Allocations from this size up are mapped on their own (glibc's mmap threshold)."""


def map_large_arrays() -> None:
    """Have glibc map every allocation of MAPPED_FROM bytes or more on its own, so that freeing it
    hands it back to the system at once. By default glibc raises that threshold to the size of
    the largest block freed so far, after which the trace's blocks and the analyzers' temporaries
    come from the heap, where a freed one stays resident: a 50-million-event trace would peak at
    twice its size. (Process-wide: the setting suits any process that analyses a large trace.)"""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").mallopt(-3, MAPPED_FROM)       # M_MMAP_THRESHOLD
    except (OSError, AttributeError):      # not glibc: nothing to do
        pass


def release_freed_memory() -> None:
    """Hand the heap the parse freed back to the system (glibc keeps it otherwise: the chunks'
    small arrays and decoded events leave it fragmented, and resident)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):      # not glibc: nothing to do
        pass


def _text(value: Any) -> str:
    """An interned shape or stack as text (shapes are kept as their JSON bytes while parsing)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _devices(props: list[Device] | None) -> dict[Any, dict]:
    """deviceProperties id -> {"name", "sms"} (list position when an entry has no id)."""
    out: dict[Any, dict] = {}
    for position, prop in enumerate(props or []):
        key = prop.id if isinstance(prop.id, (int, str)) else position
        sms = prop.numSms if isinstance(prop.numSms, int) else None
        out[key] = {"name": prop.name if isinstance(prop.name, str) else "", "sms": sms}
    return out


def _rank(info: Distributed | None) -> int | None:
    """distributedInfo.rank as an int, or None."""
    if info is None or not isinstance(info.rank, (int, str)):
        return None
    try:
        return int(info.rank)
    except ValueError:
        return None


# ---------------------------------------------------------------- the GPU view of the kineto tables

@dataclass
class TraceData:
    """The GPU work of a trace (kernels, memcpys, memsets) as columns, plus host sync time.

    The columns are the trace's own (no copy) when every event of the trace is GPU work."""

    rows: int
    kind: np.ndarray          # int8 KERNEL / MEMCPY / MEMSET
    start: np.ndarray         # us after ``base``
    end: np.ndarray           # us after ``base``
    dur: np.ndarray           # us, as written, clipped to the stream's busy time (Trace.stream_overlap)
    base: float               # trace time (us) that start and end count from
    device: np.ndarray        # int index into ``device_keys``
    name: np.ndarray          # int index into ``names``
    names: list[str]          # the trace's names
    device_keys: list[Any]
    device_names: dict[Any, str]
    sync_us: float
    spans: tuple[np.ndarray, np.ndarray]   # request spans (start, end), unmerged
    trace: Trace | None = None


def load_trace(path: Path) -> TraceData:
    """The GPU view of the trace at ``path``."""
    return gpu_view(read_trace(path))


def gpu_view(trace: Trace) -> TraceData:
    """Kernels, memcpys and memsets of ``trace``; host sync time; request spans."""
    work = among(trace.role, GPU_WORK)
    return TraceData(
        rows=trace.rows, kind=take(trace.role, work), start=take(trace.start, work), end=take(trace.end, work),
        dur=take(trace.stream_overlap.dur, work), base=trace.base, device=take(trace.device, work),
        name=take(trace.name, work), names=trace.names, device_keys=trace.device_keys,
        device_names={key: props["name"] for key, props in trace.devices.items()},
        sync_us=sync_us(trace), spans=request_spans(trace), trace=trace)


def name_mask(trace: Trace, predicate) -> np.ndarray:
    """Per event: whether its name satisfies ``predicate`` (evaluated once per distinct name)."""
    hits = np.fromiter((bool(predicate(n)) for n in trace.names), dtype=bool, count=len(trace.names))
    return hits[trace.name] if trace.name.size else np.zeros(0, dtype=bool)


def sync_us(trace: Trace) -> float:
    """Host time blocked in synchronisation calls; cuda_sync events not twinned by a call count once.

    A cuda_sync event and the runtime call it records share a correlation id: the call is counted,
    its twin is not. GPU-side waits (``Stream Wait Event``) are not host time.
    """
    calls = (trace.role == RUNTIME) & name_mask(trace, lambda n: n.startswith(SYNC_CALLS))
    events = (trace.role == SYNC) & ~name_mask(trace, lambda n: n in GPU_SIDE_WAITS)
    twinned = member(trace.correlation[events], trace.correlation[calls & (trace.correlation != -1)])
    twinned &= trace.correlation[events] != -1
    return float(trace.dur[calls].sum() + trace.dur[events][~twinned].sum())


def request_spans(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the ``costaudit.request*`` annotations, host or GPU side."""
    mask = among(trace.role, (ANNOTATION, GPU_ANNOTATION))
    mask &= name_mask(trace, lambda n: n.startswith(REQUEST_PREFIX))
    return trace.start[mask], trace.end[mask]
