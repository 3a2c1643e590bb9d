"""Nsight Systems SQLite exports → the same Trace columns and tables as Kineto traces.

Read: CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET (GPU work), _RUNTIME (launches and host
synchronisation calls), _SYNCHRONIZATION (cuda_sync records), NVTX_EVENTS (push/pop and
start/end ranges, as annotations), StringIds, and TARGET_INFO_GPU / TARGET_INFO_CUDA_GPU for device
names and SM counts. Timestamps are integer nanoseconds; they become float microseconds.

Older exports (e.g. 2021.x) differ: TARGET_INFO_GPU has five columns (``deviceId``, no SM count,
which TARGET_INFO_CUDA_GPU then gives); runtime calls appear twice with one correlation id, once
as ``cudaMalloc`` and once as ``cudaMalloc_v3020``; the enum tables may be absent. Both are read.
Runtime names lose their ``_vNNNN`` suffix.

The ``profile`` table is the Kineto reader's (``profile_table``): its serving gap ratio is taken over
the served traffic's window (connectors/profiles/window.py), with NVTX ranges named
``costaudit.request*`` as request spans and ``ProfilerStep#N`` ranges as profiler steps (a step
extended to the end of the GPU rows its runtime calls launched, by ``correlationId``).
"""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from connectors.base import Connector
from connectors.bounds import EITHER, check_source_path, shown
from connectors.errors import InputError
from connectors.profiles.columns import ANNOTATION, KERNEL, MEMCPY, MEMSET, RUNTIME, SYNC, Table
from connectors.profiles.events import EXCLUDED_KINDS, Trace, gpu_view, times
from connectors.profiles.trace_tables import category_table, event_frame, kernel_table, profile_table, trace_notes
from schemas.profile import CategoryTime, KernelEvent, KernelSummary

EXPECTED = "an Nsight Systems SQLite export (nsys export --type sqlite) with CUDA trace tables"
VERSION_SUFFIX = re.compile(r"_v\d+$")
COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
              7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}
MEMORY_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
                5: "Device Static", 6: "Managed Static", 7: "Unknown"}
SYNC_TYPES = {0: "Unknown Sync", 1: "Context Sync", 2: "Event Sync", 3: "Stream Sync", 4: "Stream Wait Event"}
NVTX_RANGES = (59, 60)            # push/pop and start/end ranges
COLUMNS = ("role", "ts", "dur", "thread", "device", "stream", "correlation", "external", "name")
MAX_NS = 1 << 62
KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
NS_RANGE = "integer nanoseconds from 0 to 2^62"


class NsysConnector(Connector):
    """Reads one Nsight Systems SQLite export (.sqlite), or a folder of one job's rank exports as
    one profile (connectors/profiles/rankset.py)."""

    format_name = "nsys"
    kind = "profiles"
    accepts = EITHER
    schemas = {"profile": KernelSummary, "kernels": KernelEvent, "categories": CategoryTime}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Read the export and build the profile, kernels and categories tables."""
        if self.path.is_dir():
            from connectors.profiles.rankset import read_rank_set

            tables, rows, self.parsed = read_rank_set(self.path, self.format_name, read_rank)
            return tables, rows, (None, None)
        trace = read_nsys(self.path)
        view = kernel_view(self.path, trace)
        self.parsed = trace  # the whole export's columns, for the audit's kernel evidence
        events = event_frame(view)
        tables = {"profile": profile_table(view, self.path.name), "kernels": kernel_table(events),
                  "categories": category_table(events)}
        notes = trace_notes(trace)
        if len(notes):
            tables["notes"] = notes
        return tables, trace.rows, (None, None)


def read_rank(path: Path) -> tuple[Any, Trace, int]:
    """One rank of a rank set: its GPU view (:func:`kernel_view`), its whole export and its rows read."""
    whole = read_nsys(path)
    return kernel_view(path, whole), whole, whole.rows


def kernel_view(path: Path, trace: Trace):
    """The GPU rows of an export (``gpu_view``); an export without kernel rows (none at all, or
    copies alone: its kernel table empty or dropped) is an InputError, in a case as in
    `costaudit trace`: nothing in it measures the model's compute."""
    view = gpu_view(trace)
    if view.kind.size == 0:
        raise InputError(path, "no GPU kernel, memcpy or memset rows", expected=EXPECTED)
    if not (view.kind == KERNEL).any():
        raise InputError(path, f"no {KERNEL_TABLE} row, only memcpy / memset: nothing in it measures "
                         "the model's compute", expected=EXPECTED)
    return view


