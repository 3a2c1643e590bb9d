"""One decoded chunk of trace events → numpy columns (connectors/profiles/events.py assembles them).

No Python loop runs per event: the fields of every event are read by ``astuple`` (or one
``attrgetter``) through ``map`` and transposed by ``zip``, the events kept are picked by one
``itemgetter`` per column, numbers are converted by ``np.fromiter`` and strings (names, threads,
devices, shapes, call stacks) are interned to integer ids by C-level dict lookups, Python code
running only for keys seen for the first time. Values that do not convert (a timestamp written as
'soon') are found by a slow second pass that names the event.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from itertools import chain, compress, repeat
from operator import attrgetter, eq, is_not, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from msgspec.structs import astuple

try:                                   # ISA-L's CRC is several times zlib's speed
    from isal.isal_zlib import crc32
except ImportError:                    # pragma: no cover
    from zlib import crc32

from connectors.profiles.times import count_left_out, left_out, time_column

KERNEL, MEMCPY, MEMSET, SYNC, GPU_ANNOTATION = 0, 1, 2, 3, 4
#: kinds of event left out of the columns and counted (connectors/profiles/times.py, :func:`_wrong_ids`)
EXCLUDED_KINDS = ("negative_dur", "missing_dur", "negative_ts", "bad_device", "no_name")
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


class Texts:
    """Ids of undecoded JSON texts (msgspec.Raw). ``key`` turns the bytes of a text seen for the
    first time into its id (interning it as it sees fit); ``ids`` maps every text seen to its id.

    Long texts (2021 call stacks are kilobytes long) are first looked up by their CRC, confirmed by
    comparing the text: a hit costs no copy and no hash of the text.
    """

    LONG = 256
    """Mean length of a column's texts from which they are looked up by CRC."""

    def __init__(self, key: Callable[[bytes], int]) -> None:
        self.key = key
        self.ids: dict[bytes, int] = {}
        self.crc_text: dict[int, msgspec.Raw] = {}   # CRC -> the long text first seen with it
        self.crc_id: dict[int, int] = {}

    def of(self, raws: list) -> np.ndarray:
        """The ids of ``raws``, new texts given ids in order of first appearance."""
        if sum(map(len, raws)) > self.LONG * len(raws):
            return self._long(raws)
        keys = list(map(bytes, raws))
        try:
            ids = list(map(self.ids.__getitem__, keys))
        except KeyError:                       # texts seen for the first time, in order
            for key in dict.fromkeys(keys):
                self.id(key)
            ids = list(map(self.ids.__getitem__, keys))
        return np.fromiter(ids, dtype=np.int32, count=len(ids))

    def id(self, blob: bytes) -> int:
        """The id of the text ``blob``."""
        found = self.ids.get(blob)
        if found is None:
            found = self.ids[blob] = self.key(blob)
        return found

    def _long(self, raws: list) -> np.ndarray:
        """Ids of long texts, by CRC."""
        crcs = list(map(crc32, raws))
        same = list(map(eq, map(self.crc_text.get, crcs), raws))
        if all(same):
            ids = list(map(self.crc_id.__getitem__, crcs))
        else:
            ids = [self.crc_id[crc] if hit else self._new(raw, crc) for hit, raw, crc in zip(same, raws, crcs)]
        return np.fromiter(ids, dtype=np.int32, count=len(ids))

    def _new(self, raw: msgspec.Raw, crc: int) -> int:
        """The id of a long text not found by its CRC (new, or its CRC taken by another text)."""
        first = self.crc_text.get(crc)
        if first is not None and first == raw:          # seen earlier in the same chunk
            return self.crc_id[crc]
        blob = bytes(raw)
        found = self.id(blob)
        if first is None:
            self.crc_text[crc], self.crc_id[crc] = msgspec.Raw(blob), found
        return found


class Interner:
    """The string tables of one trace, shared by its chunks."""

    def __init__(self) -> None:
        self.names, self.threads, self.devices, self.strings = Table(), Table(), Table(), Table()
        self.roles: dict[Any, int] = {}
        self.rows = 0
        self.excluded = dict.fromkeys(EXCLUDED_KINDS, 0)
        self.excluded_at: dict[str, tuple[str, int]] = {}   # kind -> ("traceEvents", row) of the first
        self.shapes = Texts(self._shape)       # Input Dims / Input type, keyed by their JSON bytes
        self.stacks = Texts(self._stack)       # Call stack strings, keyed by the string

    def role(self, cat: str) -> int:
        """Role code of a category."""
        code = self.roles.get(cat)
        if code is None:
            code = self.roles[cat] = ROLES.get(cat.lower(), OTHER)
        return code

    def _shape(self, blob: bytes) -> int:
        """Id of a shape's JSON text; -1 when absent (the empty text is still interned)."""
        found = self.strings.id(blob)
        return -1 if not blob else found

    def _stack(self, blob: bytes) -> int:
        """Id of a call stack from its JSON text; -1 unless it is a non-empty string."""
        text = msgspec.json.decode(blob) if blob[:1] == b'"' else None
        return self.strings.id(text) if isinstance(text, str) and text else -1


