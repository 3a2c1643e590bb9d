"""One decoded chunk of trace events → numpy columns (connectors/trace_events.py assembles them).

Each field is pulled out of the chunk's Structs by one list comprehension and converted to numpy
at once; strings (names, threads, devices, shapes) are interned to integer ids. Values that do not
convert (a timestamp written as 'soon') are found by a slow second pass that names the event.
"""
from __future__ import annotations

import math
from itertools import repeat
from operator import attrgetter, eq, is_not
from pathlib import Path
from typing import Any

import numpy as np

from connectors.errors import InputError

KERNEL, MEMCPY, MEMSET, SYNC, GPU_ANNOTATION = 0, 1, 2, 3, 4
RUNTIME, CPU_OP, ANNOTATION, PYTHON, OTHER, TRACE = 5, 6, 7, 8, 9, 10
ROLES = {
    "kernel": KERNEL, "gpu_memcpy": MEMCPY, "memcpy": MEMCPY, "gpu_memset": MEMSET, "memset": MEMSET,
    "cuda_sync": SYNC, "gpu_user_annotation": GPU_ANNOTATION,
    "cuda_runtime": RUNTIME, "runtime": RUNTIME, "cuda_driver": RUNTIME, "driver": RUNTIME,
    "cpu_op": CPU_OP, "operator": CPU_OP, "user_annotation": ANNOTATION,
    "python_function": PYTHON, "trace": TRACE,
}
"""Lower-cased category → role; anything else is OTHER. Codes up to GPU_ANNOTATION run on a device."""
COLUMNS = {"role": np.int8, "ts": np.float64, "dur": np.float64, "thread": np.int32,
           "device": np.int32, "stream": np.int64, "correlation": np.int64, "external": np.int64,
           "name": np.int32}
EXTRAS = {"kernel": ("rows", "occupancy", "blocks", "threads"), "copy": ("rows", "bytes"),
          "op": ("rows", "dims", "types", "stack")}
EXTRA_TYPES = {"rows": np.int64, "occupancy": np.float32, "blocks": np.int64, "threads": np.int64,
               "bytes": np.int64, "dims": np.int32, "types": np.int32, "stack": np.int32}


class Table(dict):
    """Key → dense id, in order of first appearance."""

    def id(self, key: Any) -> int:
        """The id of ``key``, allotting the next one on first sight."""
        found = self.get(key)
        if found is None:
            found = self[key] = len(self)
        return found

    def keys_list(self) -> list:
        """Keys in id order."""
        return list(self)


class Interner:
    """The string tables of one trace, shared by its chunks."""

    def __init__(self) -> None:
        self.names, self.threads, self.devices, self.strings = Table(), Table(), Table(), Table()
        self.roles: dict[Any, int] = {}
        self.rows = 0

    def role(self, cat: str) -> int:
        """Role code of a category."""
        code = self.roles.get(cat)
        if code is None:
            code = self.roles[cat] = ROLES.get(cat.lower(), OTHER)
        return code


ROW_FIELDS = attrgetter("cat", "name", "ts", "dur", "pid", "tid", "args")
ARG_FIELDS = attrgetter("device", "stream", "correlation", "external", "external_2021")
FILTER_FIELDS = attrgetter("ph", "cat", "dur")


def chunk_columns(path: Path, first: int, events: list, intern: Interner) -> dict[str, np.ndarray]:
    """Columns of the events in one chunk that have a category and a duration (or are complete).

    Fields are read by ``attrgetter`` through ``map`` and transposed by ``zip``, all loops in C;
    numbers are converted by numpy in one call per column, with a slow pass only when one does
    not convert.
    """
    keep = _kept(events)
    if keep.size == 0:
        return _empty(intern)
    kept = events if keep.size == len(events) else list(map(events.__getitem__, keep.tolist()))
    cats, names, ts, dur, pids, tids, args = zip(*map(ROW_FIELDS, kept))
    role = _roles(cats, intern)
    devices, streams, correlations, ext, ext_2021 = zip(*map(ARG_FIELDS, args))
    external = _ints(ext)
    out = {
        "role": role,
        "ts": _times(path, first, keep, events, ts, "ts"),
        "dur": _times(path, first, keep, events, dur, "dur"),
        "thread": _threads(intern.threads, pids, tids),
        "stream": _ints(streams),
        "correlation": _ints(correlations),
        "external": np.where(external != -1, external, _ints(ext_2021)),
        "name": _names(intern.names, names),
        "device": _devices(role, devices, pids, intern),
    }
    out.update(_extras(role, args, intern))
    intern.rows += keep.size
    return out