def read_nsys(path: Path) -> Trace:
    """The export at ``path`` as a Trace (source 'nsys'); bad input raises InputError."""
    path = Path(path)
    check_source_path(path, expected=EXPECTED)
    with open(path, "rb") as handle:
        head = handle.read(16)
        if not head:
            raise InputError(path, "file is empty", expected=EXPECTED)
        if head != b"SQLite format 3\x00":
            raise InputError(path, "not an SQLite database", expected=EXPECTED)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return _read(path, db)
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"cannot read the export: {exc}", expected=EXPECTED) from None
    except BadValue as exc:
        raise InputError(path, f"{exc.table}: {exc.column} is {cell(exc.value)}", row=exc.row,
                         column=exc.column, expected=exc.expected) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(path, f"a cell of an unexpected type ({exc})", expected=EXPECTED) from None
    finally:
        db.close()


def _read(path: Path, db: sqlite3.Connection) -> Trace:
    """Every table the analysis uses, concatenated into Trace columns."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables and "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables:
        raise InputError(path, "no CUPTI_ACTIVITY_KIND_KERNEL or _MEMCPY table", expected=EXPECTED)
    if "StringIds" not in tables and KERNEL_TABLE in tables:   # every nsys export has one
        raise InputError(path, f"no StringIds table: the names of its {KERNEL_TABLE} rows (shortName, "
                               "demangledName) would show as bare ids", expected=EXPECTED)
    strings = {key: _text(value) for key, value in db.execute("SELECT id, value FROM StringIds")} \
        if "StringIds" in tables else {}
    names, threads, devices = Table(), Table(), Table()
    parts = [part for part in (
        _kernels(db, tables, strings, names, devices),
        _memcpys(db, tables, names, devices),
        _memsets(db, tables, names, devices),
        _syncs(db, tables, names, devices),
        _runtime(db, tables, strings, names, threads),
        _nvtx(db, tables, strings, names, threads),
    ) if part is not None]
    columns: dict[str, Any] = {c: np.concatenate([p[c] for p in parts]) for c in COLUMNS}
    order = np.argsort(columns["ts"], kind="stable")
    columns = {c: v[order] for c, v in columns.items()}
    extras = _extras(parts, order)
    columns.update(times(columns.pop("ts"), columns.pop("dur"), columns["role"]))
    negative = [p for p in parts if p["negative"]]
    return Trace(path=path, rows=int(sum(p["role"].size + p["negative"] for p in parts)), names=names.keys_list(),
                 threads=threads.keys_list(), device_keys=devices.keys_list(),
                 devices=_device_props(db, tables), rank=None, strings=[], source="nsys",
                 op={"rows": np.zeros(0, np.int64), "dims": np.zeros(0, np.int32),
                     "types": np.zeros(0, np.int32), "stack": np.zeros(0, np.int32)},
                 excluded={**dict.fromkeys(EXCLUDED_KINDS, 0), "negative_dur": sum(p["negative"] for p in negative)},
                 excluded_at={"negative_dur": (negative[0]["table"], negative[0]["first_negative"])} if negative else {},
                 **extras, **columns)


def _frame(role: int, start, end, thread, device, stream, correlation, name,
           table: str = "") -> dict:
    """Trace columns of one table's rows (ns integers in, us floats out); rows that end before
    they start are left out and counted (``negative``; ``first_negative``: the row of the first,
    from 1; ``good``: the rows kept, for the caller's extras)."""
    start, end = _times(start, table, "start"), _times(end, table, "end")
    n = start.size
    part = {"role": np.full(n, role, np.int8), "ts": start / 1000.0, "dur": (end - start) / 1000.0,
            "thread": np.asarray(thread, np.int32).reshape(n), "device": np.asarray(device, np.int32).reshape(n),
            "stream": _integers(stream, table, "streamId").reshape(n),
            "correlation": _integers(correlation, table, "correlationId").reshape(n),
            "external": np.full(n, -1, np.int64), "name": np.asarray(name, np.int32).reshape(n),
            "table": table, "negative": 0, "first_negative": 0, "good": None}
    bad = end < start
    if bad.any():
        good = ~bad
        for column in COLUMNS:
            part[column] = part[column][good]
        part.update(negative=int(bad.sum()), first_negative=int(np.argmax(bad)) + 1, good=good)
    return part


def _kept(part: dict, values: np.ndarray) -> np.ndarray:
    """An extras column, for the rows :func:`_frame` kept."""
    return values if part["good"] is None else values[part["good"]]


class BadValue(Exception):
    """A cell of the export that is not what its column holds (turned into an InputError)."""

    def __init__(self, table: str, column: str, row: int, value, expected: str):
        self.table, self.column, self.row, self.value, self.expected = table, column, row, value, expected
        super().__init__(f"{table}.{column} is {cell(value)}")


def _text(value) -> str:
    """A text cell as a string (SQLite columns take any type): '' for NULL, bytes decoded."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def cell(value) -> str:
    """A cell as an error message shows it (NULL for None)."""
    return "NULL" if value is None else shown(value)


def _integers(values, table: str, column: str, expected: str = "an integer") -> np.ndarray:
    """An int64 column of a table's rows; a cell that is no integer (NULL, text, 2e30) is a BadValue."""
    try:
        return np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    for row, value in enumerate(values, 1):
        try:
            np.asarray([value], dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            raise BadValue(table, column, row, value, expected) from None
    raise AssertionError("no bad value found")


def _times(values, table: str, column: str) -> np.ndarray:
    """Nanosecond timestamps: integers from 0 to MAX_NS (2^62, the year 2116 after the epoch)."""
    column_values = _integers(values, table, column, NS_RANGE)
    bad = np.flatnonzero((column_values < 0) | (column_values >= MAX_NS))
    if bad.size:
        row = int(bad[0])
        raise BadValue(table, column, row + 1, values[row], NS_RANGE)
    return column_values


def _rows(db, sql: str) -> list[tuple]:
    """All rows of a query."""
    return db.execute(sql).fetchall()


def _kernels(db, tables, strings, names: Table, devices: Table):
    """Kernel rows, with launch shape extras."""
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        return None
    rows = _rows(db, "SELECT start, end, deviceId, streamId, COALESCE(correlationId, -1), demangledName, "
                     "gridX * gridY * gridZ, blockX * blockY * blockZ FROM CUPTI_ACTIVITY_KIND_KERNEL")
    cols = list(zip(*rows)) if rows else [[]] * 8
    part = _frame(KERNEL, cols[0], cols[1], [-1] * len(rows), [devices.id(d) for d in cols[2]], cols[3],
                  cols[4], [names.id(strings.get(n, str(n))) for n in cols[5]], KERNEL_TABLE)
    part["kernel.blocks"] = _kept(part, _integers(cols[6], KERNEL_TABLE, "gridX * gridY * gridZ"))
    part["kernel.threads"] = _kept(part, _integers(cols[7], KERNEL_TABLE, "blockX * blockY * blockZ"))
    return part


def _enum(db, tables, name: str, fallback: dict[int, str]) -> dict[int, str]:
    """An nsys enum table as {id: short label}, else the documented values."""
    if name not in tables:
        return fallback
    columns = [row[1] for row in db.execute(f"PRAGMA table_info({name})")]
    label = "label" if "label" in columns else "name"
    out = {}
    for key, text in db.execute(f"SELECT id, {label} FROM {name}"):
        text = re.sub(r"^CUDA_(MEMOPR_MEMORY_KIND|MEMCPY_KIND)_", "", str(text)).replace("_", " ").title()
        out[int(key)] = fallback.get(int(key), text) if text.lower() in ("", "none") else text
    return out


def _memcpys(db, tables, names: Table, devices: Table):
    """Memcpy rows named as Kineto names them: 'Memcpy HtoD (Pinned -> Device)'."""
    if "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables:
        return None
    kinds = _enum(db, tables, "ENUM_CUDA_MEMCPY_OPER", COPY_KINDS)
    memory = _enum(db, tables, "ENUM_CUDA_MEM_KIND", MEMORY_KINDS)
    rows = _rows(db, "SELECT start, end, deviceId, streamId, COALESCE(correlationId, -1), copyKind, "
                     "srcKind, dstKind, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    cols = list(zip(*rows)) if rows else [[]] * 9
    labels = [f"Memcpy {_direction(kinds.get(k, str(k)))} ({memory.get(s, '?')} -> {memory.get(d, '?')})"
              for k, s, d in zip(cols[5], cols[6], cols[7])]
    part = _frame(MEMCPY, cols[0], cols[1], [-1] * len(rows), [devices.id(d) for d in cols[2]], cols[3],
                  cols[4], [names.id(label) for label in labels], "CUPTI_ACTIVITY_KIND_MEMCPY")
    part["copy.bytes"] = _kept(part, _integers(cols[8], "CUPTI_ACTIVITY_KIND_MEMCPY", "bytes"))
    return part


def _direction(label: str) -> str:
    """'HtoD' from an enum label such as 'Host To Device' or 'HtoD'."""
    compact = label.replace(" ", "").replace("-", "").lower()
    for short, long in (("HtoD", "hosttodevice"), ("DtoH", "devicetohost"), ("DtoD", "devicetodevice"),
                        ("HtoH", "hosttohost"), ("PtoP", "peertopeer")):
        if compact in (short.lower(), long):
            return short
    return label


def _memsets(db, tables, names: Table, devices: Table):
    """Memset rows, named 'Memset (Device)'."""
    if "CUPTI_ACTIVITY_KIND_MEMSET" not in tables:
        return None
    rows = _rows(db, "SELECT start, end, deviceId, streamId, COALESCE(correlationId, -1), bytes "
                     "FROM CUPTI_ACTIVITY_KIND_MEMSET")
    cols = list(zip(*rows)) if rows else [[]] * 6
    part = _frame(MEMSET, cols[0], cols[1], [-1] * len(rows), [devices.id(d) for d in cols[2]], cols[3],
                  cols[4], [names.id("Memset (Device)")] * len(rows), "CUPTI_ACTIVITY_KIND_MEMSET")
    part["copy.bytes"] = _kept(part, _integers(cols[5], "CUPTI_ACTIVITY_KIND_MEMSET", "bytes"))
    return part


def _syncs(db, tables, names: Table, devices: Table):
    """Synchronisation records, named as Kineto's cuda_sync events ('Stream Sync' …)."""
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" not in tables:
        return None
    types = _enum(db, tables, "ENUM_CUPTI_SYNC_TYPE", SYNC_TYPES)
    rows = _rows(db, "SELECT start, end, deviceId, streamId, COALESCE(correlationId, -1), syncType "
                     "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    cols = list(zip(*rows)) if rows else [[]] * 6
    streams = [s if s < 2 ** 31 - 1 else -1 for s in cols[3]]
    return _frame(SYNC, cols[0], cols[1], [-1] * len(rows), [devices.id(d) for d in cols[2]], streams,
                  cols[4], [names.id(SYNC_TYPES.get(t, types.get(t, str(t)))) for t in cols[5]],
                  "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")


def _runtime(db, tables, strings, names: Table, threads: Table):
    """Runtime calls, one per correlation id (the outermost when an old export doubles them)."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        return None
    rows = _rows(db, "SELECT start, end, globalTid, COALESCE(correlationId, -1), nameId "
                     "FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY correlationId, start, end DESC")
    kept, seen = [], set()
    for row in rows:
        if row[3] != -1 and row[3] in seen:
            continue
        seen.add(row[3])
        kept.append(row)
    cols = list(zip(*kept)) if kept else [[]] * 5
    label = [names.id(VERSION_SUFFIX.sub("", strings.get(n, str(n)))) for n in cols[4]]
    return _frame(RUNTIME, cols[0], cols[1], [threads.id(t) for t in cols[2]], [-1] * len(kept),
                  [-1] * len(kept), cols[3], label, "CUPTI_ACTIVITY_KIND_RUNTIME")


def _nvtx(db, tables, strings, names: Table, threads: Table):
    """NVTX ranges as host annotations on their thread."""
    if "NVTX_EVENTS" not in tables:
        return None
    columns = {row[1] for row in db.execute("PRAGMA table_info(NVTX_EVENTS)")}
    text_id = "textId" if "textId" in columns else "NULL"
    rows = _rows(db, f"SELECT start, end, globalTid, text, {text_id} FROM NVTX_EVENTS "
                     f"WHERE end IS NOT NULL AND eventType IN {NVTX_RANGES}")
    cols = list(zip(*rows)) if rows else [[]] * 5
    label = [names.id(_text(t) if t is not None else strings.get(i, "")) for t, i in zip(cols[3], cols[4])]
    return _frame(ANNOTATION, cols[0], cols[1], [threads.id(t) for t in cols[2]], [-1] * len(rows),
                  [-1] * len(rows), [-1] * len(rows), label, "NVTX_EVENTS")


def _extras(parts: list[dict], order: np.ndarray) -> dict:
    """Kernel launch shapes and copy bytes, keyed by row after sorting."""
    where = np.empty(order.size, dtype=np.int64)
    where[order] = np.arange(order.size)
    offset, kernel, copy = 0, {"rows": [], "blocks": [], "threads": []}, {"rows": [], "bytes": []}
    for part in parts:
        rows = where[offset:offset + part["role"].size]
        if "kernel.blocks" in part:
            kernel["rows"].append(rows)
            kernel["blocks"].append(part["kernel.blocks"])
            kernel["threads"].append(part["kernel.threads"])
        if "copy.bytes" in part:
            copy["rows"].append(rows)
            copy["bytes"].append(part["copy.bytes"])
        offset += part["role"].size
    kernel = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in kernel.items()}
    copy = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in copy.items()}
    kernel["occupancy"] = np.full(kernel["rows"].size, np.nan, np.float32)
    return {"kernel": _sorted(kernel), "copy": _sorted(copy)}


def _sorted(table: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A sparse extras table ordered by row."""
    order = np.argsort(table["rows"], kind="stable")
    return {k: v[order] for k, v in table.items()}


def _device_props(db, tables) -> dict:
    """deviceId -> {"name", "sms"} from TARGET_INFO_GPU (newer) or TARGET_INFO_CUDA_GPU (older)."""
    out: dict = {}
    for table, key, sms in (("TARGET_INFO_CUDA_GPU", "deviceId", "numMultiprocessors"),
                            ("TARGET_INFO_GPU", "id", "smCount"), ("TARGET_INFO_GPU", "deviceId", None)):
        if table not in tables:
            continue
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if key not in columns:
            continue
        sm = sms if sms in columns else "NULL"
        for device, name, count in db.execute(f"SELECT {key}, name, {sm} FROM {table}"):
            entry = out.setdefault(device, {"name": _text(name), "sms": None})
            entry["sms"] = entry["sms"] or (int(count) if count else None)
    return out