FIELDS = attrgetter("cat", "name", "pid", "tid", "ts", "dur", "args")
"""The fields of an Event that make a row, in the order of a fast-decoded complete event's own."""
PH = attrgetter("ph")
SKIP = -1
"""Role code of a category that is not a string: the event is not kept."""


def chunk_columns(path: Path, first: int, events: list, intern: Interner,
                  complete: type | None = None) -> dict[str, np.ndarray]:
    """Columns of the events in one chunk that have a category and a duration (or are complete),
    less those with a negative or no duration or no name (counted in ``intern``, never read as
    zero-duration work: connectors/profiles/times.py).

    ``events`` are Events, or (fast decoding) instances of ``complete`` (``ph`` X) among events of
    other phases that hold no more than their category and duration and are known not to be kept.
    Fields are read by one ``attrgetter`` through ``map`` and transposed by ``zip``, all loops in
    C; the events kept are picked from those columns by one ``itemgetter`` each; numbers are
    converted by numpy in one call per column, with a slow pass only when one does not convert.
    """
    rows, where = events, None
    tagged = complete is not None and bool(events) and not hasattr(events[0], "ph")
    if tagged:
        flags = list(map(complete.__instancecheck__, events))
        if not all(flags):
            rows, where = list(compress(events, flags)), np.flatnonzero(flags)
    if not rows:
        return _empty(intern)
    cats, names, pids, tids, ts, durs, args = zip(*map(astuple if tagged else FIELDS, rows))
    codes = _roles(cats, intern)
    role, keep = _kept(codes, durs, None if tagged else rows)
    if keep.size == 0:
        return _empty(intern)
    if keep.size < len(rows):
        pick = _picker(keep)
        durs, names, ts, pids, tids, args = map(pick, (durs, names, ts, pids, tids, args))
        role = role[keep]
    at = keep if where is None else where[keep]       # positions in ``events``, for error messages
    start = time_column(path, first, at, events, ts, "ts")
    dur = time_column(path, first, at, events, durs, "dur")
    bad = left_out(intern, first, at, start, dur, names)
    if bad is not None:
        good = np.flatnonzero(~bad)
        if good.size == 0:
            return _empty(intern)
        pick = _picker(good)
        names, pids, tids, args = map(pick, (names, pids, tids, args))
        role, start, dur, at = role[good], start[good], dur[good], at[good]
    ext, devices, streams, correlations, ext_2021, *extra = zip(*map(astuple, args))
    wrong = _wrong_ids(role, devices, streams)
    if wrong is not None:
        good = np.flatnonzero(~count_left_out(intern, first, at, {"bad_device": wrong}))
        if good.size == 0:
            return _empty(intern)
        pick = _picker(good)
        names, pids, tids, ext, devices, streams, correlations, ext_2021 = map(
            pick, (names, pids, tids, ext, devices, streams, correlations, ext_2021))
        extra = [pick(e) for e in extra]
        role, start, dur, at = role[good], start[good], dur[good], at[good]
    external = _ints(ext)
    out = {
        "role": role,
        "ts": start,
        "dur": dur,
        "thread": _threads(intern.threads, pids, tids),
        "stream": _ints(streams),
        "correlation": _ints(correlations),
        "external": np.where(external != -1, external, _ints(ext_2021)) if ext_2021.count(-1) < len(ext_2021)
        else external,
        "name": _names(intern.names, names),
        "device": _devices(role, devices, pids, intern),
    }
    out.update(_extras(role, extra, intern))
    intern.rows += role.size
    return out


def _picker(keep: np.ndarray):
    """A function that picks the kept positions of a tuple, as a tuple."""
    if keep.size == 1:
        only = int(keep[0])
        return lambda values: (values[only],)
    return itemgetter(*keep.tolist())