def _kept(events: list) -> np.ndarray:
    """Indices of the events with a string category and a duration (or ph X)."""
    if not events:
        return np.zeros(0, dtype=np.int64)
    ph, cats, dur = zip(*map(FILTER_FIELDS, events))
    n = len(events)
    timed = np.fromiter(map(is_not, dur, repeat(None)), dtype=bool, count=n)
    if not timed.all():
        timed |= np.fromiter(map(eq, ph, repeat("X")), dtype=bool, count=n)
    if set(map(type, cats)) != {str}:
        timed &= np.fromiter(map(isinstance, cats, repeat(str)), dtype=bool, count=n)
    return np.flatnonzero(timed)


def _empty(intern: Interner) -> dict[str, np.ndarray]:
    """Columns of a chunk with no kept events."""
    out = {name: np.zeros(0, dtype) for name, dtype in COLUMNS.items()}
    for group, fields in EXTRAS.items():
        out.update({f"{group}.{f}": np.zeros(0, EXTRA_TYPES[f]) for f in fields})
    return out


def _roles(cats: tuple, intern: Interner) -> np.ndarray:
    """Role codes of the categories (each distinct category looked up once)."""
    table = intern.roles
    for cat in set(cats) - table.keys():
        intern.role(cat)
    return np.array(list(map(table.__getitem__, cats)), dtype=np.int8)


def _lookup(table: Table, keys, key_of=lambda k: k) -> np.ndarray:
    """Interned ids of ``keys``: one C-level dict lookup each, new keys allotted afterwards."""
    ids = list(map(table.get, keys))
    if None in ids:
        for position, found in enumerate(ids):
            if found is None:
                ids[position] = table.id(key_of(keys[position]))
    return np.array(ids, dtype=np.int32)


def _names(table: Table, names: tuple) -> np.ndarray:
    """Interned name ids (a name that is not a string is keyed by its text)."""
    try:
        return _lookup(table, names, lambda n: n if n.__class__ is str else _text(n))
    except TypeError:
        return np.array([table.id(n if n.__class__ is str else _text(n)) for n in names], dtype=np.int32)


def _threads(table: Table, pids: tuple, tids: tuple) -> np.ndarray:
    """Interned (pid, tid) ids; unhashable values are keyed by their text."""
    try:
        return _lookup(table, list(zip(pids, tids)))
    except TypeError:
        return np.array([_thread(table, p, t) for p, t in zip(pids, tids)], dtype=np.int32)


def _text(value: Any) -> str:
    """A name that is not a string, as one ('' for null)."""
    return "" if value is None else str(value)


def _thread(threads: Table, pid: Any, tid: Any) -> int:
    """Thread id of (pid, tid); unhashable values are keyed by their text."""
    try:
        return threads.id((pid, tid))
    except TypeError:
        return threads.id((str(pid), str(tid)))


def _as_int(value: Any) -> int:
    """``int(value)`` as HTA reads a stream or correlation; -1 when absent or not a number."""
    if value is None or value.__class__ is bool:
        return -1
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1


