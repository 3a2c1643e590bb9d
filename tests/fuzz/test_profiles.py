"""Fuzz the profile readers: Kineto Chrome traces (JSON, plain and gzipped; read as the `trace`
command reads them and through the connector) and Nsight Systems SQLite exports."""
from __future__ import annotations

import gzip
import json
import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from connectors.profiles.events import read_trace
from connectors.profiles.nsys import read_nsys
from tests.builders import CURRENT, gpu_events, host_events, trace_doc
from tests.fuzz.harness import FUZZ, check, mutated, nasty, read_source, scratch
from tests.fuzz.values import SCALARS, json_mutated

TRACE = trace_doc(gpu_events(CURRENT) + host_events(CURRENT))
TRACE_TEXT = json.dumps(TRACE).encode()


def analyse(path):
    """What `costaudit trace` does with the file: parse it, then every analyzer."""
    from audit.trace.analyse import analyse as run

    return run([path], None)


@FUZZ
@given(data=st.one_of(json_mutated(TRACE), mutated(TRACE_TEXT)), gz=st.booleans())
def test_kineto_trace_command(data, gz):
    with scratch() as folder:
        path = folder / ("trace.json.gz" if gz else "trace.json")
        path.write_bytes(gzip.compress(data) if gz else data)
        check(lambda: analyse(path), path)


@FUZZ
@given(data=st.one_of(json_mutated(TRACE), mutated(TRACE_TEXT)))
def test_kineto_connector(data):
    with scratch() as folder:
        path = folder / "trace.json"
        path.write_bytes(data)
        check(lambda: read_source("kineto", path), path)


TABLES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "deviceId", "streamId", "correlationId", "demangledName",
                                   "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "deviceId", "streamId", "correlationId", "copyKind",
                                   "srcKind", "dstKind", "bytes"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end", "deviceId", "streamId", "correlationId", "bytes"),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ("start", "end", "deviceId", "streamId", "correlationId", "syncType"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "globalTid", "correlationId", "nameId"),
    "NVTX_EVENTS": ("start", "end", "globalTid", "text", "textId", "eventType"),
    "StringIds": ("id", "value"),
    "TARGET_INFO_GPU": ("id", "name", "smCount"),
    "ENUM_CUDA_MEMCPY_OPER": ("id", "label"),
}
GOOD = {"start": 1000, "end": 2000, "deviceId": 0, "streamId": 7, "correlationId": 1, "demangledName": 1,
        "copyKind": 1, "srcKind": 0, "dstKind": 2, "bytes": 4096, "syncType": 3, "globalTid": 11,
        "nameId": 2, "text": "range", "textId": 1, "eventType": 59, "id": 1, "value": "kernel_a",
        "name": "NVIDIA H100", "smCount": 132, "label": "HtoD"}
CELL = st.one_of(st.sampled_from([None, 0, -1, 2 ** 62, 2 ** 63 - 1, -2 ** 63, 1.5, 2e30, float("inf"), "soon", "",
                                  b"\x00\xff"]), SCALARS.filter(lambda v: isinstance(v, (int, float, str))
                                                                and not isinstance(v, bool)
                                                                and (not isinstance(v, int) or -2 ** 63 <= v < 2 ** 63)),
                 nasty())


@st.composite
def export(draw, path):
    """An export with some of the tables the reader uses, a few rows each, some cells hostile,
    some columns missing."""
    db = sqlite3.connect(path)
    tables = draw(st.lists(st.sampled_from(sorted(TABLES)), min_size=1, max_size=len(TABLES), unique=True))
    for table in tables:
        columns = [c for c in TABLES[table] if draw(st.integers(0, 15))]
        if not columns:
            continue
        db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
        for _ in range(draw(st.integers(0, 4))):
            row = [draw(CELL) if draw(st.integers(0, 3)) == 0 else GOOD.get(c, 1) for c in columns]
            db.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})", row)
    db.commit()
    db.close()
    return path


@FUZZ
@given(st.data())
def test_nsys_export(data):
    with scratch() as folder:
        path = data.draw(export(folder / "profile.sqlite"))
        check(lambda: analyse(path), path)


@FUZZ
@given(data=st.data())
def test_nsys_bytes(data):
    with scratch() as folder:
        seed = data.draw(export(folder / "seed.sqlite")).read_bytes()
        path = folder / "profile.sqlite"
        path.write_bytes(data.draw(mutated(seed, max_ops=3)))
        check(lambda: read_nsys(path), path)
        check(lambda: read_source("nsys", path), path)


def test_fuzz_trace_seed_is_valid(tmp_path):
    """The seed itself parses (else every example would be an error, and the fuzzing shallow)."""
    path = tmp_path / "trace.json"
    path.write_bytes(TRACE_TEXT)
    assert read_trace(path).rows == len(TRACE["traceEvents"])
