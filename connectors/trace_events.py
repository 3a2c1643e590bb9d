"""Streaming parse of Chrome trace JSON (PyTorch profiler / Kineto) and interval arithmetic.

The trace is decoded with msgspec into small typed Structs that keep only the fields the audit
needs (unknown fields are skipped by the decoder), then turned into numpy columns. Timestamps and
durations stay float64 microseconds as written; nothing is rounded.
"""
from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from connectors.errors import InputError

KERNEL, MEMCPY, MEMSET = 0, 1, 2
"""Kind codes of GPU activity events."""

GPU_KINDS = {
    "kernel": KERNEL, "Kernel": KERNEL,
    "gpu_memcpy": MEMCPY, "Memcpy": MEMCPY,
    "gpu_memset": MEMSET, "Memset": MEMSET,
}
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver", "Driver"})
SYNC_CAT = "cuda_sync"
ANNOTATION_CATS = frozenset({"user_annotation", "gpu_user_annotation"})
REQUEST_PREFIX = "costaudit.request"
SYNC_CALLS = (
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
)
GPU_SIDE_WAITS = frozenset({"Stream Wait Event"})
"""cuda_sync kinds where a GPU stream waits, not the host: not counted as sync time."""


class _Args(msgspec.Struct, gc=False):
    """The few event arguments the audit reads."""

    device: Any = None
    correlation: Any = None


class _Event(msgspec.Struct, gc=False):
    """One trace event; every other field is skipped by the decoder."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    args: _Args | None = None


class _Device(msgspec.Struct, gc=False):
    """One entry of ``deviceProperties``."""

    id: Any = None
    name: Any = None


class _Trace(msgspec.Struct, gc=False):
    """The top-level trace object."""

    traceEvents: list[_Event] | None = None
    deviceProperties: list[_Device] | None = None


@dataclass
class TraceData:
    """The parts of a trace the audit uses, as columns."""

    rows: int
    kind: np.ndarray          # int8 KERNEL / MEMCPY / MEMSET
    start: np.ndarray         # float64 us after ``base``
    end: np.ndarray           # float64 us after ``base``
    dur: np.ndarray           # float64 us, as written
    base: float               # trace time (us) that start and end count from
    device: np.ndarray        # int index into ``device_keys``
    names: list[str]
    device_keys: list[Any]
    device_names: dict[Any, str]
    sync_us: float
    spans: tuple[np.ndarray, np.ndarray]   # request spans (start, end), unmerged


@dataclass
class _Collector:
    """Accumulates the relevant events during one pass over the trace."""

    kind: list[int] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    dur: list[float] = field(default_factory=list)
    device: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    device_keys: dict[Any, int] = field(default_factory=dict)
    sync_calls: dict[Any, float] = field(default_factory=dict)
    sync_calls_uncorrelated: float = 0.0
    sync_events: list[tuple[Any, float]] = field(default_factory=list)
    span_start: list[float] = field(default_factory=list)
    span_dur: list[float] = field(default_factory=list)


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic number."""
    data = Path(path).read_bytes()
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"cannot decompress gzip: {exc}",
                         expected="a complete .json.gz Chrome trace") from None


def load_trace(path: Path) -> TraceData:
    """Decode the trace at ``path`` into columns; bad input raises InputError."""
    raw = _decode(path, read_bytes(path))
    if raw.traceEvents is None:
        raise InputError(path, "no traceEvents list",
                         expected="a Chrome trace JSON object with a 'traceEvents' list")
    col = _Collector()
    for index, event in enumerate(raw.traceEvents):
        if event.ph == "X":
            _collect(path, index, event, col)
    return _to_columns(col, len(raw.traceEvents), _device_names(raw.deviceProperties))


def _decode(path: Path, data: bytes) -> _Trace:
    """msgspec decode with errors turned into InputError."""
    try:
        return msgspec.json.decode(data, type=_Trace)
    except msgspec.ValidationError as exc:
        raise InputError(path, f"unexpected trace structure: {exc}",
                         expected="a Chrome trace JSON object with a 'traceEvents' list") from None
    except msgspec.DecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc}",
                         expected="a PyTorch profiler (Kineto) Chrome trace, .json or .json.gz") from None


def _collect(path: Path, index: int, event: _Event, col: _Collector) -> None:
    """File one complete (ph X) event under GPU activity, sync or request span."""
    cat, name = event.cat, event.name
    if not isinstance(cat, str):
        return
    name = name if isinstance(name, str) else ""
    kind = GPU_KINDS.get(cat)
    if kind is not None:
        _collect_gpu(path, index, event, kind, col)
    elif cat in RUNTIME_CATS:
        if name.startswith(SYNC_CALLS):
            _collect_sync_call(path, index, event, col)
    elif cat == SYNC_CAT:
        if name not in GPU_SIDE_WAITS:
            col.sync_events.append((_correlation(event), _time(path, index, event, "dur")))
    elif cat in ANNOTATION_CATS:
        if name.startswith(REQUEST_PREFIX):
            col.span_start.append(_time(path, index, event, "ts"))
            col.span_dur.append(_time(path, index, event, "dur"))