def _ints(values: tuple) -> np.ndarray:
    """int64 column of integer-like arguments (-1 for absent or non-numeric ones)."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([v if v.__class__ is int else _as_int(v) for v in values], dtype=np.int64)


def _times(path: Path, first: int, keep: tuple, events: list, values: tuple, field: str) -> np.ndarray:
    """``ts`` or ``dur`` as float64 us; a missing dur is 0, a negative one is clipped to 0."""
    try:
        column = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        column = None
    if column is not None and field == "dur":
        missing = np.isnan(column)
        if missing.any():
            column[missing & np.array([v is None for v in values])] = 0.0
    if column is None or not np.isfinite(column).all():
        _raise_bad_time(path, first, keep.tolist(), [events[i] for i in keep.tolist()], field)
    return np.maximum(column, 0.0) if field == "dur" else column


def _raise_bad_time(path: Path, first: int, keep, kept: list, field: str) -> None:
    """Name the first event whose ``field`` is not a finite number of microseconds."""
    for position, event in zip(keep, kept):
        value = getattr(event, field)
        if field == "dur" and value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
        if number is None or not math.isfinite(number):
            index = first + position
            raise InputError(path, f"traceEvents[{index}] ({event.cat} {str(event.name)[:60]!r}): "
                             f"{field} is {value!r}", row=index + 1, column=field,
                             expected="a finite number of microseconds")
    raise AssertionError("no bad time found")


def _devices(role: np.ndarray, devices: tuple, pids: tuple, intern: Interner) -> np.ndarray:
    """Device index of device-side events (args.device, else pid); -1 for host events."""
    device = np.full(role.size, -1, dtype=np.int32)
    on_gpu = np.flatnonzero(role <= GPU_ANNOTATION).tolist()
    if not on_gpu:
        return device
    keys = [d if d is not None else p for d, p in
            zip(map(devices.__getitem__, on_gpu), map(pids.__getitem__, on_gpu))]
    if set(map(type, keys)) - {int, str}:
        keys = [k if isinstance(k, (int, str)) else str(k) for k in keys]
    device[on_gpu] = _lookup(intern.devices, keys)
    return device


def _extras(role: np.ndarray, args: list, intern: Interner) -> dict[str, np.ndarray]:
    """Sparse columns: launch shape of kernels, bytes of copies, shapes of CPU operators."""
    rows = intern.rows
    kernels = np.flatnonzero(role == KERNEL).tolist()
    copies = np.flatnonzero((role == MEMCPY) | (role == MEMSET)).tolist()
    ops = np.flatnonzero(role == CPU_OP).tolist()
    strings = intern.strings
    kernel_args = list(map(args.__getitem__, kernels))
    copy_args = list(map(args.__getitem__, copies))
    op_args = list(map(args.__getitem__, ops))
    return {
        "kernel.rows": np.array(kernels, dtype=np.int64) + rows,
        "kernel.occupancy": _floats(list(map(attrgetter("occupancy"), kernel_args))),
        "kernel.blocks": _products(list(map(attrgetter("grid"), kernel_args))),
        "kernel.threads": _products(list(map(attrgetter("block"), kernel_args))),
        "copy.rows": np.array(copies, dtype=np.int64) + rows,
        "copy.bytes": _ints(list(map(attrgetter("bytes"), copy_args))),
        "op.rows": np.array(ops, dtype=np.int64) + rows,
        "op.dims": _raw_ids(strings, list(map(attrgetter("dims"), op_args))),
        "op.types": _raw_ids(strings, list(map(attrgetter("types"), op_args))),
        "op.stack": _stack_ids(strings, list(map(attrgetter("stack"), op_args))),
    }


def _raw_ids(strings: Table, raws: list) -> np.ndarray:
    """Interned ids of undecoded JSON values (keyed by their bytes), -1 for absent ones."""
    ids = _lookup(strings, list(map(bytes, raws)))
    empty = strings.get(b"")
    if empty is not None:
        ids[ids == empty] = -1
    return ids


def _stack_ids(strings: Table, stacks: list) -> np.ndarray:
    """Interned ids of 2021 'Call stack' strings, -1 for absent or empty ones."""
    if not any(stacks):
        return np.full(len(stacks), -1, dtype=np.int32)
    return np.array([strings.id(s) if isinstance(s, str) and s else -1 for s in stacks], dtype=np.int32)


def _floats(values: list) -> np.ndarray:
    """float32 column of numeric arguments (NaN when absent)."""
    try:
        return np.array(values, dtype=np.float32)
    except (TypeError, ValueError):
        return np.array([_number(v) for v in values], dtype=np.float32)


def _number(value: Any) -> float:
    """A float argument, NaN when absent."""
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def _products(values: list) -> np.ndarray:
    """Products of [x, y, z] launch dimensions (-1 when absent), vectorised when all are triples."""
    try:
        triples = np.array(values, dtype=np.int64)
        if triples.ndim == 2 and triples.shape[1] == 3:
            return triples.prod(axis=1)
    except (TypeError, ValueError, OverflowError):
        pass
    return np.array([_product(v) for v in values], dtype=np.int64)


def _product(value: Any) -> int:
    """Product of a [x, y, z] launch dimension, -1 when absent."""
    if value.__class__ is list and len(value) == 3 and all(v.__class__ is int for v in value):
        return value[0] * value[1] * value[2]
    if not isinstance(value, list) or not value:
        return -1
    total = 1
    for part in value:
        if not isinstance(part, int):
            return -1
        total *= part
    return total


def concatenate(parts: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Join the chunk columns, one column at a time (each chunk's copy is freed as it goes)."""
    out: dict[str, Any] = {}
    names = list(COLUMNS) + [f"{group}.{field}" for group, fields in EXTRAS.items() for field in fields]
    for name in names:
        pieces = [part.pop(name) for part in parts]
        dtype = COLUMNS.get(name) or EXTRA_TYPES[name.split(".")[1]]
        out[name] = np.concatenate(pieces).astype(dtype, copy=False) if pieces else np.zeros(0, dtype)
        del pieces
    for group, fields in EXTRAS.items():
        out[group] = {field: out.pop(f"{group}.{field}") for field in fields}
    return out