def _roles(cats: tuple, intern: Interner) -> list[int]:
    """Role code per event (each distinct category looked up once); SKIP when it is no string."""
    table = intern.roles
    try:
        return list(map(table.__getitem__, cats))
    except KeyError:                       # a category seen for the first time
        pass
    except TypeError:                      # an unhashable category (a list …) is no string
        return _roles(tuple(c if isinstance(c, str) else None for c in cats), intern)
    try:
        fresh = set(cats) - table.keys()
    except TypeError:
        return _roles(tuple(c if isinstance(c, str) else None for c in cats), intern)
    for cat in fresh:
        table[cat] = intern.role(cat) if isinstance(cat, str) else SKIP
    return list(map(table.__getitem__, cats))


def _kept(codes: list, durs: tuple, events: list | None) -> tuple[np.ndarray, np.ndarray]:
    """Role codes of all events and the indices of those with a string category and a duration
    (or ph X: all of them when ``events`` is None)."""
    n = len(codes)
    role = np.fromiter(codes, dtype=np.int8, count=n)
    kept = role != SKIP
    if events is not None and None in durs:          # complete events ('X') need no duration
        kept &= np.fromiter(map(is_not, durs, repeat(None)), dtype=bool, count=n) | \
            np.fromiter(map(eq, map(PH, events), repeat("X")), dtype=bool, count=n)
    return role, (np.flatnonzero(kept) if not kept.all() else np.arange(n))


def _empty(intern: Interner) -> dict[str, np.ndarray]:
    """Columns of a chunk with no kept events."""
    out = {name: np.zeros(0, dtype) for name, dtype in COLUMNS.items()}
    for group, fields in EXTRAS.items():
        out.update({f"{group}.{f}": np.zeros(0, EXTRA_TYPES[f]) for f in fields})
    return out


def _lookup(table: Table, keys, key_of=None) -> np.ndarray:
    """Interned ids of ``keys``: one C-level dict lookup each, new keys allotted afterwards.

    New keys are allotted in order of first appearance, found by ``dict.fromkeys`` (in C); a key
    ``key_of`` maps to another (a name that is not a string) takes the slow path.
    """
    try:
        ids = list(map(table.__getitem__, keys))
    except KeyError:                       # a key seen for the first time
        ids = _allot(table, keys, key_of)
    return np.fromiter(ids, dtype=np.int32, count=len(ids))


def _allot(table: Table, keys, key_of) -> list[int]:
    """Ids of ``keys``, some of them new (see _lookup)."""
    ids = list(map(table.get, keys))
    if None in ids:
        new = [key for key in dict.fromkeys(keys) if key not in table]
        if key_of is None or all(key_of(key) is key for key in new):
            for key in new:
                table[key] = len(table)
            ids = list(map(table.__getitem__, keys))
        else:
            for position, found in enumerate(ids):
                if found is None:
                    ids[position] = table.id(key_of(keys[position]))
    return ids


def _names(table: Table, names: tuple) -> np.ndarray:
    """Interned name ids (a name that is not a string is keyed by its text)."""
    try:
        return _lookup(table, names, _name_key)
    except TypeError:
        return np.array([table.id(_name_key(n)) for n in names], dtype=np.int32)


def _name_key(name: Any) -> Any:
    """The key of a name: itself when a string, else its text."""
    return name if name.__class__ is str else _text(name)


def _threads(table: Table, pids: tuple, tids: tuple) -> np.ndarray:
    """Interned (pid, tid) ids; unhashable values are keyed by their text."""
    try:
        try:
            ids = list(map(table.__getitem__, zip(pids, tids)))   # zip reuses its tuple: no allocation
        except KeyError:                   # a thread seen for the first time
            return _lookup(table, list(zip(pids, tids)))
        return np.fromiter(ids, dtype=np.int32, count=len(ids))
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
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return -1
    return number if -2 ** 63 <= number < 2 ** 63 else -1   # past int64: not an id a tracer writes