def _collect_gpu(path: Path, index: int, event: _Event, kind: int, col: _Collector) -> None:
    """Append one kernel / memcpy / memset event to the columns."""
    key = event.args.device if event.args is not None else None
    if key is None:
        key = event.pid
    key = key if isinstance(key, (int, str)) else str(key)
    col.kind.append(kind)
    col.start.append(_time(path, index, event, "ts"))
    col.dur.append(_time(path, index, event, "dur"))
    col.device.append(col.device_keys.setdefault(key, len(col.device_keys)))
    col.names.append(event.name if isinstance(event.name, str) else str(event.name or ""))


def _collect_sync_call(path: Path, index: int, event: _Event, col: _Collector) -> None:
    """Record a host synchronisation call, keyed by correlation id when it has one."""
    dur = _time(path, index, event, "dur")
    corr = _correlation(event)
    if corr is None:
        col.sync_calls_uncorrelated += dur
    else:
        col.sync_calls[corr] = col.sync_calls.get(corr, 0.0) + dur


def _correlation(event: _Event) -> Any:
    """The event's correlation id, or None."""
    corr = event.args.correlation if event.args is not None else None
    return corr if isinstance(corr, (int, str)) else None


def _time(path: Path, index: int, event: _Event, name: str) -> float:
    """``ts`` or ``dur`` as float us; a missing dur is 0, a negative one is clipped to 0."""
    value = getattr(event, name)
    if value is None and name == "dur":
        return 0.0
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(path, f"traceEvents[{index}] ({event.cat} {str(event.name)[:60]!r}): "
                         f"{name} is {value!r}", row=index + 1, column=name,
                         expected="a number of microseconds") from None
    if not np.isfinite(number):
        raise InputError(path, f"traceEvents[{index}]: {name} is {value!r}", row=index + 1,
                         column=name, expected="a finite number of microseconds")
    return max(number, 0.0) if name == "dur" else number


def _device_names(props: list[_Device] | None) -> dict[Any, str]:
    """deviceProperties id -> name (list position when an entry has no id)."""
    names: dict[Any, str] = {}
    for position, prop in enumerate(props or []):
        key = prop.id if isinstance(prop.id, (int, str)) else position
        names[key] = prop.name if isinstance(prop.name, str) else ""
    return names


def _to_columns(col: _Collector, rows: int, device_names: dict[Any, str]) -> TraceData:
    """Freeze the collected lists into numpy columns and total the sync time.

    Start times are taken relative to the earliest one (an exact subtraction) before durations are
    added, so that end times keep sub-nanosecond precision on epoch-scale timestamps.
    """
    start = np.asarray(col.start, dtype=np.float64)
    span_start = np.asarray(col.span_start, dtype=np.float64)
    base = float(min(start.min(initial=np.inf), span_start.min(initial=np.inf)))
    base = base if np.isfinite(base) else 0.0
    start, span_start = start - base, span_start - base
    dur = np.asarray(col.dur, dtype=np.float64)
    sync = sum(col.sync_calls.values()) + col.sync_calls_uncorrelated
    sync += sum(dur for corr, dur in col.sync_events if corr is None or corr not in col.sync_calls)
    return TraceData(
        rows=rows,
        kind=np.asarray(col.kind, dtype=np.int8),
        start=start,
        end=start + dur,
        dur=dur,
        base=base,
        device=np.asarray(col.device, dtype=np.int64),
        names=col.names,
        device_keys=list(col.device_keys),
        device_names=device_names,
        sync_us=float(sync),
        spans=(span_start, span_start + np.asarray(col.span_dur, dtype=np.float64)),
    )


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted intervals covering the same points as [starts, ends)."""
    if starts.size == 0:
        return starts.astype(np.float64), ends.astype(np.float64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    opens = np.empty(s.size, dtype=bool)
    opens[0] = True
    opens[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(opens)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last]


def length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total length of disjoint intervals."""
    return float(np.sum(ends - starts)) if starts.size else 0.0


def overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two disjoint, sorted interval sets."""
    (a_s, a_e), (b_s, b_e) = a, b
    if a_s.size == 0 or b_s.size == 0:
        return 0.0
    return float(np.sum(_covered_up_to(a_s, a_e, b_e) - _covered_up_to(a_s, a_e, b_s)))


def _covered_up_to(starts: np.ndarray, ends: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each x, the length of the disjoint intervals that lies before x."""
    before = np.concatenate(([0.0], np.cumsum(ends - starts)))
    i = np.searchsorted(starts, x, side="right")     # intervals starting at or before x
    inside = np.where(i > 0, np.clip(x - starts[np.maximum(i - 1, 0)], 0.0, None), 0.0)
    partial = np.minimum(inside, (ends - starts)[np.maximum(i - 1, 0)])
    return before[np.maximum(i - 1, 0)] * (i > 0) + partial
