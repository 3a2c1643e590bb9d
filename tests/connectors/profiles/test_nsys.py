"""NsysConnector and read_nsys: every figure checked against the export's own SQLite tables."""
from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import numpy as np
import pytest

from audit.trace.breakdown import breakdown
from audit.trace.callpath import call_paths
from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError
from connectors.profiles.events import KERNEL, MEMCPY, MEMSET, RUNTIME, SYNC, gpu_view
from connectors.profiles.nsys import NsysConnector, read_nsys
from tests.paths import DATA

NSYS = DATA / "traces" / "nsys-extrap"
EXPORTS = sorted(p.name for p in NSYS.glob("*.sqlite"))
CTX = ReadContext(datetime(2025, 1, 1, tzinfo=timezone.utc), datetime(2025, 2, 1, tzinfo=timezone.utc), "USD")
WORK_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def sql(name: str, query: str) -> list[tuple]:
    """Rows of a query on a shared export (read only)."""
    with sqlite3.connect(f"file:{NSYS / name}?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


def tables(name: str) -> set[str]:
    """Table names of an export."""
    return {r[0] for r in sql(name, "SELECT name FROM sqlite_master WHERE type='table'")}


def work_union(name: str) -> str:
    """SQL: the kernel, memcpy and memset rows of an export as one (deviceId, start, end) relation."""
    parts = [f"SELECT deviceId, start, end FROM {t}" for t in WORK_TABLES if t in tables(name)]
    return " UNION ALL ".join(parts)


def busy_ns(name: str, relation: str) -> dict[int, int]:
    """Union length per device, computed in SQL (gaps and islands over start-ordered rows)."""
    query = f"""
        WITH w AS ({relation}),
        o AS (SELECT deviceId, start, end,
                     MAX(end) OVER (PARTITION BY deviceId ORDER BY start, end
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM w),
        g AS (SELECT deviceId, start, end,
                     SUM(CASE WHEN reach IS NULL OR start > reach THEN 1 ELSE 0 END)
                         OVER (PARTITION BY deviceId ORDER BY start, end) AS island FROM o)
        SELECT deviceId, SUM(hi - lo) FROM (SELECT deviceId, island, MIN(start) lo, MAX(end) hi
                                            FROM g GROUP BY deviceId, island) GROUP BY deviceId"""
    return dict(sql(name, query))


def reader(name: str) -> NsysConnector:
    """A connector for a shared export."""
    return NsysConnector(SourceSpec(name, "profiles", "nsys", NSYS / name), CTX)


def test_three_exports_are_shared():
    assert EXPORTS == ["con_kernel.sqlite", "ex-gpu.s10.sqlite", "profile16.sqlite"]


@pytest.mark.parametrize("name", EXPORTS)
def test_row_counts_match_the_tables(name):
    trace = read_nsys(NSYS / name)
    have = tables(name)
    for role, table in ((KERNEL, WORK_TABLES[0]), (MEMCPY, WORK_TABLES[1]), (MEMSET, WORK_TABLES[2]),
                        (SYNC, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")):
        expected = sql(name, f"SELECT COUNT(*) FROM {table}")[0][0] if table in have else 0
        assert int((trace.role == role).sum()) == expected, table
    calls = sql(name, "SELECT COUNT(DISTINCT correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
    assert int((trace.role == RUNTIME).sum()) == calls            # doubled rows of old exports kept once


@pytest.mark.parametrize("name", EXPORTS)
def test_kernel_time_by_name_matches_sql(name):
    trace = read_nsys(NSYS / name)
    expected = dict(sql(name, "SELECT s.value, SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                              "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"))
    kernels = trace.role == KERNEL
    ours: dict[str, float] = {}
    for name_id, dur in zip(trace.name[kernels], trace.dur[kernels]):
        ours[trace.names[name_id]] = ours.get(trace.names[name_id], 0.0) + dur
    assert set(ours) == set(expected)
    for kernel, ns in expected.items():
        assert ours[kernel] == pytest.approx(ns / 1000.0, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("name", EXPORTS)
def test_window_busy_and_kernel_active_match_sql(name):
    (rank,) = breakdown([read_nsys(NSYS / name)])
    relation = work_union(name)
    windows = dict((d, hi - lo) for d, lo, hi in sql(name, f"SELECT deviceId, MIN(start), MAX(end) FROM ({relation}) "
                                                          "GROUP BY deviceId"))
    busy = busy_ns(name, relation)
    active = busy_ns(name, "SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert {int(d["device"]) for d in rank["devices"]} == set(windows)
    for device in rank["devices"]:
        key = int(device["device"])
        assert device["window_us"] == pytest.approx(windows[key] / 1000.0, abs=1e-6)
        assert device["busy_us"] == pytest.approx(busy[key] / 1000.0, abs=1e-6)
        assert device["idle_us"] == pytest.approx((windows[key] - busy[key]) / 1000.0, abs=1e-6)
        assert device["kernel_active_us"] == pytest.approx(active.get(key, 0) / 1000.0, abs=1e-6)


@pytest.mark.parametrize("name", [n for n in EXPORTS if n != "ex-gpu.s10.sqlite"])
def test_copy_time_by_direction_matches_sql(name):
    """Copy time per direction is the export's, less the time a copy lies under earlier work on its own
    stream: con_kernel's one DtoH copy of stream 15 (183.778 us) runs wholly inside test1 on that
    stream, which no real stream can do, and is credited once, to test1 (it counted twice before)."""
    (rank,) = breakdown([read_nsys(NSYS / name)])
    (device,) = rank["devices"]
    expected = dict(sql(name, "SELECT copyKind, SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind"))
    under_earlier_work = 183778 if name == "con_kernel.sqlite" else 0
    assert device["categories_us"]["memcpy_htod"] == pytest.approx(expected[1] / 1000.0, abs=1e-6)
    assert device["categories_us"]["memcpy_dtoh"] == pytest.approx((expected[2] - under_earlier_work) / 1000.0, abs=1e-6)
    if name == "con_kernel.sqlite":
        assert rank["overlapping_events"] == [{"device": "0", "stream": 14, "events": 1, "overlap_us": 292.893},
                                              {"device": "0", "stream": 15, "events": 2, "overlap_us": 862.397}]
    memset = sql(name, "SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMSET")[0][0]
    assert device["categories_us"]["memset"] == pytest.approx(memset / 1000.0, abs=1e-6)


@pytest.mark.parametrize("name", EXPORTS)
def test_host_sync_time_matches_sql(name):
    view = gpu_view(read_nsys(NSYS / name))
    calls = sql(name, "SELECT r.correlationId, MAX(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                      "JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cu%Synchronize%' "
                      "GROUP BY r.correlationId")
    assert calls and view.sync_us == pytest.approx(sum(ns for _, ns in calls) / 1000.0, abs=1e-6)


def test_memcpy_names_follow_kineto():
    trace = read_nsys(NSYS / "con_kernel.sqlite")
    copies = {trace.names[n] for n in trace.name[trace.role == MEMCPY]}
    assert copies == {"Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pinned)"}


def test_older_schema_devices_and_runtime_names():
    trace = read_nsys(NSYS / "ex-gpu.s10.sqlite")
    assert trace.devices[0] == {"name": "A100-PCIE-40GB", "sms": 108}
    runtime = {trace.names[n] for n in trace.name[trace.role == RUNTIME]}
    assert "cudaDeviceSynchronize" in runtime and not any(n.endswith("_v3020") for n in runtime)


def test_nvtx_ranges_appear_in_call_paths():
    trace = read_nsys(NSYS / "profile16.sqlite")
    paths = call_paths(trace)
    frames = {f for p in np.unique(paths.path_of) for f in paths.frames(int(p))}
    assert "main->test_copies" in frames and (paths.launch_of >= 0).all()


@pytest.mark.parametrize("name", EXPORTS)
def test_connector_tables_validate(name):
    frame = reader(name).read()
    row = frame.tables["profile"].iloc[0]
    assert row["kernels"] == sql(name, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    assert 0 < row["kernel_active_us"] <= row["busy_us"] <= row["gpu_window_us"]
    assert frame.tables["kernels"]["count"].sum() == row["kernels"]


def test_not_sqlite_is_an_input_error(tmp_path):
    path = tmp_path / "x.sqlite"
    path.write_bytes(b"not a database at all")
    with pytest.raises(InputError, match="not an SQLite database"):
        read_nsys(path)
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE StringIds (id INTEGER, value TEXT)").connection.commit()
    with pytest.raises(InputError, match="no CUPTI_ACTIVITY_KIND_KERNEL"):
        read_nsys(empty)
    assert len(NsysConnector(SourceSpec("e", "profiles", "nsys", empty), CTX).check()) == 1


def test_an_export_of_copies_alone_is_refused(tmp_path):
    """An export whose kernel table is empty measured kernel-active 0 beside its copies."""
    import shutil

    path = tmp_path / "copies.sqlite"
    shutil.copy(NSYS / "con_kernel.sqlite", path)
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
        assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0] > 0
    with pytest.raises(InputError, match="no CUPTI_ACTIVITY_KIND_KERNEL row, only memcpy / memset"):
        NsysConnector(SourceSpec("c", "profiles", "nsys", path), CTX).read()


def test_an_export_without_string_ids_is_named(tmp_path):
    """Without StringIds the kernels read as bare ids ("… > 39 → 54") with no word."""
    import shutil

    path = shutil.copy(NSYS / EXPORTS[0], tmp_path / "nostrings.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE StringIds")
    with pytest.raises(InputError) as raised:
        read_nsys(path)
    assert str(raised.value) == (f"{path}: no StringIds table: the names of its CUPTI_ACTIVITY_KIND_KERNEL rows "
                                 "(shortName, demangledName) would show as bare ids (expected an Nsight Systems "
                                 "SQLite export (nsys export --type sqlite) with CUDA trace tables)")