def _ints(values: tuple) -> np.ndarray:
    """int64 column of integer-like arguments (-1 for absent or non-numeric ones)."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        return np.array([_as_int(v) for v in values], dtype=np.int64)


def _wrong_ids(role: np.ndarray, devices: tuple, streams: tuple) -> np.ndarray | None:
    """Per event: a device-side event whose ``args.device`` or ``args.stream`` is given but is no
    integer (``"x"``, ``true``, ``1.5``): read as a device of its own it would be a phantom GPU
    with a window of its own, read as stream -1 it would join work it is not; None when none is."""
    on_gpu = np.flatnonzero(role <= GPU_ANNOTATION).tolist()
    if not on_gpu:
        return None
    values = [tuple(map(column.__getitem__, on_gpu)) for column in (devices, streams)]
    if all(set(map(type, column)) <= {int, type(None)} for column in values):
        return None
    wrong = np.zeros(role.size, dtype=bool)
    for column in values:
        wrong[on_gpu] |= np.fromiter((not _an_id(v) for v in column), dtype=bool, count=len(column))
    return wrong if wrong.any() else None


def _an_id(value: Any) -> bool:
    """An absent id, or one HTA's ``int()`` reads as written: an integer, its decimal text, a
    float with no fraction."""
    if value is None or value.__class__ is int:
        return True
    if isinstance(value, str):
        return value.strip().lstrip("-").isdigit()
    return isinstance(value, float) and value.is_integer()


def _devices(role: np.ndarray, devices: tuple, pids: tuple, intern: Interner) -> np.ndarray:
    """Device index of device-side events (args.device, else pid); -1 for host events."""
    device = np.full(role.size, -1, dtype=np.int32)
    on_gpu = np.flatnonzero(role <= GPU_ANNOTATION).tolist()
    if not on_gpu:
        return device
    keys = list(map(devices.__getitem__, on_gpu))
    if None in keys:
        keys = [d if d is not None else p for d, p in zip(keys, map(pids.__getitem__, on_gpu))]
    if set(map(type, keys)) - {int, str}:
        keys = [k if isinstance(k, (int, str)) else str(k) for k in keys]
    device[on_gpu] = _lookup(intern.devices, keys)
    return device


def _extras(role: np.ndarray, extra: list[tuple], intern: Interner) -> dict[str, np.ndarray]:
    """Sparse columns: launch shape of kernels, bytes of copies, shapes of CPU operators.

    ``extra`` holds the argument columns after the first five, in Args' order: bytes, grid, block,
    occupancy, dims, types, stack.
    """
    size, grid, block, occupancy, dims, types, stacks = extra
    rows = intern.rows
    kernel_rows = np.flatnonzero(role == KERNEL)
    copy_rows = np.flatnonzero((role == MEMCPY) | (role == MEMSET))
    op_rows = np.flatnonzero(role == CPU_OP)
    kernels, copies, ops = kernel_rows.tolist(), copy_rows.tolist(), op_rows.tolist()
    out = {
        "kernel.rows": kernel_rows + rows,
        "kernel.occupancy": _floats(list(map(occupancy.__getitem__, kernels))),
        "kernel.blocks": _products(list(map(grid.__getitem__, kernels))),
        "kernel.threads": _products(list(map(block.__getitem__, kernels))),
        "copy.rows": copy_rows + rows,
        "copy.bytes": _ints(list(map(size.__getitem__, copies))),
        "op.rows": op_rows + rows,
        "op.dims": intern.shapes.of(list(map(dims.__getitem__, ops))),
        "op.types": intern.shapes.of(list(map(types.__getitem__, ops))),
        "op.stack": _stack_ids(intern, list(map(stacks.__getitem__, ops))),
    }
    _sparse(out, "kernel", ~np.isnan(out["kernel.occupancy"]) | (out["kernel.blocks"] != -1)
            | (out["kernel.threads"] != -1))
    _sparse(out, "op", (out["op.dims"] >= 0) | (out["op.types"] >= 0) | (out["op.stack"] >= 0))
    return out


def _sparse(out: dict[str, np.ndarray], group: str, informative: np.ndarray) -> None:
    """Keep only the rows of an extras group that say something (a kernel with a launch shape or
    an occupancy, an operator with shapes or a call stack): readers look rows up by searchsorted
    and treat a missing row as "not recorded", so the others cost memory and tell nothing."""
    if informative.all():
        return
    for field in EXTRAS[group]:
        out[f"{group}.{field}"] = out[f"{group}.{field}"][informative]


def _floats(values: list) -> np.ndarray:
    """float32 column of numeric arguments (NaN when absent)."""
    try:
        return np.fromiter(values, dtype=np.float32, count=len(values))
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
    if values and set(map(type, values)) == {list} and set(map(len, values)) == {3}:
        try:
            return np.fromiter(chain.from_iterable(values), dtype=np.int64, count=3 * len(values)) \
                .reshape(-1, 3).prod(axis=1)
        except (TypeError, ValueError, OverflowError):
            pass
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


def _stack_ids(intern: Interner, raws: list) -> np.ndarray:
    """Interned ids of 2021 'Call stack' strings, -1 for absent, empty or non-string ones (no text
    of two bytes or less is a non-empty string: all absent, or '""')."""
    if max(map(len, raws), default=0) <= 2:
        return np.full(len(raws), -1, dtype=np.int32)
    return intern.stacks.of(raws)
